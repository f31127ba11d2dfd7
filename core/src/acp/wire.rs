//! JSON-RPC 2.0 framing: one JSON object per line. Classifies what a harness prints and encodes
//! what the server sends (the envelope and the error codes are `agenthold_plumbing::jsonrpc`'s).

use std::borrow::Cow;

use agenthold_plumbing::jsonrpc;
pub use agenthold_plumbing::jsonrpc::{RpcError, code};
use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;

use super::messages::method;

/// A JSON-RPC request id: the harness's are kept exactly as it sent them.
pub type RpcId = Value;

/// One line from the harness, classified.
#[derive(Debug, Clone, PartialEq)]
pub enum FromHarness {
    /// A request to the client (`session/request_permission`, `fs/*`, …).
    Request {
        /// Its id, as sent.
        id: RpcId,
        /// The method.
        method: String,
        /// The params.
        params: Value,
    },
    /// A notification (`session/update`, extension notifications).
    Notification {
        /// The method.
        method: String,
        /// The params.
        params: Value,
    },
    /// A response to one of our requests.
    Response {
        /// The id we sent (ours are strings).
        id: String,
        /// The result, or the error object.
        outcome: Result<Value, Value>,
    },
}

/// A line that is not a JSON-RPC message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not a JSON-RPC message: {excerpt}")]
pub struct Garbage {
    /// The start of the line, for the error event.
    pub excerpt: String,
}

/// Classifies one line (without its newline).
pub fn parse_line(line: &[u8]) -> Result<FromHarness, Garbage> {
    let garbage = || Garbage { excerpt: String::from_utf8_lossy(&line[..line.len().min(200)]).into_owned() };
    let Ok(Value::Object(mut message)) = serde_json::from_slice::<Value>(line) else {
        return Err(garbage());
    };
    let method = message.remove("method");
    let id = message.remove("id");
    match (method, id) {
        (Some(Value::String(method)), Some(id)) if !id.is_null() => {
            Ok(FromHarness::Request { id, method, params: message.remove("params").unwrap_or(Value::Null) })
        }
        (Some(Value::String(method)), _) => {
            Ok(FromHarness::Notification { method, params: message.remove("params").unwrap_or(Value::Null) })
        }
        (None, Some(id)) => {
            // Ids we send are strings; anything else cannot be ours and is ignored upstream.
            let id = match id {
                Value::String(id) => id,
                other => other.to_string(),
            };
            let outcome = match (message.remove("result"), message.remove("error")) {
                (_, Some(error)) => Err(error),
                (Some(result), None) => Ok(result),
                (None, None) => return Err(garbage()),
            };
            Ok(FromHarness::Response { id, outcome })
        }
        _ => Err(garbage()),
    }
}

/// A `session/update` notification read without building its params: the session it names and
/// its `update` as printed (what the event log stores). `None` for any other line, or one this
/// cannot read so (a duplicate key, an `update` missing): [`parse_line`] then reads it as before.
pub fn parse_update(line: &[u8]) -> Option<UpdateLine> {
    // One pass: the params are read as an update's while the envelope is (a line whose params
    // are not an update's is no update either, whatever its method).
    let envelope: Envelope<'_> = serde_json::from_slice(line).ok()?;
    if envelope.method != method::SESSION_UPDATE || envelope.id.is_some() {
        return None;
    }
    let params = envelope.params;
    Some(UpdateLine { acp_session_id: params.session_id.into_owned(), update: params.update.to_owned() })
}

/// A `session/update` as [`parse_update`] reads it.
#[derive(Debug)]
pub struct UpdateLine {
    /// The harness's session id (`params.sessionId`).
    pub acp_session_id: String,
    /// `params.update`, as printed.
    pub update: Box<RawValue>,
}

/// An update's kind (`sessionUpdate`), read from its text without building it; `None` when it has
/// none (or is not an object).
pub fn update_kind(update: &RawValue) -> Option<Cow<'_, str>> {
    serde_json::from_str::<UpdateHead<'_>>(update.get()).ok()?.kind
}

/// An update notification's envelope (`jsonrpc` and anything else unread).
#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(borrow)]
    method: Cow<'a, str>,
    /// Present and not `null`: a request, not a notification.
    #[serde(default, borrow)]
    id: Option<&'a RawValue>,
    #[serde(borrow)]
    params: UpdateParams<'a>,
}

#[derive(Deserialize)]
struct UpdateParams<'a> {
    #[serde(rename = "sessionId", borrow)]
    session_id: Cow<'a, str>,
    #[serde(borrow)]
    update: &'a RawValue,
}

#[derive(Deserialize)]
struct UpdateHead<'a> {
    #[serde(rename = "sessionUpdate", default, borrow)]
    kind: Option<Cow<'a, str>>,
}

