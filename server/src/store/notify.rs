//! The event log's notifications: every transaction that stores events tells every replica, on
//! commit, which seqs each session got (`LISTEN/NOTIFY` on [`CHANNEL`], sent by the statement
//! that assigns the seqs in [`super::events`]: no extra round trip); deleted sessions are
//! announced the same way. This module owns the channel, the format, its parser and the
//! listening connection; `replicas::fanout` decides what a replica does with what it hears.
//!
//! A notification is text: `<sender> <session> <first> <last> <q|->` (`q`: a permission
//! question asked or answered, the inboxes re-read) or `<sender> closed <session>…`. Parsing is
//! pure ([`Notice::parse`]) and unit-tested.

use std::sync::OnceLock;

use sqlx::PgPool;
use sqlx::postgres::PgListener;
use uuid::Uuid;

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

    /// Who sent it.
    pub fn sender(&self) -> &str {
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

/// What the listening connection hears.
#[derive(Debug)]
pub enum Heard {
    /// The connection listens (again): whatever was sent before is lost, readers catch up from
    /// Postgres.
    Listening,
    /// A notification (a malformed one is logged and skipped).
    Notice(Notice),
}

/// A connection listening on [`CHANNEL`], reconnected whenever it drops.
pub struct Listener {
    pool: PgPool,
    connection: Option<PgListener>,
}

impl Listener {
    /// A listener (it connects on the first [`Listener::next`]).
    pub fn new(pool: PgPool) -> Self {
        Self { pool, connection: None }
    }

    /// The next thing heard: waits (retrying every second) while Postgres cannot be reached.
    pub async fn next(&mut self) -> Heard {
        loop {
            let Some(connection) = self.connection.as_mut() else {
                match Self::connect(&self.pool).await {
                    Ok(connection) => {
                        self.connection = Some(connection);
                        return Heard::Listening;
                    }
                    Err(error) => {
                        tracing::warn!(%error, "listening for the event log's notifications; retrying in 1 s");
                        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                        continue;
                    }
                }
            };
            match connection.try_recv().await {
                Ok(Some(notification)) => match Notice::parse(notification.payload()) {
                    Some(notice) => return Heard::Notice(notice),
                    None => tracing::warn!(payload = notification.payload(), "an unreadable event notification"),
                },
                // The connection dropped: notifications meanwhile are lost; the next `try_recv`
                // reconnects and listens again.
                Ok(None) => {
                    tracing::warn!("the event notification connection dropped; reconnecting");
                    return Heard::Listening;
                }
                Err(error) => {
                    tracing::warn!(%error, "receiving event notifications; reconnecting in 1 s");
                    self.connection = None;
                    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                }
            }
        }
    }

    async fn connect(pool: &PgPool) -> sqlx::Result<PgListener> {
        let mut listener = PgListener::connect_with(pool).await?;
        listener.listen(CHANNEL).await?;
        Ok(listener)
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
