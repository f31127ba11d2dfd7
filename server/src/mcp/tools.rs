//! The four tools: their definitions as `tools/list` shows them, the checked arguments of a
//! `tools/call` ([`Call::parse`]: bad arguments are a JSON-RPC `INVALID_PARAMS` error, never a
//! panic), and the shape of a tool's answer or error ([`ToolError`], an `isError` result).

use serde::Deserialize;
use serde_json::{Value, json};

use super::rpc::RpcError;
use crate::ids::{Seq, SessionId, TurnId};

/// The longest prompt text, in bytes.
pub const MAX_TEXT_BYTES: usize = 64 * 1024;
/// `wait_turn`'s default and largest wait, in seconds (below the server's request timeout).
pub const WAIT_DEFAULT_SECS: u64 = 30;
/// See [`WAIT_DEFAULT_SECS`].
pub const WAIT_MAX_SECS: u64 = 100;
/// `read_events`' default and largest page.
pub const EVENTS_DEFAULT: i64 = 50;
/// See [`EVENTS_DEFAULT`].
pub const EVENTS_MAX: i64 = 200;

/// `tools/list`'s result.
pub fn list() -> Value {
    json!({"tools": [
        {
            "name": "list_agents",
            "description": "The agenthold agents this agent may prompt.",
            "inputSchema": {"type": "object", "properties": {}, "additionalProperties": false}
        },
        {
            "name": "prompt_agent",
            "description": "Prompts an agent this agent may prompt, in a new session or in one of its sessions. \
                Returns the session and the turn; wait for the turn with wait_turn.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "agent": {"type": "string", "description": "The agent's name or id (from list_agents)."},
                    "text": {"type": "string", "description": "The prompt."},
                    "session_id": {"type": "string", "description": "One of the agent's sessions to continue; absent: a new session."}
                },
                "required": ["agent", "text"],
                "additionalProperties": false
            }
        },
        {
            "name": "wait_turn",
            "description": "Waits (at most timeout_secs) for a turn started with prompt_agent to end; returns its \
                state, stop reason and the agent's final message.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "turn_id": {"type": "string"},
                    "timeout_secs": {"type": "integer", "minimum": 0, "maximum": WAIT_MAX_SECS, "default": WAIT_DEFAULT_SECS}
                },
                "required": ["turn_id"],
                "additionalProperties": false
            }
        },
        {
            "name": "read_events",
            "description": "A page of a session's events after a cursor (the seq of the last event read; 0 for the start).",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "session_id": {"type": "string"},
                    "after": {"type": "integer", "minimum": 0, "default": 0},
                    "limit": {"type": "integer", "minimum": 1, "maximum": EVENTS_MAX, "default": EVENTS_DEFAULT}
                },
                "required": ["session_id"],
                "additionalProperties": false
            }
        }
    ]})
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct NoArgs {}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PromptArgs {
    agent: String,
    text: String,
    session_id: Option<SessionId>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct WaitArgs {
    turn_id: TurnId,
    timeout_secs: Option<u64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct EventsArgs {
    session_id: SessionId,
    after: Option<Seq>,
    limit: Option<i64>,
}

/// A checked `tools/call`.
#[derive(Debug, Clone, PartialEq)]
pub enum Call {
    /// `list_agents`.
    ListAgents,
    /// `prompt_agent`.
    PromptAgent {
        /// A name or an id.
        agent: String,
        /// The prompt (non-empty, bounded, no NUL).
        text: String,
        /// A session to continue.
        session_id: Option<SessionId>,
    },
    /// `wait_turn`.
    WaitTurn {
        /// The turn.
        turn_id: TurnId,
        /// Seconds, at most [`WAIT_MAX_SECS`].
        timeout_secs: u64,
    },
    /// `read_events`.
    ReadEvents {
        /// The session.
        session_id: SessionId,
        /// The cursor.
        after: Seq,
        /// The page's size.
        limit: i64,
    },
}

impl Call {
    /// The tool's name.
    pub fn name(&self) -> &'static str {
        match self {
            Self::ListAgents => "list_agents",
            Self::PromptAgent { .. } => "prompt_agent",
            Self::WaitTurn { .. } => "wait_turn",
            Self::ReadEvents { .. } => "read_events",
        }
    }

    /// Whether the tool only reads (audited in aggregate, [`super::read_audit`]).
    pub fn is_read_only(&self) -> bool {
        !matches!(self, Self::PromptAgent { .. })
    }

    /// Checks `tools/call`'s params (`{"name", "arguments"}`).
    pub fn parse(params: &Value) -> Result<Self, RpcError> {
        let name =
            params.get("name").and_then(Value::as_str).ok_or_else(|| RpcError::invalid_params("no tool name"))?;
        let arguments = match params.get("arguments") {
            None | Some(Value::Null) => json!({}),
            Some(arguments) => arguments.clone(),
        };
        fn args<T: serde::de::DeserializeOwned>(name: &str, arguments: Value) -> Result<T, RpcError> {
            serde_json::from_value(arguments).map_err(|e| RpcError::invalid_params(format!("{name}: {e}")))
        }
        match name {
            "list_agents" => args::<NoArgs>(name, arguments).map(|_| Self::ListAgents),
            "prompt_agent" => {
                let a: PromptArgs = args(name, arguments)?;
                if a.text.trim().is_empty() {
                    return Err(RpcError::invalid_params("prompt_agent: text is empty"));
                }
                if a.text.len() > MAX_TEXT_BYTES {
                    return Err(RpcError::invalid_params(format!("prompt_agent: text is over {MAX_TEXT_BYTES} bytes")));
                }
                if a.text.contains('\0') || a.agent.contains('\0') {
                    return Err(RpcError::invalid_params("prompt_agent: the NUL character is not allowed"));
                }
                if a.agent.is_empty() || a.agent.len() > 200 {
                    return Err(RpcError::invalid_params("prompt_agent: agent must be a name or an id"));
                }
                Ok(Self::PromptAgent { agent: a.agent, text: a.text, session_id: a.session_id })
            }
            "wait_turn" => {
                let a: WaitArgs = args(name, arguments)?;
                let timeout_secs = a.timeout_secs.unwrap_or(WAIT_DEFAULT_SECS);
                if timeout_secs > WAIT_MAX_SECS {
                    return Err(RpcError::invalid_params(format!(
                        "wait_turn: timeout_secs is at most {WAIT_MAX_SECS}"
                    )));
                }
                Ok(Self::WaitTurn { turn_id: a.turn_id, timeout_secs })
            }
            "read_events" => {
                let a: EventsArgs = args(name, arguments)?;
                let after = a.after.unwrap_or(0);
                let limit = a.limit.unwrap_or(EVENTS_DEFAULT);
                if after < 0 {
                    return Err(RpcError::invalid_params("read_events: after must be 0 or more"));
                }
                if !(1..=EVENTS_MAX).contains(&limit) {
                    return Err(RpcError::invalid_params(format!("read_events: limit must be 1-{EVENTS_MAX}")));
                }
                Ok(Self::ReadEvents { session_id: a.session_id, after, limit })
            }
            other => Err(RpcError::invalid_params(format!("no tool named {:?}", truncate(other, 64)))),
        }
    }
}

fn truncate(s: &str, max: usize) -> &str {
    match s.char_indices().nth(max) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

/// A tool's refusal: a `tools/call` result with `isError`, a stable code and a clear message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolError {
    /// `NOT_ALLOWED`, `CHAIN_TOO_DEEP`, `TURN_IN_PROGRESS`, `NOT_FOUND`, `INVALID_SESSION`,
    /// `AMBIGUOUS_AGENT`, `NO_RUNNING_TURN`, `RATE_LIMITED`, `BUDGET_EXHAUSTED`.
    pub code: crate::error_code::ErrorCode,
    /// What went wrong.
    pub message: String,
    /// `CHAIN_TOO_DEEP`: the agents of the chain, from its top to the agent it would have prompted.
    pub chain: Option<Vec<String>>,
}

impl ToolError {
    /// A refusal.
    pub fn new(code: crate::error_code::ErrorCode, message: impl Into<String>) -> Self {
        Self { code, message: message.into(), chain: None }
    }

    /// The `tools/call` result.
    pub fn result(&self) -> Value {
        let mut error = json!({"code": self.code, "message": self.message});
        if let Some(chain) = &self.chain {
            error["chain"] = json!(chain);
        }
        json!({
            "content": [{"type": "text", "text": format!("{}: {}", self.code, self.message)}],
            "structuredContent": {"error": error},
            "isError": true
        })
    }
}

/// A tool's answer: its JSON as text and as structured content.
pub fn answer(structured: Value) -> Value {
    json!({
        "content": [{"type": "text", "text": structured.to_string()}],
        "structuredContent": structured,
        "isError": false
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_are_checked() {
        assert_eq!(Call::parse(&json!({"name": "list_agents"})), Ok(Call::ListAgents));
        assert_eq!(Call::parse(&json!({"name": "list_agents", "arguments": {}})), Ok(Call::ListAgents));
        let turn = TurnId::new();
        assert_eq!(
            Call::parse(&json!({"name": "wait_turn", "arguments": {"turn_id": turn}})),
            Ok(Call::WaitTurn { turn_id: turn, timeout_secs: WAIT_DEFAULT_SECS })
        );
        let session = SessionId::new();
        assert_eq!(
            Call::parse(&json!({"name": "read_events", "arguments": {"session_id": session, "after": 3}})),
            Ok(Call::ReadEvents { session_id: session, after: 3, limit: EVENTS_DEFAULT })
        );
        assert!(matches!(
            Call::parse(&json!({"name": "prompt_agent", "arguments": {"agent": "b", "text": "hi"}})),
            Ok(Call::PromptAgent { session_id: None, .. })
        ));
        let big = "x".repeat(MAX_TEXT_BYTES + 1);
        for bad in [
            json!({}),
            json!({"name": 3}),
            json!({"name": "rm_rf"}),
            json!({"name": "list_agents", "arguments": {"x": 1}}),
            json!({"name": "list_agents", "arguments": [1]}),
            json!({"name": "prompt_agent", "arguments": {"agent": "b"}}),
            json!({"name": "prompt_agent", "arguments": {"agent": "b", "text": "  "}}),
            json!({"name": "prompt_agent", "arguments": {"agent": "b", "text": big}}),
            json!({"name": "prompt_agent", "arguments": {"agent": "b", "text": "a\u{0}"}}),
            json!({"name": "prompt_agent", "arguments": {"agent": "", "text": "hi"}}),
            json!({"name": "prompt_agent", "arguments": {"agent": "b", "text": "hi", "session_id": "nope"}}),
            json!({"name": "wait_turn", "arguments": {"turn_id": "nope"}}),
            json!({"name": "wait_turn", "arguments": {"turn_id": turn, "timeout_secs": 101}}),
            json!({"name": "wait_turn", "arguments": {"turn_id": turn, "timeout_secs": -1}}),
            json!({"name": "read_events", "arguments": {"session_id": session, "after": -1}}),
            json!({"name": "read_events", "arguments": {"session_id": session, "limit": 0}}),
            json!({"name": "read_events", "arguments": {"session_id": session, "limit": 201}}),
        ] {
            let error = Call::parse(&bad).expect_err(&bad.to_string());
            assert_eq!(error.code, super::super::rpc::code::INVALID_PARAMS, "{bad}");
        }
        let long = "é".repeat(500);
        let error = Call::parse(&json!({"name": long})).expect_err("unknown");
        assert!(error.message.len() < 200, "an unknown name is quoted shortened");
    }

    #[test]
    fn the_list_names_every_tool_and_errors_are_flagged() {
        let names: Vec<String> = list()["tools"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|t| t["name"].as_str().map(str::to_owned))
            .collect();
        assert_eq!(names, ["list_agents", "prompt_agent", "wait_turn", "read_events"]);
        let result = ToolError::new(crate::error_code::ErrorCode::NotAllowed, "no").result();
        assert_eq!(result["isError"], true);
        assert_eq!(result["structuredContent"]["error"]["code"], "NOT_ALLOWED");
        assert_eq!(answer(json!({"a": 1}))["isError"], false);
    }
}
