//! What makes a payload storable inline in an event: the per-event size budget (seed 002's
//! 350 KB item budget, 350,000 bytes of JSON) and Postgres `jsonb`'s refusal of U+0000.
//!
//! Every stored event goes through [`apply`]. When the payload cannot be stored as is, the exact
//! payload goes to the side table and the event carries a storable copy that keeps its shape:
//!
//! - **NUL**: U+0000 in string values and keys becomes U+2400 (`␀`); the event is marked
//!   `"nul_replaced": true`.
//! - **Over the budget**: the largest string fields are cut to a head and a tail around a
//!   marker, in seed 002's order (the tool's output, the tool's input, thinking text, message
//!   text, then any other string, largest first), until the payload fits; if it still does not
//!   fit, the cut fields are dropped down to their markers. The event is marked
//!   `"truncated": true` with the cut fields' paths in `"truncated_fields"`. Everything else
//!   (`sessionUpdate`, `toolCallId`, `status`, `kind`, …) is kept, so a viewer can still place
//!   the event. Only a payload whose bulk is not in a few strings (thousands of small ones,
//!   huge keys) falls back to an excerpt of its JSON text.
//!
//! Either way the event links the exact payload (`"full_payload"`) and gives its size
//! (`"full_size_bytes"`). Nothing is lost.

use agenthold_core::events::Payload;
use serde_json::{Map, Value, json};

use crate::ids::{Seq, SessionId};

/// Largest payload, in bytes of JSON, stored inline in an event (seed 002: `350_000`).
pub const EVENT_BUDGET_BYTES: usize = 350_000;
/// Bytes of a cut string kept before the marker (seed 002: 4 KB).
const HEAD_BYTES: usize = 4 * 1024;
/// Bytes of a cut string kept after the marker (seed 002: 2 KB).
const TAIL_BYTES: usize = 2 * 1024;
/// Strings at most this long are never cut: cutting would not make them much shorter.
const CUT_MIN_BYTES: usize = HEAD_BYTES + TAIL_BYTES + 512;
/// Room left in the budget for the markers added to a cut payload.
const MARKS_ROOM: usize = 16 * 1024;
/// Most field paths listed in `truncated_fields` (the count is always given).
const MAX_LISTED_FIELDS: usize = 100;
/// What U+0000 becomes in an inline payload: U+2400 SYMBOL FOR NULL.
pub const NUL_SYMBOL: char = '\u{2400}';
/// Top-level fields the last-resort excerpt keeps, when they are small scalars.
const PLACING_FIELDS: [&str; 8] =
    ["sessionUpdate", "toolCallId", "status", "kind", "title", "code", "turn_id", "request_id"];

/// A payload ready to store: what goes into the event (as JSON text), and the exact payload if
/// the event holds a changed copy.
pub struct Budgeted {
    /// The event's payload.
    pub inline: Value,
    /// `inline` as JSON text (made once: stored and sent to watchers as is).
    pub inline_json: String,
    /// The exact payload as JSON text, for the side table, when `inline` differs from it.
    pub full: Option<String>,
}

/// The API path of the exact payload of the event at `(session_id, seq)`.
pub fn payload_link(session_id: SessionId, seq: Seq) -> String {
    format!("/api/v1/sessions/{session_id}/events/{seq}/payload")
}

/// The JSON text of a payload that is stored inline as it is (within the budget, no U+0000);
/// `None` when [`apply`] would change it.
/// A payload kept as the text a harness printed is that text (not parsed, not encoded again).
pub fn as_is_json(payload: &Payload) -> Option<String> {
    let encoded = match payload.as_text() {
        Some(text) => text.to_owned(),
        None => serde_json::to_string(&*payload.value()).unwrap_or_else(|_| "null".to_owned()),
    };
    (encoded.len() <= EVENT_BUDGET_BYTES && !encoded.contains("\\u0000")).then_some(encoded)
}