/// A fresh request id, unique across server incarnations.
pub fn new_request_id() -> String {
    format!("ah-{}", uuid::Uuid::new_v4())
}

/// A request line (with its newline).
pub fn request(id: &str, method: &str, params: &Value) -> Vec<u8> {
    line(&jsonrpc::request(&Value::from(id), method, params))
}

/// A notification line.
pub fn notification(method: &str, params: &Value) -> Vec<u8> {
    line(&jsonrpc::notification(method, params))
}

/// A successful response line to a harness's request.
pub fn response(id: &RpcId, result: &Value) -> Vec<u8> {
    line(&jsonrpc::result(id, result))
}

/// An error response line.
pub fn error_response(id: &RpcId, error: &RpcError) -> Vec<u8> {
    line(&jsonrpc::error(id, error))
}

fn line(value: &Value) -> Vec<u8> {
    let mut bytes = serde_json::to_vec(value).unwrap_or_default();
    bytes.push(b'\n');
    bytes
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn an_update_is_read_without_its_params_built() {
        let line = br#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate": "agent_message_chunk","content":{"type":"text","text":"h\u00e9"}}}}"#;
        let read = parse_update(line).expect("an update");
        assert_eq!(read.acp_session_id, "s1");
        assert_eq!(
            read.update.get(),
            r#"{"sessionUpdate": "agent_message_chunk","content":{"type":"text","text":"h\u00e9"}}"#
        );
        assert_eq!(update_kind(&read.update).as_deref(), Some("agent_message_chunk"));
        // What parse_line makes of the same line is the same update.
        let Ok(FromHarness::Notification { params, .. }) = parse_line(line) else { panic!("a notification") };
        let text: Value = serde_json::from_str(read.update.get()).expect("JSON");
        assert_eq!(text, params["update"]);
    }

    #[test]
    fn anything_else_is_left_to_parse_line() {
        let others: [&[u8]; 11] = [
            br#"{"jsonrpc":"2.0","id":1,"method":"session/update","params":{"sessionId":"s","update":{}}}"#,
            br#"{"jsonrpc":"2.0","method":"session/other","params":[1]}"#,
            br#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{},"update":[]}}"#,
            br#"{"jsonrpc":"2.0","method":"session/other","params":{"sessionId":"s","update":{}}}"#,
            br#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s"}}"#,
            br#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":7,"update":{}}}"#,
            br#"{"jsonrpc":"2.0","method":"session/update","method":"x","params":{"sessionId":"s","update":{}}}"#,
            br#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{}}} trailing"#,
            br#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"a":}}}"#,
            br#"{"jsonrpc":"2.0","method":"session/update"}"#,
            b"\xff\xfe",
        ];
        for line in others {
            assert!(parse_update(line).is_none(), "{}", String::from_utf8_lossy(line));
        }
        // A null id is a notification's, as parse_line has it.
        let null_id =
            br#"{"jsonrpc":"2.0","id":null,"method":"session/update","params":{"sessionId":"s","update":[1]}}"#;
        assert_eq!(parse_update(null_id).map(|u| u.update.get().to_owned()).as_deref(), Some("[1]"));
        // The params may come first, and the session id escaped.
        let params_first =
            br#"{"params":{"update":{"k":1},"sessionId":"s\u0031"},"method":"session/update","jsonrpc":"2.0"}"#;
        let read = parse_update(params_first).expect("an update");
        assert_eq!((read.acp_session_id.as_str(), read.update.get()), ("s1", r#"{"k":1}"#));
        let no_kind = RawValue::from_string("[1]".to_owned()).expect("JSON");
        assert_eq!(update_kind(&no_kind), None);
    }

    #[test]
    fn classifies_messages() {
        let update = br#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s"}}"#;
        assert!(
            matches!(parse_line(update), Ok(FromHarness::Notification { method, .. }) if method == "session/update")
        );
        let request = br#"{"jsonrpc":"2.0","id":7,"method":"session/request_permission","params":{}}"#;
        assert!(matches!(parse_line(request), Ok(FromHarness::Request { id, .. }) if id == json!(7)));
        let ok = br#"{"jsonrpc":"2.0","id":"ah-1","result":{"stopReason":"end_turn"}}"#;
        assert!(matches!(parse_line(ok), Ok(FromHarness::Response { id, outcome: Ok(_) }) if id == "ah-1"));
        let failed = br#"{"jsonrpc":"2.0","id":"ah-2","error":{"code":-32603,"message":"x"}}"#;
        assert!(matches!(parse_line(failed), Ok(FromHarness::Response { outcome: Err(_), .. })));
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        for line in [&b"this is not json {"[..], b"[]", b"42", b"{}", b"{\"id\":1}", b"\xff\xfe"] {
            assert!(parse_line(line).is_err(), "{:?}", String::from_utf8_lossy(line));
        }
    }
}
