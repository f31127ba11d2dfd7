//! The JSON-RPC 2.0 envelope, written once for every agenthold crate that speaks it — the
//! server's ACP client (`agenthold_core::acp::wire`, lines to and from a harness), its MCP server
//! (`server/src/mcp/rpc.rs`, one message per POST) and fakeagent (the test harness): the error
//! codes, the error object and the four message shapes. How messages are framed (a line, a POST
//! body) and classified stays with each transport. Pure: no IO, nothing that panics.

use serde_json::{Map, Value};

/// JSON-RPC error codes: the specification's, and those ACP gives a meaning to.
pub mod code {
    /// Not JSON.
    pub const PARSE_ERROR: i64 = -32700;
    /// Not a valid request object (or, for an ACP agent, a session that is busy).
    pub const INVALID_REQUEST: i64 = -32600;
    /// No such method.
    pub const METHOD_NOT_FOUND: i64 = -32601;
    /// Params missing or of the wrong shape.
    pub const INVALID_PARAMS: i64 = -32602;
    /// The answering side failed.
    pub const INTERNAL_ERROR: i64 = -32603;
    /// ACP `auth_required`: the agent needs `authenticate` first.
    pub const AUTH_REQUIRED: i64 = -32000;
    /// ACP `resource_not_found`: an unknown session (or other resource).
    pub const RESOURCE_NOT_FOUND: i64 = -32002;
}

/// An error to answer a request with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RpcError {
    /// Its code ([`code`]).
    pub code: i64,
    /// What went wrong, for the other side to read (never internal detail).
    pub message: String,
}

impl RpcError {
    /// An error with `code`.
    pub fn new(code: i64, message: impl Into<String>) -> Self {
        Self { code, message: message.into() }
    }

    /// Params missing or of the wrong shape.
    pub fn invalid_params(message: impl Into<String>) -> Self {
        Self::new(code::INVALID_PARAMS, message)
    }

    /// No such method.
    pub fn method_not_found(method: &str) -> Self {
        Self::new(code::METHOD_NOT_FOUND, format!("method not found: {method}"))
    }
}

/// A request: `{"jsonrpc":"2.0","id":…,"method":…,"params":…}`.
pub fn request(id: &Value, method: &str, params: &Value) -> Value {
    envelope([("id", id.clone()), ("method", Value::from(method)), ("params", params.clone())])
}

/// A notification (a request without an id).
pub fn notification(method: &str, params: &Value) -> Value {
    envelope([("method", Value::from(method)), ("params", params.clone())])
}

/// A success response to the request `id`.
pub fn result(id: &Value, result: &Value) -> Value {
    envelope([("id", id.clone()), ("result", result.clone())])
}

/// An error response to the request `id` (`null` when the request's id is unknown).
pub fn error(id: &Value, error: &RpcError) -> Value {
    let mut object = Map::new();
    object.insert("code".into(), error.code.into());
    object.insert("message".into(), error.message.clone().into());
    envelope([("id", id.clone()), ("error", Value::Object(object))])
}

fn envelope<const N: usize>(fields: [(&str, Value); N]) -> Value {
    let mut object = Map::with_capacity(N + 1);
    object.insert("jsonrpc".into(), "2.0".into());
    for (key, value) in fields {
        object.insert(key.into(), value);
    }
    Value::Object(object)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_four_shapes() {
        let params = json!({"sessionId": "s"});
        assert_eq!(
            request(&json!("ah-1"), "session/prompt", &params),
            json!({"jsonrpc": "2.0", "id": "ah-1", "method": "session/prompt", "params": {"sessionId": "s"}})
        );
        assert_eq!(
            notification("session/cancel", &params),
            json!({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": "s"}})
        );
        assert_eq!(result(&json!(7), &json!({})), json!({"jsonrpc": "2.0", "id": 7, "result": {}}));
        assert_eq!(
            error(&Value::Null, &RpcError::new(code::PARSE_ERROR, "the body is not JSON")),
            json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32700, "message": "the body is not JSON"}})
        );
    }

    #[test]
    fn named_errors_carry_their_codes() {
        assert_eq!(RpcError::invalid_params("x").code, -32602);
        let missing = RpcError::method_not_found("fs/delete");
        assert_eq!((missing.code, missing.message.as_str()), (-32601, "method not found: fs/delete"));
    }
}
