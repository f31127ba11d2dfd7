//! The ACP messages agenthold sends and the answers it reads, built from and parsed into the
//! `agent-client-protocol` crate's v1 schema types. Session updates are not parsed here: they
//! are stored as received, unknown variants included.

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::schema::{
    CancelNotification, ClientCapabilities, ContentBlock, Implementation, InitializeRequest, InitializeResponse,
    LoadSessionRequest, McpServer, NewSessionRequest, NewSessionResponse, PermissionOption, PermissionOptionKind,
    PromptRequest, PromptResponse, RequestPermissionOutcome, RequestPermissionRequest, RequestPermissionResponse,
    ResumeSessionRequest, SelectedPermissionOutcome,
};
use serde_json::Value;

/// Method names.
pub mod method {
    /// `initialize`.
    pub const INITIALIZE: &str = "initialize";
    /// `authenticate`.
    pub const AUTHENTICATE: &str = "authenticate";
    /// `session/new`.
    pub const SESSION_NEW: &str = "session/new";
    /// `session/load`.
    pub const SESSION_LOAD: &str = "session/load";
    /// `session/resume`.
    pub const SESSION_RESUME: &str = "session/resume";
    /// `session/prompt`.
    pub const SESSION_PROMPT: &str = "session/prompt";
    /// Client → agent: put a session in one of the modes the agent offers.
    pub const SESSION_SET_MODE: &str = "session/set_mode";
    /// `session/cancel` (a notification).
    pub const SESSION_CANCEL: &str = "session/cancel";
    /// `session/update` (a notification from the harness).
    pub const SESSION_UPDATE: &str = "session/update";
    /// `session/request_permission` (a request from the harness).
    pub const REQUEST_PERMISSION: &str = "session/request_permission";
    /// `elicitation/create` (a request from the harness: its own question for a person).
    pub const ELICITATION_CREATE: &str = "elicitation/create";
}

fn to_value<T: serde::Serialize>(message: &T) -> Value {
    serde_json::to_value(message).unwrap_or(Value::Null)
}

/// `initialize`: protocol v1; neither file system nor terminal capabilities are advertised
/// (the harness uses its own tools inside its sandbox). `_meta.terminal_output_delta` asks
/// claude-agent-acp and codex-acp for a command's output as appended chunks
/// (`_meta.terminal_output_delta` on its tool call updates) rather than the whole output again on
/// every update; the updates are stored as sent either way.
pub fn initialize() -> Value {
    let info = Implementation::new("agenthold", env!("CARGO_PKG_VERSION"));
    let mut request = to_value(
        &InitializeRequest::new(ProtocolVersion::V1).client_capabilities(ClientCapabilities::new()).client_info(info),
    );
    if let Some(capabilities) = request.get_mut("clientCapabilities").and_then(Value::as_object_mut) {
        capabilities.insert("_meta".to_owned(), serde_json::json!({"terminal_output_delta": true}));
        // The harness's own questions (form mode) reach a person like permission questions.
        capabilities.insert("elicitation".to_owned(), serde_json::json!({"form": {}}));
        // Terminal login methods are listed (a person runs them in the web terminal).
        capabilities.insert("auth".to_owned(), serde_json::json!({"terminal": true}));
        if let Some(meta) = capabilities.get_mut("_meta").and_then(Value::as_object_mut) {
            meta.insert("terminal-auth".to_owned(), Value::Bool(true));
        }
    }
    request
}

/// `session/new` in `cwd`, with these MCP servers.
pub fn new_session(cwd: &str, mcp_servers: &[McpServer]) -> Value {
    to_value(&NewSessionRequest::new(cwd).mcp_servers(mcp_servers.to_vec()))
}

/// `session/load` of the harness's session id, with these MCP servers.
pub fn load_session(acp_session_id: &str, cwd: &str, mcp_servers: &[McpServer]) -> Value {
    to_value(&LoadSessionRequest::new(acp_session_id.to_owned(), cwd).mcp_servers(mcp_servers.to_vec()))
}

