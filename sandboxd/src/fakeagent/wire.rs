//! The JSON-RPC 2.0 side of fakeagent: building messages, the error codes it uses, and the one
//! serialised writer every thread sends its stdout lines through.

use std::io::Write;

use parking_lot::Mutex;
use serde_json::{Value, json};

/// JSON-RPC error codes fakeagent answers with (ACP §1.7).
pub mod code {
    /// The request object is not valid JSON-RPC, or the session is busy.
    pub const INVALID_REQUEST: i64 = -32600;
    /// Unknown method, or a capability fakeagent was told not to advertise.
    pub const METHOD_NOT_FOUND: i64 = -32601;
    /// Params missing or of the wrong type.
    pub const INVALID_PARAMS: i64 = -32602;
    /// The script's `error` command, or a failure on fakeagent's side.
    pub const INTERNAL_ERROR: i64 = -32603;
    /// ACP `resource_not_found`: an unknown session id.
    pub const RESOURCE_NOT_FOUND: i64 = -32002;
    /// ACP `auth_required`: sessions need `authenticate` first (`FAKEAGENT_REQUIRE_AUTH`).
    pub const AUTH_REQUIRED: i64 = -32000;
}

/// A JSON-RPC error to answer a request with.
#[derive(Debug, Clone, PartialEq)]
pub struct RpcError {
    /// The JSON-RPC error code (see [`code`]).
    pub code: i64,
    /// Human-readable text.
    pub message: String,
}

impl RpcError {
    /// An error with the given code and message.
    pub fn new(code: i64, message: impl Into<String>) -> Self {
        RpcError { code, message: message.into() }
    }

    /// `-32002`: the session id is not known.
    pub fn unknown_session(id: &str) -> Self {
        Self::new(code::RESOURCE_NOT_FOUND, format!("unknown session {id:?}"))
    }
}

/// A successful response to the request `id`.
pub fn response(id: &Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

/// An error response to the request `id`.
pub fn error_response(id: &Value, err: &RpcError) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": err.code, "message": err.message}})
}

/// A `session/update` notification carrying `update`.
pub fn session_update(session_id: &str, update: &Value) -> Value {
    json!({
        "jsonrpc": "2.0",
        "method": "session/update",
        "params": {"sessionId": session_id, "update": update},
    })
}

/// fakeagent's stdout. Each line is written whole and flushed under one lock, so lines from
/// concurrent prompts never interleave. Write errors (the client went away) are ignored: the
/// reader sees end of input and the process exits.
pub struct Out {
    inner: Mutex<Box<dyn Write + Send>>,
}

impl Out {
    /// Wraps the writer all protocol output goes to.
    pub fn new(writer: Box<dyn Write + Send>) -> Self {
        Out { inner: Mutex::new(writer) }
    }

    /// Sends one JSON message as one line.
    pub fn send(&self, message: &Value) {
        self.line(&message.to_string());
    }

    /// Writes `text` plus a newline and flushes. `text` must not contain a newline.
    pub fn line(&self, text: &str) {
        let mut w = self.inner.lock();
        let mut buf = Vec::with_capacity(text.len() + 1);
        buf.extend_from_slice(text.as_bytes());
        buf.push(b'\n');
        let _ = w.write_all(&buf).and_then(|()| w.flush());
    }
}
