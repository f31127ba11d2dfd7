//! Live fan-out: one broadcast channel per watched session. Events are published only after
//! they are committed (write before fan-out); a watcher that lags is caught up from Postgres by
//! [`super::stream::Follower`], never silently skipped.
//!
//! The feed is bounded in bytes: it keeps the last [`CHANNEL_CAPACITY`] events of a session, and
//! an event whose JSON is over [`LIVE_INLINE_MAX_BYTES`] travels without it (watchers read it
//! from Postgres), so a session's feed holds at most `CHANNEL_CAPACITY × LIVE_INLINE_MAX_BYTES`
//! (32 MiB) however large its events are.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;
use tokio::sync::broadcast;

use super::SharedEvent;
use crate::ids::SessionId;

/// Events buffered per session for slow watchers before they lag (and catch up from Postgres):
/// as many as one group commit stores (`appender::MAX_BATCH_EVENTS`), so a watcher that keeps up
/// never lags on a full batch.
pub const CHANNEL_CAPACITY: usize = 4096;
/// Largest event JSON the live feed carries; larger events go out as a marker without their JSON
/// (watchers read them from Postgres). With [`CHANNEL_CAPACITY`], at most 32 MiB per session.
pub const LIVE_INLINE_MAX_BYTES: usize = 8 << 10;

/// Question changes buffered for an inbox watcher before it lags (a lagging one re-reads).
pub const QUESTIONS_CAPACITY: usize = 16;

/// The live feed of every watched session, and a tick whenever a permission question is asked
/// or answered anywhere (the approvals inbox re-reads on it).
pub struct Hub {
    channels: Mutex<HashMap<SessionId, broadcast::Sender<Arc<SharedEvent>>>>,
    questions: broadcast::Sender<()>,
}

impl Default for Hub {
    fn default() -> Self {
        Self { channels: Mutex::default(), questions: broadcast::channel(QUESTIONS_CAPACITY).0 }
    }
}

impl Hub {
    /// Starts receiving the live events of a session.
    pub fn subscribe(&self, session_id: SessionId) -> broadcast::Receiver<Arc<SharedEvent>> {
        let mut channels = self.channels.lock();
        channels.entry(session_id).or_insert_with(|| broadcast::channel(CHANNEL_CAPACITY).0).subscribe()
    }

    /// Hears of every question asked or answered (after its commit).
    pub fn subscribe_questions(&self) -> broadcast::Receiver<()> {
        self.questions.subscribe()
    }

    /// Sends committed events to their sessions' watchers, in order.
    pub fn publish(&self, events: &[Arc<SharedEvent>]) {
        if events.iter().any(|e| matches!(e.kind, super::EventKind::Permission | super::EventKind::PermissionResolved))
        {
            // Nobody listening is fine.
            let _ = self.questions.send(());
        }
        let mut channels = self.channels.lock();
        for event in events {
            let session_id = event.session_id;
            if let Some(sender) = channels.get(&session_id)
                && sender.send(live(event)).is_err()
            {
                // Nobody watches any more.
                channels.remove(&session_id);
            }
        }
    }

    /// Whether anyone on this process watches the session.
    pub fn is_watched(&self, session_id: SessionId) -> bool {
        let channels = self.channels.lock();
        channels.get(&session_id).is_some_and(|sender| sender.receiver_count() > 0)
    }

    /// Tells the inboxes a question was asked or answered (by another replica).
    pub fn ring_questions(&self) {
        let _ = self.questions.send(());
    }

    /// Tells a session's watchers that events up to `seq` are stored (by another replica) and
    /// not in the feed: those behind read them from Postgres (a marker without JSON, as for a
    /// large event).
    pub fn nudge(&self, session_id: SessionId, seq: crate::ids::Seq) {
        let channels = self.channels.lock();
        if let Some(sender) = channels.get(&session_id) {
            let _ = sender.send(marker(session_id, seq));
        }
    }

    /// Tells every watcher to read Postgres for what it may have missed (the notifications of
    /// other replicas were lost while their connection was down).
    pub fn nudge_all(&self) {
        let channels = self.channels.lock();
        for (session_id, sender) in channels.iter() {
            let _ = sender.send(marker(*session_id, crate::ids::Seq::MAX));
        }
    }

    /// Ends the live feeds of deleted sessions: their watchers see the feed close.
    pub fn close(&self, session_ids: &[SessionId]) {
        let mut channels = self.channels.lock();
        for session_id in session_ids {
            channels.remove(session_id);
        }
    }
}

/// The event as the live feed carries it: itself, or a marker without its JSON when it is large.
fn live(event: &Arc<SharedEvent>) -> Arc<SharedEvent> {
    if event.json.len() <= LIVE_INLINE_MAX_BYTES {
        return Arc::clone(event);
    }
    marker(event.session_id, event.seq)
}

/// An event's place without its JSON: watchers that have not seen `seq` read Postgres.
fn marker(session_id: SessionId, seq: crate::ids::Seq) -> Arc<SharedEvent> {
    Arc::new(SharedEvent { session_id, seq, kind: super::EventKind::Notice, json: Arc::from("") })
}