/// `session/set_mode` of the harness's session id.
pub fn set_mode(acp_session_id: &str, mode_id: &str) -> Value {
    serde_json::json!({"sessionId": acp_session_id, "modeId": mode_id})
}

/// `session/resume` of the harness's session id, with these MCP servers.
pub fn resume_session(acp_session_id: &str, cwd: &str, mcp_servers: &[McpServer]) -> Value {
    to_value(&ResumeSessionRequest::new(acp_session_id.to_owned(), cwd).mcp_servers(mcp_servers.to_vec()))
}

/// `session/prompt` with the given content blocks (already validated at the API edge).
pub fn prompt(acp_session_id: &str, blocks: Vec<ContentBlock>) -> Value {
    to_value(&PromptRequest::new(acp_session_id.to_owned(), blocks))
}

/// `session/cancel`.
pub fn cancel(acp_session_id: &str) -> Value {
    to_value(&CancelNotification::new(acp_session_id.to_owned()))
}

/// What agenthold needs from the harness's capabilities.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Capabilities {
    /// `loadSession`.
    pub load: bool,
    /// `sessionCapabilities.resume`.
    pub resume: bool,
    /// `mcpCapabilities.http`: agenthold's MCP server is offered only then.
    pub mcp_http: bool,
}

/// Reads an `initialize` answer; an error says why it is unusable.
pub fn parse_initialize(result: &Value) -> Result<Capabilities, String> {
    let response: InitializeResponse =
        serde_json::from_value(result.clone()).map_err(|e| format!("unreadable initialize answer: {e}"))?;
    if response.protocol_version != ProtocolVersion::V1 {
        return Err(format!("the harness speaks ACP version {:?}; agenthold speaks 1", response.protocol_version));
    }
    let capabilities = response.agent_capabilities;
    Ok(Capabilities {
        load: capabilities.load_session,
        resume: capabilities.session_capabilities.resume.is_some(),
        mcp_http: capabilities.mcp_capabilities.http,
    })
}

/// Reads a `session/new` answer: the harness's session id.
pub fn parse_new_session(result: &Value) -> Result<String, String> {
    let response: NewSessionResponse =
        serde_json::from_value(result.clone()).map_err(|e| format!("unreadable session/new answer: {e}"))?;
    Ok(response.session_id.0.to_string())
}

/// Reads a `session/prompt` answer: the stop reason (snake_case) and the usage, if given.
pub fn parse_prompt(result: &Value) -> Result<(String, Option<Value>), String> {
    let response: PromptResponse =
        serde_json::from_value(result.clone()).map_err(|e| format!("unreadable session/prompt answer: {e}"))?;
    let stop_reason = match serde_json::to_value(response.stop_reason) {
        Ok(Value::String(reason)) => reason,
        _ => "end_turn".to_owned(),
    };
    Ok((stop_reason, result.get("usage").cloned()))
}

/// Reads a `session/request_permission` request.
pub fn parse_permission_request(params: &Value) -> Result<RequestPermissionRequest, String> {
    serde_json::from_value(params.clone()).map_err(|e| format!("unreadable permission request: {e}"))
}

/// The answer choosing `wanted` by kind (the first option of the first kind offered), or
/// cancelled when the harness offers none of them.
pub fn choose_by_kind(
    options: &[PermissionOption],
    wanted: &[PermissionOptionKind],
) -> (Value, Option<PermissionOption>) {
    let chosen = wanted.iter().find_map(|kind| options.iter().find(|o| o.kind == *kind).cloned());
    let outcome = match &chosen {
        Some(option) => RequestPermissionOutcome::Selected(SelectedPermissionOutcome::new(option.option_id.clone())),
        None => RequestPermissionOutcome::Cancelled,
    };
    (to_value(&RequestPermissionResponse::new(outcome)), chosen)
}

