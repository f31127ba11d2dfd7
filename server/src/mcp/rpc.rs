//! MCP's JSON-RPC 2.0 framing as the streamable HTTP transport carries it: one request or
//! notification per POST (batches are refused: MCP 2025-06-18 dropped them), answered with one
//! JSON response. Pure: parsing never panics, and every error is a JSON-RPC error object. The
//! envelope and the error codes are `agenthold_plumbing::jsonrpc`'s.

use serde_json::{Value, json};

/// The protocol versions this server speaks, newest first; a client asking for another gets
/// the newest (MCP's version negotiation).
pub const PROTOCOL_VERSIONS: &[&str] = &["2025-06-18", "2025-03-26", "2024-11-05"];

pub use agenthold_plumbing::jsonrpc::{RpcError, code, error, result};

/// One parsed message.
#[derive(Debug, Clone, PartialEq)]
pub enum Incoming {
    /// A request: it gets a response.
    Request {
        /// Its id (a string or a number).
        id: Value,
        /// The method.
        method: String,
        /// Its params (`null` when absent).
        params: Value,
    },
    /// A notification (or a client's response): accepted, not answered.
    Notification,
}

/// Parses a POST body. An `Err` carries the id to answer with (`null` when unknown).
pub fn parse(body: &[u8]) -> Result<Incoming, (Value, RpcError)> {
    let value: Value = serde_json::from_slice(body)
        .map_err(|_| (Value::Null, RpcError::new(code::PARSE_ERROR, "the body is not JSON")))?;
    let Some(object) = value.as_object() else {
        let message = if value.is_array() { "batches are not supported" } else { "not a JSON-RPC message" };
        return Err((Value::Null, RpcError::new(code::INVALID_REQUEST, message)));
    };
    let id = object.get("id").cloned();
    let invalid = |message: &str| (id.clone().unwrap_or(Value::Null), RpcError::new(code::INVALID_REQUEST, message));
    if object.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Err(invalid("jsonrpc must be \"2.0\""));
    }
    let Some(method) = object.get("method") else {
        // A response to a request of ours: we send none, so there is nothing to match.
        return if object.contains_key("result") || object.contains_key("error") {
            Ok(Incoming::Notification)
        } else {
            Err(invalid("no method"))
        };
    };
    let Some(method) = method.as_str() else { return Err(invalid("method must be a string")) };
    match id {
        None => Ok(Incoming::Notification),
        Some(id) if id.is_string() || id.is_i64() || id.is_u64() => Ok(Incoming::Request {
            id,
            method: method.to_owned(),
            params: object.get("params").cloned().unwrap_or(Value::Null),
        }),
        Some(_) => Err((Value::Null, RpcError::new(code::INVALID_REQUEST, "id must be a string or an integer"))),
    }
}

/// The `initialize` result for the client's `params`.
pub fn initialize(params: &Value) -> Value {
    let asked = params.get("protocolVersion").and_then(Value::as_str);
    let version = asked.filter(|v| PROTOCOL_VERSIONS.contains(v)).unwrap_or(PROTOCOL_VERSIONS[0]);
    json!({
        "protocolVersion": version,
        "capabilities": {"tools": {"listChanged": false}},
        "serverInfo": {"name": "agenthold", "version": env!("CARGO_PKG_VERSION")},
        "instructions": "Tools to prompt the other agenthold agents this agent may prompt, wait for their turns \
            and read their sessions' events."
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_notifications_and_bad_messages() {
        let request = parse(br#"{"jsonrpc":"2.0","id":7,"method":"tools/list"}"#).expect("a request");
        assert_eq!(request, Incoming::Request { id: json!(7), method: "tools/list".into(), params: Value::Null });
        let request = parse(br#"{"jsonrpc":"2.0","id":"a","method":"x","params":{"k":1}}"#).expect("a request");
        assert!(matches!(request, Incoming::Request { ref params, .. } if params["k"] == 1));
        assert_eq!(
            parse(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#).expect("ok"),
            Incoming::Notification
        );
        assert_eq!(parse(br#"{"jsonrpc":"2.0","id":1,"result":{}}"#).expect("ok"), Incoming::Notification);
        let cases: &[(&[u8], i64)] = &[
            (b"not json", code::PARSE_ERROR),
            (b"[]", code::INVALID_REQUEST),
            (b"42", code::INVALID_REQUEST),
            (br#"{"id":1,"method":"x"}"#, code::INVALID_REQUEST),
            (br#"{"jsonrpc":"2.0","id":1}"#, code::INVALID_REQUEST),
            (br#"{"jsonrpc":"2.0","id":1,"method":3}"#, code::INVALID_REQUEST),
            (br#"{"jsonrpc":"2.0","id":{"a":1},"method":"x"}"#, code::INVALID_REQUEST),
            (br#"{"jsonrpc":"2.0","id":1.5,"method":"x"}"#, code::INVALID_REQUEST),
        ];
        for (body, want) in cases {
            let (_, error) = parse(body).expect_err(&String::from_utf8_lossy(body));
            assert_eq!(error.code, *want, "{}", String::from_utf8_lossy(body));
        }
        let (id, _) = parse(br#"{"jsonrpc":"1.0","id":"q","method":"x"}"#).expect_err("bad version");
        assert_eq!(id, json!("q"), "the error answers the request's id when it has one");
    }

    #[test]
    fn version_negotiation() {
        assert_eq!(initialize(&json!({"protocolVersion": "2025-03-26"}))["protocolVersion"], "2025-03-26");
        assert_eq!(initialize(&json!({"protocolVersion": "1999-01-01"}))["protocolVersion"], PROTOCOL_VERSIONS[0]);
        assert_eq!(initialize(&Value::Null)["capabilities"]["tools"]["listChanged"], false);
        assert_eq!(error(&json!(1), &RpcError::invalid_params("x"))["error"]["code"], code::INVALID_PARAMS);
    }
}
