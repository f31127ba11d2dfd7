//! Live fan-out: one broadcast channel per watched session. Events are published only after
//! they are committed (write before fan-out); a watcher that lags is caught up from Postgres by
//! [`super::stream::Follower`], never silently skipped.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::broadcast;

use super::SharedEvent;
use crate::ids::SessionId;

/// Events buffered per session for slow watchers before they lag (and catch up from Postgres).
const CHANNEL_CAPACITY: usize = 4096;

/// The live feed of every watched session.
#[derive(Default)]
pub struct Hub {
    channels: Mutex<HashMap<SessionId, broadcast::Sender<Arc<SharedEvent>>>>,
}

impl Hub {
    /// Starts receiving the live events of a session.
    pub fn subscribe(&self, session_id: SessionId) -> broadcast::Receiver<Arc<SharedEvent>> {
        let mut channels = self.channels.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        channels.entry(session_id).or_insert_with(|| broadcast::channel(CHANNEL_CAPACITY).0).subscribe()
    }

    /// Sends committed events to their sessions' watchers, in order.
    pub fn publish(&self, events: &[Arc<SharedEvent>]) {
        let mut channels = self.channels.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        for event in events {
            let session_id = event.session_id;
            if let Some(sender) = channels.get(&session_id)
                && sender.send(Arc::clone(event)).is_err()
            {
                // Nobody watches any more.
                channels.remove(&session_id);
            }
        }
    }

    /// Ends the live feeds of deleted sessions: their watchers see the feed close.
    pub fn close(&self, session_ids: &[SessionId]) {
        let mut channels = self.channels.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        for session_id in session_ids {
            channels.remove(session_id);
        }
    }
}
