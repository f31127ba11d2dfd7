//! Fan-out across replicas: a replica with watchers of a session another replica stored events
//! in reads that range once and publishes it into its own [`Hub`]; its watchers' gap rule
//! ([`crate::events::stream`]) fills whatever a notification missed. Deleted sessions' streams
//! close on every replica. What is heard, and how, is `store::notify`'s.

use std::sync::Arc;

use sqlx::PgPool;

use crate::events::hub::Hub;
use crate::store::notify::{Heard, Listener, Notice, sender_tag};

/// Follows the event log's notifications until the task is stopped: publishes other replicas'
/// events to this replica's watchers. Each time the listening connection (re)starts — Postgres
/// restarting — watchers are nudged to read Postgres themselves. The ranges are read on
/// `log_reads` (`store::connect_log_reader`).
pub async fn follow(pool: PgPool, log_reads: PgPool, hub: Arc<Hub>) {
    let me = sender_tag().to_owned();
    let mut listener = Listener::new(pool);
    loop {
        match listener.next().await {
            Heard::Listening => hub.nudge_all(),
            Heard::Notice(notice) if notice.sender() != me => deliver(&log_reads, &hub, notice).await,
            Heard::Notice(_) => {}
        }
    }
}

/// Hands one notice to this replica's watchers.
async fn deliver(pool: &PgPool, hub: &Hub, notice: Notice) {
    match notice {
        Notice::Closed { session_ids, .. } => hub.close(&session_ids),
        Notice::Stored { session_id, first, last, question, .. } => {
            if question {
                hub.ring_questions();
            }
            if !hub.is_watched(session_id) {
                return;
            }
            let count = last - first + 1;
            let page = crate::store::events::page_encoded(
                pool,
                session_id,
                first - 1,
                count,
                crate::events::stream::BACKFILL_PAGE_BYTES,
            )
            .await;
            match page {
                Ok(page) if page.events.len() as i64 == count => hub.publish(&page.events),
                // Too large for one page, or the read failed: the watchers read it themselves.
                Ok(_) => hub.nudge(session_id, last),
                Err(error) => {
                    tracing::warn!(%error, session.id = %session_id, "reading another replica's events");
                    hub.nudge(session_id, last);
                }
            }
        }
    }
}
