//! The cursor stream: every stored event after the cursor, then live events, with no gap and
//! no duplicate. Subscribe to the live feed first, read the stored range, then forward live
//! events whose seq is the next one; on any gap (or lag) read the missing range from Postgres.
//! Catch-up pages are bounded by bytes as well as by count ([`BACKFILL_PAGE_BYTES`]): a watcher
//! holds at most two pages (the one being sent and the one read ahead). An event the live feed
//! carries without its JSON (too large to keep in the feed, see [`super::hub`]) is read from
//! Postgres like a gap.

use std::sync::Arc;

use sqlx::PgPool;
use tokio::sync::broadcast;

use super::SharedEvent;
use super::hub::Hub;
use crate::ids::{Seq, SessionId};
use crate::store;

/// Most events read from Postgres per round trip while catching up.
pub const BACKFILL_PAGE: i64 = 2000;
/// Most payload bytes per catch-up page (one larger event still comes alone).
pub const BACKFILL_PAGE_BYTES: i64 = 4 << 20;

/// A page being read ahead: the cursor it starts after, and the read.
type Prefetch = (Seq, tokio::task::JoinHandle<Result<store::events::Page, sqlx::Error>>);

/// Follows one session's log from a cursor.
pub struct Follower {
    pool: PgPool,
    session_id: SessionId,
    live: broadcast::Receiver<Arc<SharedEvent>>,
    last_sent: Seq,
    catching_up: bool,
    /// While catching up, the next page is read while the current one is being sent.
    prefetch: Option<Prefetch>,
}

impl Drop for Follower {
    fn drop(&mut self) {
        if let Some((_, read)) = self.prefetch.take() {
            read.abort();
        }
    }
}

impl Follower {
    /// Subscribes to the live feed, then starts from the stored events after `after`, read on
    /// `pool` (the server's event log reader: `store::connect_log_reader`).
    pub fn new(pool: PgPool, hub: &Hub, session_id: SessionId, after: Seq) -> Self {
        let live = hub.subscribe(session_id);
        Self { pool, session_id, live, last_sent: after, catching_up: true, prefetch: None }
    }

    /// The next events in order; `None` once the session is deleted. Cancel-safe: the cursor
    /// moves only when events are returned.
    pub async fn next_batch(&mut self) -> Result<Option<Vec<Arc<SharedEvent>>>, sqlx::Error> {
        loop {
            if self.catching_up {
                let page = match self.prefetch.take() {
                    Some((after, read)) if after == self.last_sent => match read.await {
                        Ok(page) => page?,
                        Err(_) => read_page(&self.pool, self.session_id, self.last_sent).await?,
                    },
                    _ => read_page(&self.pool, self.session_id, self.last_sent).await?,
                };
                if !page.more {
                    self.catching_up = false;
                }
                let stored = page.events;
                if let Some(last) = stored.last() {
                    self.last_sent = last.seq;
                    if self.catching_up {
                        let (pool, session_id, after) = (self.pool.clone(), self.session_id, self.last_sent);
                        let read = tokio::spawn(async move { read_page(&pool, session_id, after).await });
                        self.prefetch = Some((after, read));
                    }
                    crate::metrics::stream_sent("catch_up", stored.len());
                    return Ok(Some(stored));
                }
                self.catching_up = false;
                continue;
            }
            match self.live.recv().await {
                Ok(event) if event.seq <= self.last_sent => continue,
                Ok(event) if event.seq == self.last_sent + 1 && !event.json.is_empty() => {
                    self.last_sent = event.seq;
                    let mut batch = vec![event];
                    self.drain_ready(&mut batch);
                    crate::metrics::stream_sent("live", batch.len());
                    return Ok(Some(batch));
                }
                // A gap (an event committed by another writer reached us late) or a lag:
                // everything published is committed, so Postgres has the missing range.
                Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {
                    crate::metrics::stream_lagged();
                    self.catching_up = true;
                }
                Err(broadcast::error::RecvError::Closed) => {
                    // The feed closes when the session is deleted.
                    if store::sessions::get(&self.pool, self.session_id).await?.is_none() {
                        return Ok(None);
                    }
                    self.live = self.live.resubscribe();
                    self.catching_up = true;
                }
            }
        }
    }

    /// Takes live events that are already queued and continue the sequence.
    fn drain_ready(&mut self, batch: &mut Vec<Arc<SharedEvent>>) {
        let mut bytes: usize = batch.iter().map(|event| event.json.len()).sum();
        while batch.len() < 256 && bytes < BACKFILL_PAGE_BYTES as usize {
            match self.live.try_recv() {
                Ok(event) if event.seq <= self.last_sent => continue,
                Ok(event) if event.seq == self.last_sent + 1 && !event.json.is_empty() => {
                    self.last_sent = event.seq;
                    bytes += event.json.len();
                    batch.push(event);
                }
                Ok(_) | Err(broadcast::error::TryRecvError::Lagged(_)) => {
                    crate::metrics::stream_lagged();
                    self.catching_up = true;
                    return;
                }
                Err(_) => return,
            }
        }
    }
}

async fn read_page(pool: &PgPool, session_id: SessionId, after: Seq) -> Result<store::events::Page, sqlx::Error> {
    store::events::page_encoded(pool, session_id, after, BACKFILL_PAGE, BACKFILL_PAGE_BYTES).await
}
