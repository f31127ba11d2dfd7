//! A stored event as the API and the stream show it ([`StoredEvent`]), and as watchers receive
//! it, encoded once ([`SharedEvent`]).

use std::sync::Arc;

use agenthold_core::events::EventKind;
use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::ids::{Seq, SessionId};

/// A stored event: the shape the API and the stream show (its JSON encoding is the wire format,
/// which `SharedEvent` reproduces around an already-encoded payload).
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
#[schema(as = Event)]
pub struct StoredEvent {
    /// Its session.
    pub session_id: SessionId,
    /// Its position in the session's log (from 1, no gaps).
    #[schema(value_type = i64)]
    pub seq: Seq,
    /// Its type.
    #[serde(rename = "type")]
    pub kind: EventKind,
    /// Its payload (an excerpt with a marker when the payload was over the budget).
    pub payload: serde_json::Value,
    /// When it was stored.
    pub created_at: DateTime<Utc>,
}

/// A stored event as watchers receive it: its JSON encoding, made once for every watcher.
#[derive(Debug)]
pub struct SharedEvent {
    /// Its session.
    pub session_id: SessionId,
    /// Its seq.
    pub seq: Seq,
    /// Its type.
    pub kind: EventKind,
    /// The event as JSON (`{"session_id","seq","type","payload","created_at"}`).
    pub json: Arc<str>,
}

impl SharedEvent {
    /// An event whose payload is already JSON text (what the appender made, or what Postgres
    /// returns): the event's JSON is assembled around it, byte for byte what `serde_json`
    /// would make of the same payload text.
    pub fn with_payload_json(
        session_id: SessionId,
        seq: Seq,
        kind: EventKind,
        created_at: DateTime<Utc>,
        payload_json: &str,
    ) -> Arc<Self> {
        Self::with_payload_text(session_id, seq, kind, &Self::time_text(created_at), payload_json)
    }

    /// A commit time as events carry it (RFC 3339, UTC, `Z`): made once for a batch whose
    /// events share it.
    pub fn time_text(created_at: DateTime<Utc>) -> String {
        created_at.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true)
    }

    /// [`Self::with_payload_json`] with the commit time already as text ([`Self::time_text`]).
    pub fn with_payload_text(
        session_id: SessionId,
        seq: Seq,
        kind: EventKind,
        created_at: &str,
        payload_json: &str,
    ) -> Arc<Self> {
        let json = format!(
            r#"{{"session_id":"{session_id}","seq":{seq},"type":"{}","payload":{payload_json},"created_at":"{created_at}"}}"#,
            kind.as_str(),
        );
        Arc::new(Self { session_id, seq, kind, json: json.into() })
    }

    /// The same for a stored event and its payload's JSON text.
    pub fn from_stored(event: &StoredEvent, payload_json: &str) -> Arc<Self> {
        Self::with_payload_json(event.session_id, event.seq, event.kind, event.created_at, payload_json)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn preencoded_events_match_serde() {
        let event = StoredEvent {
            session_id: SessionId::new(),
            seq: 42,
            kind: EventKind::PermissionResolved,
            payload: serde_json::json!({"a": [1, "two", {"three": null}], "é": "\"q\""}),
            created_at: chrono::Utc::now(),
        };
        let payload_json = serde_json::to_string(&event.payload).unwrap_or_default();
        let fast = SharedEvent::from_stored(&event, &payload_json);
        let by_serde = serde_json::to_string(&event).unwrap_or_default();
        assert_eq!(fast.json.as_ref(), by_serde);
    }
}