/// Applies the budget and the NUL rule to a payload that will be stored at `(session_id, seq)`.
pub fn apply(session_id: SessionId, seq: Seq, payload: Value) -> Budgeted {
    let encoded = serde_json::to_string(&payload).unwrap_or_else(|_| "null".to_owned());
    let mut inline = payload;
    // serde_json writes U+0000 as `\u0000`: only a payload whose text has that is walked.
    let nul_replaced = encoded.contains("\\u0000") && replace_nul(&mut inline);
    if !nul_replaced && encoded.len() <= EVENT_BUDGET_BYTES {
        return Budgeted { inline, inline_json: encoded, full: None };
    }
    let link = payload_link(session_id, seq);
    let mut size = if nul_replaced { json_len(&inline) } else { encoded.len() };
    let mut cut = Vec::new();
    if size > EVENT_BUDGET_BYTES {
        cut = cut_fields(&mut inline, &link, EVENT_BUDGET_BYTES - MARKS_ROOM, &mut size);
    }
    // The markers may not fit beside a payload that nearly fills the budget: checked below.
    if size <= EVENT_BUDGET_BYTES
        && let Some(map) = inline.as_object_mut()
    {
        if nul_replaced {
            map.insert("nul_replaced".to_owned(), Value::Bool(true));
        }
        if !cut.is_empty() {
            map.insert("truncated".to_owned(), Value::Bool(true));
            map.insert("truncated_field_count".to_owned(), json!(cut.len()));
            cut.truncate(MAX_LISTED_FIELDS);
            map.insert("truncated_fields".to_owned(), json!(cut));
        }
        map.insert("full_payload".to_owned(), Value::String(link.clone()));
        map.insert("full_size_bytes".to_owned(), json!(encoded.len()));
        let inline_json = inline.to_string();
        if inline_json.len() <= EVENT_BUDGET_BYTES {
            return Budgeted { inline, inline_json, full: Some(encoded) };
        }
    }
    let inline = excerpt(&inline, encoded.len(), &link, nul_replaced);
    let inline_json = inline.to_string();
    Budgeted { inline, inline_json, full: Some(encoded) }
}

/// The last resort: the small placing fields, and a head and a tail of the JSON text of the
/// storable copy `shaped` (NUL replaced, fields cut).
fn excerpt(shaped: &Value, full_size_bytes: usize, link: &str, nul_replaced: bool) -> Value {
    let mut out = Map::new();
    for key in PLACING_FIELDS {
        if let Some(value) = shaped.get(key)
            && (value.is_number() || value.is_boolean() || value.as_str().is_some_and(|s| s.len() <= 1024))
        {
            out.insert(key.to_owned(), value.clone());
        }
    }
    out.insert("truncated".to_owned(), Value::Bool(true));
    if nul_replaced {
        out.insert("nul_replaced".to_owned(), Value::Bool(true));
    }
    out.insert("full_payload".to_owned(), Value::String(link.to_owned()));
    out.insert("full_size_bytes".to_owned(), json!(full_size_bytes));
    let encoded = shaped.to_string();
    let head = prefix_at_char_boundary(&encoded, HEAD_BYTES);
    let tail = suffix_at_char_boundary(&encoded, TAIL_BYTES);
    out.insert("excerpt".to_owned(), json!({"head": head, "tail": tail}));
    Value::Object(out)
}

/// Replaces U+0000 by [`NUL_SYMBOL`] in every string value and key; true if any was replaced.
fn replace_nul(value: &mut Value) -> bool {
    match value {
        Value::String(text) if text.contains('\0') => {
            *text = text.replace('\0', &NUL_SYMBOL.to_string());
            true
        }
        Value::Array(items) => items.iter_mut().fold(false, |any, item| replace_nul(item) | any),
        Value::Object(map) => {
            let mut any = false;
            if map.keys().any(|k| k.contains('\0')) {
                let old = std::mem::take(map);
                for (key, item) in old {
                    let key = if key.contains('\0') { key.replace('\0', &NUL_SYMBOL.to_string()) } else { key };
                    map.insert(key, item);
                }
                any = true;
            }
            map.values_mut().fold(any, |any, item| replace_nul(item) | any)
        }
        _ => false,
    }
}