/// The answer choosing the option `option_id` (which the caller checked is offered).
pub fn choose_option(option_id: &str) -> Value {
    let outcome = RequestPermissionOutcome::Selected(SelectedPermissionOutcome::new(option_id.to_owned()));
    to_value(&RequestPermissionResponse::new(outcome))
}

/// The cancelled answer.
pub fn cancelled() -> Value {
    to_value(&RequestPermissionResponse::new(RequestPermissionOutcome::Cancelled))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn initialize_advertises_no_client_fs_or_terminal() {
        let request = initialize();
        assert_eq!(request["protocolVersion"], json!(1));
        assert_eq!(request["clientCapabilities"]["terminal"], json!(false));
        assert_eq!(request["clientCapabilities"]["fs"]["readTextFile"], json!(false));
        assert_eq!(request["clientCapabilities"]["_meta"]["terminal_output_delta"], json!(true));
        assert_eq!(request["clientCapabilities"]["elicitation"], json!({"form": {}}));
        assert_eq!(request["clientCapabilities"]["auth"]["terminal"], json!(true));
        assert_eq!(request["clientCapabilities"]["_meta"]["terminal-auth"], json!(true));
    }

    #[test]
    fn reads_capabilities() {
        let caps = parse_initialize(
            &json!({"protocolVersion": 1, "agentCapabilities": {"loadSession": true, "sessionCapabilities": {"resume": {}}}}),
        );
        assert_eq!(caps, Ok(Capabilities { load: true, resume: true, mcp_http: false }));
        let http =
            parse_initialize(&json!({"protocolVersion": 1, "agentCapabilities": {"mcpCapabilities": {"http": true}}}));
        assert_eq!(http.map(|c| c.mcp_http), Ok(true));
        let none = parse_initialize(&json!({"protocolVersion": 1}));
        assert_eq!(none, Ok(Capabilities::default()));
        assert!(parse_initialize(&json!({"protocolVersion": 2})).is_err());
    }

    #[test]
    fn sessions_offer_the_mcp_servers_given() {
        use agent_client_protocol::v1::schema::{McpServer, McpServerHttp};
        let servers = vec![McpServer::Http(McpServerHttp::new("agenthold", "https://mcp.example/api/v1/mcp"))];
        assert_eq!(new_session("/home/agent", &[])["mcpServers"], json!([]));
        assert_eq!(new_session("/home/agent", &servers)["mcpServers"][0]["type"], "http");
        assert_eq!(load_session("acp-1", "/h", &servers)["mcpServers"][0]["name"], "agenthold");
        assert_eq!(resume_session("acp-1", "/h", &servers)["mcpServers"][0]["url"], "https://mcp.example/api/v1/mcp");
    }

    #[test]
    fn options_are_chosen_by_kind() {
        let options: Vec<PermissionOption> = serde_json::from_value(json!([
            {"optionId": "r", "name": "Reject", "kind": "reject_once"},
            {"optionId": "x-allow", "name": "Allow", "kind": "allow_once"},
        ]))
        .expect("options parse");
        let allow = [PermissionOptionKind::AllowOnce, PermissionOptionKind::AllowAlways];
        let (answer, chosen) = choose_by_kind(&options, &allow);
        assert_eq!(answer, json!({"outcome": {"outcome": "selected", "optionId": "x-allow"}}));
        assert!(chosen.is_some());
        let (answer, chosen) = choose_by_kind(&options[..1], &allow);
        assert_eq!(answer, json!({"outcome": {"outcome": "cancelled"}}));
        assert!(chosen.is_none());
    }
    #[test]
    fn reads_stop_reason_and_usage() {
        let (reason, usage) =
            parse_prompt(&json!({"stopReason": "max_tokens", "usage": {"totalTokens": 3}})).expect("parses");
        assert_eq!(reason, "max_tokens");
        assert_eq!(usage, Some(json!({"totalTokens": 3})));
    }
}
