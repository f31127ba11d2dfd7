//! Fan-out across replicas: every transaction that stores events tells the other replicas, on
//! commit, which seqs each session got (`LISTEN/NOTIFY` on [`CHANNEL`], sent by the statement
//! that assigns the seqs: no extra round trip). A replica with watchers of that session reads
//! that range once and publishes it into its own [`Hub`]; its watchers' gap rule
//! ([`crate::events::stream`]) fills whatever a notification missed. Deleted sessions are
//! announced the same way, so their streams close on every replica.
//!
//! A notification is text: `<sender> <session> <first> <last> <q|->` (`q`: a permission
//! question asked or answered, the inboxes re-read) or `<sender> closed <session>…`. Parsing is
//! pure ([`Notice::parse`]) and unit-tested.

use std::sync::{Arc, OnceLock};

use sqlx::PgPool;
use sqlx::postgres::PgListener;
use uuid::Uuid;

use crate::events::hub::Hub;
use crate::ids::{Seq, SessionId};

/// The notification channel.
pub const CHANNEL: &str = "agenthold_events";

/// Sessions named per `closed` notification (a payload stays far below Postgres's 8,000 bytes).
const CLOSED_PER_NOTICE: usize = 100;

static SENDER: OnceLock<String> = OnceLock::new();

/// Names this process as the sender of its notifications (once, at start; before that they go
/// out as `-`, which no replica takes for its own).
pub fn set_sender(replica: Uuid) {
    let _ = SENDER.set(replica.to_string());
}

/// This process's sender tag.
pub fn sender_tag() -> &'static str {
    SENDER.get().map_or("-", String::as_str)
}

/// One notification, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Notice {
    /// A session got events `first..=last`.
    Stored {
        /// Who stored them.
        sender: String,
        /// The session.
        session_id: SessionId,
        /// The first new seq.
        first: Seq,
        /// The last new seq.
        last: Seq,
        /// Whether a permission question was asked or answered among them.
        question: bool,
    },
    /// Sessions were deleted.
    Closed {
        /// Who deleted them.
        sender: String,
        /// The sessions.
        session_ids: Vec<SessionId>,
    },
}

impl Notice {
    /// Parses a payload; `None` for anything malformed (ignored: the gap rule still holds).
    pub fn parse(payload: &str) -> Option<Self> {
        let mut words = payload.split(' ');
        let sender = words.next()?.to_owned();
        let second = words.next()?;
        if second == "closed" {
            let session_ids =
                words.map(|w| w.parse::<Uuid>().ok().map(SessionId)).collect::<Option<Vec<SessionId>>>()?;
            return Some(Self::Closed { sender, session_ids });
        }
        let session_id = SessionId(second.parse().ok()?);
        let first: Seq = words.next()?.parse().ok()?;
        let last: Seq = words.next()?.parse().ok()?;
        let question = match words.next()? {
            "q" => true,
            "-" => false,
            _ => return None,
        };
        if words.next().is_some() || first < 1 || last < first {
            return None;
        }
        Some(Self::Stored { sender, session_id, first, last, question })
    }

    fn sender(&self) -> &str {
        match self {
            Self::Stored { sender, .. } | Self::Closed { sender, .. } => sender,
        }
    }
}

/// Tells every replica (this one included) that these sessions are gone.
pub async fn announce_closed(pool: &PgPool, session_ids: &[SessionId]) -> sqlx::Result<()> {
    for chunk in session_ids.chunks(CLOSED_PER_NOTICE) {
        let mut payload = format!("{} closed", sender_tag());
        for id in chunk {
            payload.push(' ');
            payload.push_str(&id.0.to_string());
        }
        sqlx::query!(r#"SELECT pg_notify($1, $2)::text AS "sent""#, CHANNEL, payload).fetch_one(pool).await?;
    }
    Ok(())
}

/// Follows the channel until the task is aborted: publishes other replicas' events to this
/// replica's watchers. While the listening connection is down (Postgres restarting), watchers
/// are nudged to read Postgres themselves once it is back.
pub async fn follow(pool: PgPool, hub: Arc<Hub>) {
    let me = sender_tag().to_owned();
    loop {
        let mut listener = match PgListener::connect_with(&pool).await {
            Ok(listener) => listener,
            Err(error) => {
                tracing::warn!(%error, "listening for other replicas' events; retrying in 1 s");
                tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                continue;
            }
        };
        if let Err(error) = listener.listen(CHANNEL).await {
            tracing::warn!(%error, "listening for other replicas' events; retrying in 1 s");
            tokio::time::sleep(std::time::Duration::from_secs(1)).await;
            continue;
        }
        // Whatever was stored before this connection listened reaches watchers through their gap
        // rule, once something tells them to look.
        hub.nudge_all();
        loop {
            match listener.try_recv().await {
                Ok(Some(notification)) => {
                    let Some(notice) = Notice::parse(notification.payload()) else {
                        tracing::warn!(payload = notification.payload(), "an unreadable replica notification");
                        continue;
                    };
                    if notice.sender() == me {
                        continue;
                    }
                    deliver(&pool, &hub, notice).await;
                }
                // The connection dropped: notifications meanwhile are lost; the next `try_recv`
                // reconnects and listens again.
                Ok(None) => {
                    tracing::warn!("the replica notification connection dropped; reconnecting");
                    hub.nudge_all();
                }
                Err(error) => {
                    tracing::warn!(%error, "receiving replica notifications; reconnecting in 1 s");
                    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                    break;
                }
            }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_what_the_append_statement_sends() {
        let s = Uuid::new_v4();
        let notice = Notice::parse(&format!("r1 {s} 5 9 q")).expect("valid");
        assert_eq!(
            notice,
            Notice::Stored { sender: "r1".into(), session_id: SessionId(s), first: 5, last: 9, question: true }
        );
        let notice = Notice::parse(&format!("- {s} 1 1 -")).expect("valid");
        assert!(matches!(notice, Notice::Stored { question: false, first: 1, last: 1, .. }));
    }

    #[test]
    fn parses_closed_sessions() {
        let (a, b) = (Uuid::new_v4(), Uuid::new_v4());
        assert_eq!(
            Notice::parse(&format!("r1 closed {a} {b}")),
            Some(Notice::Closed { sender: "r1".into(), session_ids: vec![SessionId(a), SessionId(b)] })
        );
    }

    #[test]
    fn refuses_malformed_payloads() {
        let s = Uuid::new_v4();
        for bad in [
            String::new(),
            "r1".to_owned(),
            format!("r1 {s}"),
            format!("r1 {s} 5"),
            format!("r1 {s} 5 9"),
            format!("r1 {s} 5 9 x"),
            format!("r1 {s} 9 5 -"),
            format!("r1 {s} 0 5 -"),
            format!("r1 {s} a 5 -"),
            format!("r1 {s} 5 9 - extra"),
            "r1 not-a-uuid 1 2 -".to_owned(),
            "r1 closed not-a-uuid".to_owned(),
        ] {
            assert_eq!(Notice::parse(&bad), None, "{bad:?}");
        }
    }
}