/// A string field that may be cut.
struct Candidate {
    /// Seed 002's order: 0 tool output, 1 tool input, 2 thinking text, 3 message text, 4 other.
    rank: u8,
    /// Its encoded size.
    bytes: usize,
    /// JSON pointer to it.
    pointer: String,
    /// Its path as shown in `truncated_fields` (`content.text`, `content[0].content.text`).
    path: String,
}

/// Cuts string fields until the payload's encoded size (`size`, kept current) is at most
/// `target`, then drops the cut ones down to their markers if needed. Returns the cut paths.
fn cut_fields(payload: &mut Value, link: &str, target: usize, size: &mut usize) -> Vec<String> {
    let update = payload.get("sessionUpdate").and_then(Value::as_str).unwrap_or_default().to_owned();
    let mut candidates = Vec::new();
    collect(payload, &update, &mut String::new(), &mut String::new(), &mut candidates);
    candidates.sort_by(|a, b| a.rank.cmp(&b.rank).then(b.bytes.cmp(&a.bytes)));
    let mut cut = Vec::new();
    for candidate in &candidates {
        if *size <= target {
            break;
        }
        if let Some(Value::String(text)) = payload.pointer_mut(&candidate.pointer) {
            let (head, tail) = (prefix_at_char_boundary(text, HEAD_BYTES), suffix_at_char_boundary(text, TAIL_BYTES));
            let omitted = text.len() - head.len() - tail.len();
            let shorter = format!("{head}{}{tail}", marker(omitted, link));
            *size = *size - candidate.bytes + json_len_str(&shorter);
            *text = shorter;
            cut.push(candidate);
        }
    }
    for candidate in &cut {
        if *size <= target {
            break;
        }
        if let Some(Value::String(text)) = payload.pointer_mut(&candidate.pointer) {
            let before = json_len_str(text);
            let omitted = candidate.bytes.saturating_sub(2);
            let only_marker = marker(omitted, link);
            *size = *size - before + json_len_str(&only_marker);
            *text = only_marker;
        }
    }
    cut.iter().map(|c| c.path.clone()).collect()
}

fn marker(omitted: usize, link: &str) -> String {
    format!("…[truncated {omitted} bytes; see {link}]…")
}

/// Collects the string fields longer than [`CUT_MIN_BYTES`] with their rank and paths.
fn collect(value: &Value, update: &str, pointer: &mut String, path: &mut String, out: &mut Vec<Candidate>) {
    match value {
        Value::String(text) if text.len() > CUT_MIN_BYTES => {
            out.push(Candidate {
                rank: rank(update, path),
                bytes: json_len_str(text),
                pointer: pointer.clone(),
                path: path.clone(),
            });
        }
        Value::Array(items) => {
            for (index, item) in items.iter().enumerate() {
                let (pointer_len, path_len) = (pointer.len(), path.len());
                pointer.push_str(&format!("/{index}"));
                path.push_str(&format!("[{index}]"));
                collect(item, update, pointer, path, out);
                pointer.truncate(pointer_len);
                path.truncate(path_len);
            }
        }
        Value::Object(map) => {
            for (key, item) in map {
                let (pointer_len, path_len) = (pointer.len(), path.len());
                pointer.push('/');
                pointer.push_str(&key.replace('~', "~0").replace('/', "~1"));
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(key);
                collect(item, update, pointer, path, out);
                pointer.truncate(pointer_len);
                path.truncate(path_len);
            }
        }
        _ => {}
    }
}

