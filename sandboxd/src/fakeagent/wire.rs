//! The JSON-RPC 2.0 side of fakeagent: the messages it sends (the envelope and the error codes
//! are `agenthold_plumbing::jsonrpc`'s), and the one serialised writer every thread sends its
//! stdout lines through.

use std::io::Write;

use agenthold_plumbing::jsonrpc;
use parking_lot::Mutex;
use serde_json::{Value, json};

pub use agenthold_plumbing::jsonrpc::{RpcError, code, error as error_response, result as response};

/// `-32002` (ACP `resource_not_found`): the session id is not known.
pub fn unknown_session(id: &str) -> RpcError {
    RpcError::new(code::RESOURCE_NOT_FOUND, format!("unknown session {id:?}"))
}

/// A `session/update` notification carrying `update`.
pub fn session_update(session_id: &str, update: &Value) -> Value {
    jsonrpc::notification("session/update", &json!({"sessionId": session_id, "update": update}))
}

/// Appends [`session_update`]'s line (newline included) to `buf`, from the session id's and the
/// update's JSON text: an unpaced flood builds thousands of them without a JSON tree each.
pub fn push_session_update_line(buf: &mut Vec<u8>, session_id_json: &str, update_json: &str) {
    buf.extend_from_slice(br#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"#);
    buf.extend_from_slice(session_id_json.as_bytes());
    buf.extend_from_slice(br#","update":"#);
    buf.extend_from_slice(update_json.as_bytes());
    buf.extend_from_slice(b"}}\n");
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
        let mut buf = Vec::with_capacity(text.len() + 1);
        buf.extend_from_slice(text.as_bytes());
        buf.push(b'\n');
        self.lines(&buf);
    }

    /// Writes whole lines (each ending in a newline) at once and flushes: an unpaced flood's
    /// block of chunks costs one write, not one per chunk.
    pub fn lines(&self, block: &[u8]) {
        debug_assert!(block.is_empty() || block.ends_with(b"\n"), "whole lines only");
        let mut w = self.inner.lock();
        let _ = w.write_all(block).and_then(|()| w.flush());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_pushed_from_text_is_the_session_update_notification() {
        let update = json!({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "a \"b\""}});
        let mut buf = Vec::new();
        push_session_update_line(&mut buf, &Value::String("s-1".into()).to_string(), &update.to_string());
        assert_eq!(buf.iter().filter(|b| **b == b'\n').count(), 1);
        assert!(buf.ends_with(b"\n"));
        let parsed: Value = serde_json::from_slice(&buf).expect("one JSON line");
        assert_eq!(parsed, session_update("s-1", &update));
    }
}
