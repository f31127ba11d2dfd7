//! agenthold's MCP server is offered in `session/new` to a harness that speaks MCP over HTTP,
//! and to no other.

use super::*;

/// agenthold's MCP server as the server offers it behind the egress proxy (`mcp::servers`).
fn server() -> crate::mcp::Offered {
    use agent_client_protocol::v1::schema::{HttpHeader, McpServer, McpServerHttp};
    let header = HttpHeader::new("Authorization", "Bearer agenthold-mcp-placeholder-1");
    let server = McpServerHttp::new("agenthold", "https://mcp.agenthold.internal/api/v1/mcp").headers(vec![header]);
    crate::mcp::Offered(vec![McpServer::Http(server)])
}

/// Starts the harness, answers `initialize` with `capabilities`, and returns the `session/new`
/// frame it sends.
fn session_new(capabilities: &str) -> String {
    session_new_in(capabilities, None)
}

/// [`session_new`] for a harness whose sessions start in `session_cwd`.
fn session_new_in(capabilities: &str, session_cwd: Option<&str>) -> String {
    let mut sim = Sim::new();
    sim.mcp = server();
    sim.session_cwd = session_cwd.map(str::to_owned);
    sim.start_harness();
    let init = format!(
        r#"{{"jsonrpc":"2.0","id":"t-1","result":{{"protocolVersion":1,"agentCapabilities":{capabilities}}}}}"#
    );
    let effects = sim.stdout(0, &format!("{init}\n"));
    let mut sent = Vec::new();
    for (id, ..) in persists(&effects) {
        sent.extend(stdin(&sim.ok(id)));
    }
    let frames: Vec<String> = sent.iter().map(|(_, bytes)| String::from_utf8_lossy(bytes).into_owned()).collect();
    frames.into_iter().find(|f| f.contains("session/new")).expect("session/new sent")
}

#[test]
fn a_harness_that_speaks_mcp_over_http_is_offered_agenthold_s_server_and_others_are_not() {
    let offered = session_new(r#"{"mcpCapabilities":{"http":true}}"#);
    let frame: Value = serde_json::from_str(offered.trim()).expect("JSON");
    let servers = &frame["params"]["mcpServers"];
    assert_eq!(servers[0]["type"], "http", "{frame}");
    assert_eq!(servers[0]["url"], "https://mcp.agenthold.internal/api/v1/mcp");
    assert!(
        servers[0]["headers"][0]["value"].as_str().is_some_and(|v| v.starts_with("Bearer agenthold-mcp-placeholder-"))
    );
    let plain = session_new(r#"{"loadSession":true}"#);
    let frame: Value = serde_json::from_str(plain.trim()).expect("JSON");
    assert_eq!(frame["params"]["mcpServers"], json!([]), "no http capability: nothing offered");
}

#[test]
fn sessions_start_in_the_agent_s_repository_once_cloned_else_in_the_home() {
    let frame = |cwd: Option<&str>| -> Value {
        serde_json::from_str(session_new_in(r#"{"loadSession":true}"#, cwd).trim()).expect("JSON")
    };
    assert_eq!(frame(Some("/home/agent/app"))["params"]["cwd"], "/home/agent/app");
    let home = frame(None);
    assert!(home["params"]["cwd"].as_str().is_some_and(|c| !c.ends_with("/app")), "{home}");
}