/// Seed 002's order of truncatable fields, mapped onto ACP updates: `tool.output` is a tool
/// call's `rawOutput` and `content`, `tool.input` its `rawInput`, `metadata.text` a thought
/// chunk's text, `content[0].text` a message chunk's (or a prompt's) text.
fn rank(update: &str, path: &str) -> u8 {
    // Field names along the path, without array indices (`content[0].content.text` →
    // `content`, `content`, `text`); `rawInput`/`rawOutput` count wherever they are (a
    // permission request nests its tool call).
    let names: Vec<&str> = path.split(['.', '[']).filter(|s| !s.ends_with(']')).collect();
    let has = |name: &str| names.contains(&name);
    let first = names.first().copied().unwrap_or_default();
    if has("rawOutput") || (update.starts_with("tool_call") && first == "content") {
        0
    } else if has("rawInput") {
        1
    } else if update == "agent_thought_chunk" && first == "content" {
        2
    } else if matches!(first, "content" | "prompt" | "text") {
        3
    } else {
        4
    }
}

fn json_len(value: &Value) -> usize {
    serde_json::to_string(value).map_or(usize::MAX / 2, |s| s.len())
}

fn json_len_str(text: &str) -> usize {
    serde_json::to_string(text).map_or(usize::MAX / 2, |s| s.len())
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

    fn exact(out: &Budgeted) -> Option<Value> {
        out.full.as_deref().and_then(|full| serde_json::from_str(full).ok())
    }

    fn has_nul(value: &Value) -> bool {
        match value {
            Value::String(text) => text.contains('\0'),
            Value::Array(items) => items.iter().any(has_nul),
            Value::Object(map) => map.iter().any(|(k, v)| k.contains('\0') || has_nul(v)),
            _ => false,
        }
    }

    fn assert_storable(out: &Budgeted) {
        assert!(out.inline_json.len() <= EVENT_BUDGET_BYTES, "inline is {} bytes", out.inline_json.len());
        assert!(!has_nul(&out.inline), "inline still holds a NUL");
        assert_eq!(serde_json::from_str::<Value>(&out.inline_json).ok(), Some(out.inline.clone()));
    }

    #[test]
    fn the_budget_is_350_000_bytes() {
        assert_eq!(EVENT_BUDGET_BYTES, 350_000);
        // A payload of 350,001..=358,400 bytes was inline under the old 350 × 1024 budget.
        let text = "a".repeat(EVENT_BUDGET_BYTES);
        let out = apply(
            SessionId::new(),
            1,
            json!({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}}),
        );
        assert!(out.full.is_some());
        assert_eq!(out.inline["truncated"], json!(true));
    }

    #[test]
    fn small_payloads_stay_inline() {
        let out = apply(SessionId::new(), 1, json!({"text": "hi"}));
        assert_eq!(out.inline, json!({"text": "hi"}));
        assert!(out.full.is_none());
    }

    #[test]
    fn a_payload_at_the_budget_stays_inline() {
        let overhead = json!({"text": ""}).to_string().len();
        let payload = json!({"text": "x".repeat(EVENT_BUDGET_BYTES - overhead)});
        let out = apply(SessionId::new(), 1, payload.clone());
        assert!(out.full.is_none());
        assert_eq!(out.inline, payload);
    }

    #[test]
    fn a_large_tool_result_keeps_its_structure() {
        let output = format!("FIRST{}LAST", "é".repeat(EVENT_BUDGET_BYTES));
        let payload = json!({
            "sessionUpdate": "tool_call_update", "toolCallId": "call_7", "status": "completed", "kind": "execute",
            "title": "npm test",
            "content": [{"type": "content", "content": {"type": "text", "text": output}}],
            "rawOutput": {"exitCode": 0},
        });
        let session = SessionId::new();
        let out = apply(session, 7, payload.clone());
        assert_storable(&out);
        assert_eq!(exact(&out), Some(payload));
        let inline = &out.inline;
        for (key, value) in [
            ("sessionUpdate", "tool_call_update"),
            ("toolCallId", "call_7"),
            ("status", "completed"),
            ("kind", "execute"),
            ("title", "npm test"),
        ] {
            assert_eq!(inline[key], json!(value), "{key} kept");
        }
        assert_eq!(inline["rawOutput"], json!({"exitCode": 0}));
        assert_eq!(inline["truncated"], json!(true));
        assert_eq!(inline["truncated_fields"], json!(["content[0].content.text"]));
        assert_eq!(inline["full_payload"], json!(format!("/api/v1/sessions/{session}/events/7/payload")));
        let text = inline["content"][0]["content"]["text"].as_str().unwrap_or_default();
        assert!(text.starts_with("FIRST") && text.ends_with("LAST"), "head and tail kept");
        assert!(text.contains(&format!("bytes; see /api/v1/sessions/{session}/events/7/payload]")), "{}", &text[..100]);
        assert!(text.len() < 7 * 1024);
    }

    #[test]
    fn fields_are_cut_in_seed_order_and_only_as_needed() {
        // Output and input together are over the budget; the output alone brings it under.
        let big = "o".repeat(200_000);
        let payload = json!({
            "sessionUpdate": "tool_call", "toolCallId": "c", "status": "pending",
            "rawInput": {"command": big.clone()}, "rawOutput": {"stdout": big.clone()},
        });
        let out = apply(SessionId::new(), 1, payload);
        assert_storable(&out);
        assert_eq!(out.inline["truncated_fields"], json!(["rawOutput.stdout"]));
        assert_eq!(out.inline["rawInput"]["command"], json!(big), "the input stays whole");
    }

    #[test]
    fn a_permission_request_cuts_its_tool_calls_input_before_other_strings() {
        let big = "i".repeat(200_000);
        let payload = json!({
            "request_id": 3, "tool_call": {"toolCallId": "c", "title": big.clone(), "rawInput": {"command": big.clone()}},
        });
        let out = apply(SessionId::new(), 1, payload);
        assert_storable(&out);
        assert_eq!(out.inline["truncated_fields"], json!(["tool_call.rawInput.command"]));
        assert_eq!(out.inline["tool_call"]["title"], json!(big));
    }

    #[test]
    fn many_large_fields_are_dropped_to_markers() {
        // 100 strings of 10 KB: cutting each to 6 KB is not enough; dropping some is.
        let fields: Map<String, Value> = (0..100).map(|i| (format!("f{i:03}"), json!("z".repeat(10_000)))).collect();
        let payload = json!({"sessionUpdate": "x", "rawOutput": fields});
        let out = apply(SessionId::new(), 1, payload.clone());
        assert_storable(&out);
        assert_eq!(out.inline["sessionUpdate"], json!("x"));
        assert_eq!(out.inline["truncated_field_count"], json!(100));
        assert!(out.inline["rawOutput"]["f000"].as_str().is_some_and(|s| s.starts_with("…[truncated")));
        assert_eq!(exact(&out), Some(payload));
    }

    #[test]
    fn many_small_strings_fall_back_to_an_excerpt() {
        let items: Vec<Value> = (0..60_000).map(|i| json!(format!("item {i}"))).collect();
        let payload = json!({"sessionUpdate": "plan", "entries": items});
        let session = SessionId::new();
        let out = apply(session, 3, payload.clone());
        assert_storable(&out);
        assert_eq!(out.inline["truncated"], json!(true));
        assert_eq!(out.inline["sessionUpdate"], json!("plan"));
        let head = out.inline["excerpt"]["head"].as_str().unwrap_or_default();
        assert!(head.starts_with(r#"{"sessionUpdate":"plan","entries":["item 0","#), "{}", &head[..head.len().min(80)]);
        assert_eq!(exact(&out), Some(payload));
    }

    #[test]
    fn as_is_json_is_what_apply_stores_unchanged_and_nothing_else() {
        let payloads = [
            json!({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "héllo"}}),
            json!({"text": "a\u{0}b"}),
            json!({"k\u{0}": 1}),
            json!({"text": "x".repeat(EVENT_BUDGET_BYTES)}),
            json!({"text": "x".repeat(EVENT_BUDGET_BYTES - 20)}),
            json!({"text": r"a literal \u0000 typed out"}),
        ];
        for payload in payloads {
            let as_is = as_is_json(&Payload::from(payload.clone()));
            let applied = apply(SessionId::new(), 1, payload.clone());
            if let Some(text) = &as_is {
                assert!(applied.full.is_none(), "as is, but apply changed it: {}", &text[..text.len().min(60)]);
                assert_eq!(text, &applied.inline_json);
            } else if !applied.inline_json.contains(r"\\u0000") {
                // (A typed-out `\u0000` takes the careful path, which stores it unchanged.)
                assert!(applied.full.is_some(), "apply kept it as is, but as_is_json refused it");
            }
        }
    }

    #[test]
    fn a_harness_s_text_is_stored_as_it_came_within_the_budget() {
        let text = |t: &str| Payload::text(serde_json::value::RawValue::from_string(t.to_owned()).expect("JSON"));
        let spaced = r#"{"sessionUpdate": "agent_message_chunk", "content": {"text": "h\u00e9"}}"#;
        assert_eq!(as_is_json(&text(spaced)).as_deref(), Some(spaced));
        // A NUL, or past the budget: the careful path, from its value.
        assert_eq!(as_is_json(&text(r#"{"text": "a\u0000b"}"#)), None);
        let long = format!(r#"{{"text": "{}"}}"#, "x".repeat(EVENT_BUDGET_BYTES));
        assert_eq!(as_is_json(&text(&long)), None);
        let applied = apply(SessionId::new(), 1, text(r#"{"text": "a\u0000b"}"#).into_value());
        assert_eq!(applied.inline["text"], json!("a\u{2400}b"));
    }

    #[test]
    fn nul_is_replaced_and_the_exact_payload_kept() {
        let payload = json!({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "a\u{0}b"}, "k\u{0}": 1});
        let session = SessionId::new();
        let out = apply(session, 2, payload.clone());
        assert_storable(&out);
        assert_eq!(out.inline["content"]["text"], json!("a\u{2400}b"));
        assert_eq!(out.inline["k\u{2400}"], json!(1));
        assert_eq!(out.inline["nul_replaced"], json!(true));
        assert!(out.inline.get("truncated").is_none());
        assert_eq!(out.inline["full_payload"], json!(format!("/api/v1/sessions/{session}/events/2/payload")));
        assert!(out.full.as_deref().is_some_and(|f| f.contains("a\\u0000b")));
        assert_eq!(exact(&out), Some(payload));
    }

    #[test]
    fn nul_in_a_large_payload_is_replaced_and_cut() {
        let text = format!("\u{0}{}", "y".repeat(EVENT_BUDGET_BYTES));
        let payload = json!({"sessionUpdate": "agent_thought_chunk", "content": {"type": "text", "text": text}});
        let out = apply(SessionId::new(), 1, payload.clone());
        assert_storable(&out);
        assert_eq!(out.inline["nul_replaced"], json!(true));
        assert_eq!(out.inline["truncated"], json!(true));
        assert!(out.inline["content"]["text"].as_str().is_some_and(|t| t.starts_with('\u{2400}')));
        assert_eq!(exact(&out), Some(payload));
    }

    #[test]
    fn a_huge_key_falls_back_to_an_excerpt() {
        let payload = json!({"sessionUpdate": "x", "k".repeat(EVENT_BUDGET_BYTES): 1});
        let out = apply(SessionId::new(), 1, payload.clone());
        assert_storable(&out);
        assert!(out.inline.get("excerpt").is_some());
        assert_eq!(exact(&out), Some(payload));
    }

    #[test]
    fn a_non_object_payload_falls_back_to_an_excerpt() {
        let payload = json!(["\u{0}", "w".repeat(EVENT_BUDGET_BYTES)]);
        let out = apply(SessionId::new(), 1, payload.clone());
        assert_storable(&out);
        assert_eq!(out.inline["nul_replaced"], json!(true));
        assert_eq!(exact(&out), Some(payload));
    }
}
