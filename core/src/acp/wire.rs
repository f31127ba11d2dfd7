//! JSON-RPC 2.0 framing: one JSON object per line. Classifies what a harness prints and encodes
//! what the server sends (the envelope and the error codes are `agenthold_plumbing::jsonrpc`'s).

use agenthold_plumbing::jsonrpc;
pub use agenthold_plumbing::jsonrpc::{RpcError, code};
use serde_json::Value;

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
