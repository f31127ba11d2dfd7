//! What an event of a session's log is before it is stored: its kind ([`EventKind`]) and the
//! event to append ([`NewEvent`]), and the state changes stored in the same transaction
//! ([`side_effects`]); the codes of `notice` events ([`NoticeCode`]; those of `error` events are
//! [`crate::error_code::ErrorCode`]). Storing, fan-out and the stored shape are the server's (`events`).

mod notice_code;
mod payload;
pub mod side_effects;
pub mod usage;

pub use notice_code::NoticeCode;
pub use payload::Payload;

use serde::{Deserialize, Serialize};

use crate::error_code::ErrorCode;
use crate::ids::SessionId;

/// The types of events in a session's log (seed 003).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    /// A user's prompt.
    Prompt,
    /// An ACP `SessionUpdate`, stored as received.
    Update,
    /// A harness asked for permission.
    Permission,
    /// A permission request was answered.
    PermissionResolved,
    /// A turn ended.
    TurnEnd,
    /// Something failed.
    Error,
    /// A lifecycle fact (context reset, harness restarted, …).
    Notice,
    /// The rules a guarded agent's turn runs under.
    PolicyApplied,
    /// A policy refused a call.
    PolicyDenied,
}

impl EventKind {
    /// The name stored in the `type` column.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Prompt => "prompt",
            Self::Update => "update",
            Self::Permission => "permission",
            Self::PermissionResolved => "permission_resolved",
            Self::TurnEnd => "turn_end",
            Self::Error => "error",
            Self::Notice => "notice",
            Self::PolicyApplied => "policy_applied",
            Self::PolicyDenied => "policy_denied",
        }
    }

    /// Parses a stored `type`.
    pub fn parse(raw: &str) -> Option<Self> {
        Some(match raw {
            "prompt" => Self::Prompt,
            "update" => Self::Update,
            "permission" => Self::Permission,
            "permission_resolved" => Self::PermissionResolved,
            "turn_end" => Self::TurnEnd,
            "error" => Self::Error,
            "notice" => Self::Notice,
            "policy_applied" => Self::PolicyApplied,
            "policy_denied" => Self::PolicyDenied,
            _ => return None,
        })
    }
}

/// An event to append (its seq is assigned when it is stored).
#[derive(Debug, Clone)]
pub struct NewEvent {
    /// The session it belongs to.
    pub session_id: SessionId,
    /// Its type.
    pub kind: EventKind,
    /// Its payload.
    pub payload: Payload,
}

impl NewEvent {
    /// An event of `kind` for `session_id`.
    pub fn new(session_id: SessionId, kind: EventKind, payload: serde_json::Value) -> Self {
        Self { session_id, kind, payload: Payload::from(payload) }
    }

    /// An `update` event of a harness's update kept as the text it printed.
    pub fn update_text(session_id: SessionId, update: Box<serde_json::value::RawValue>) -> Self {
        Self { session_id, kind: EventKind::Update, payload: Payload::text(update) }
    }

    /// An `error` event with a machine-readable code and a message for people.
    pub fn error(session_id: SessionId, code: ErrorCode, message: impl Into<String>) -> Self {
        let payload = serde_json::json!({ "code": code.as_str(), "message": message.into() });
        Self::new(session_id, EventKind::Error, payload)
    }

    /// A `notice` event.
    pub fn notice(session_id: SessionId, code: NoticeCode, message: impl Into<String>) -> Self {
        let payload = serde_json::json!({ "code": code.as_str(), "message": message.into() });
        Self::new(session_id, EventKind::Notice, payload)
    }
}
