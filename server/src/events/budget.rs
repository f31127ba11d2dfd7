//! The per-event size budget (seed 002's 350 KB item budget): a larger payload is stored whole
//! in the side table and the event carries a head/tail excerpt plus a marker saying where the
//! full payload is. Nothing is lost.

use serde_json::{Value, json};

use crate::ids::{Seq, SessionId};

/// Largest payload, in bytes of JSON, stored inline in an event.
pub const EVENT_BUDGET_BYTES: usize = 350 * 1024;
/// Bytes of the serialized payload kept at the head of an excerpt.
const HEAD_BYTES: usize = 64 * 1024;
/// Bytes kept at the tail.
const TAIL_BYTES: usize = 16 * 1024;

/// A payload ready to store: what goes into the event (as JSON text), and the whole payload
/// if it was cut.
pub struct Budgeted {
    /// The event's payload.
    pub inline: Value,
    /// `inline` as JSON text (made once: stored and sent to watchers as is).
    pub inline_json: String,
    /// The whole payload, for the side table, when `inline` is an excerpt.
    pub full: Option<String>,
}

/// Applies the budget to a payload that will be stored at `(session_id, seq)`.
pub fn apply(session_id: SessionId, seq: Seq, payload: Value) -> Budgeted {
    let encoded = serde_json::to_string(&payload).unwrap_or_else(|_| "null".to_owned());
    if encoded.len() <= EVENT_BUDGET_BYTES {
        return Budgeted { inline: payload, inline_json: encoded, full: None };
    }
    let head = prefix_at_char_boundary(&encoded, HEAD_BYTES);
    let tail = suffix_at_char_boundary(&encoded, TAIL_BYTES);
    let mut inline = json!({
        "truncated": true,
        "full_size_bytes": encoded.len(),
        "full_payload": format!("/api/v1/sessions/{session_id}/events/{seq}/payload"),
        "excerpt": { "head": head, "tail": tail },
    });
    // Keep what renderers dispatch on (the update's variant) next to the excerpt.
    if let (Some(kind), Some(map)) = (payload.get("sessionUpdate").cloned(), inline.as_object_mut()) {
        map.insert("sessionUpdate".to_owned(), kind);
    }
    let inline_json = inline.to_string();
    Budgeted { inline, inline_json, full: Some(encoded) }
}

fn prefix_at_char_boundary(text: &str, max: usize) -> &str {
    let mut end = max.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

fn suffix_at_char_boundary(text: &str, max: usize) -> &str {
    let mut start = text.len().saturating_sub(max);
    while !text.is_char_boundary(start) {
        start += 1;
    }
    &text[start..]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_payloads_stay_inline() {
        let out = apply(SessionId::new(), 1, json!({"text": "hi"}));
        assert_eq!(out.inline, json!({"text": "hi"}));
        assert!(out.full.is_none());
    }

    #[test]
    fn large_payloads_are_excerpted_and_kept_whole() {
        let text = "é".repeat(EVENT_BUDGET_BYTES);
        let payload = json!({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}});
        let session = SessionId::new();
        let out = apply(session, 7, payload.clone());
        assert_eq!(out.full.as_deref().map(serde_json::from_str::<Value>).and_then(Result::ok), Some(payload));
        assert_eq!(out.inline["truncated"], json!(true));
        assert_eq!(out.inline["sessionUpdate"], json!("agent_message_chunk"));
        assert_eq!(out.inline["full_payload"], json!(format!("/api/v1/sessions/{session}/events/7/payload")));
        assert_eq!(serde_json::from_str::<Value>(&out.inline_json).ok(), Some(out.inline.clone()));
        assert!(out.inline_json.len() < EVENT_BUDGET_BYTES, "excerpt is {} bytes", out.inline_json.len());
    }
}
