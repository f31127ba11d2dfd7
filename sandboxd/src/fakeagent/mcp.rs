//! The `mcp` script command: fakeagent as an MCP client of the HTTP servers its client offered
//! in `session/new`/`session/load` (`mcpServers`, ACP's `http` transport, which fakeagent
//! advertises). One call is an `initialize` and a `tools/call`, each one POST (MCP's streamable
//! HTTP transport, JSON answers), through [`super::fetch::request`]: `https://` goes through
//! `HTTPS_PROXY` like every other request of the sandbox. Every failure is an `Err` with a
//! message, never a panic.

use agenthold_plumbing::jsonrpc;
use serde_json::{Value, json};

use super::fetch;

/// An MCP server offered by the client (`{"type": "http", "name", "url", "headers"}`).
#[derive(Debug, Clone, PartialEq)]
pub struct Server {
    /// Its name.
    pub name: String,
    /// Its URL.
    pub url: String,
    /// Headers to send with every request.
    pub headers: Vec<(String, String)>,
}

/// The `http` servers in a `session/new`/`session/load` request's params (others are ignored).
pub fn servers(params: &Value) -> Vec<Server> {
    let Some(list) = params.get("mcpServers").and_then(Value::as_array) else { return Vec::new() };
    list.iter()
        .filter(|s| s.get("type").and_then(Value::as_str) == Some("http"))
        .filter_map(|s| {
            let headers = s
                .get("headers")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|h| Some((h.get("name")?.as_str()?.to_owned(), h.get("value")?.as_str()?.to_owned())))
                .collect();
            Some(Server { name: s.get("name")?.as_str()?.to_owned(), url: s.get("url")?.as_str()?.to_owned(), headers })
        })
        .collect()
}

/// Replaces each `$last.<field>` in `args` with the string (or number) `<field>` of `last`
/// (the previous call's `structuredContent`); unknown fields become empty.
pub fn substitute(args: &str, last: &Value) -> String {
    let mut out = String::new();
    let mut rest = args;
    while let Some(i) = rest.find("$last.") {
        out.push_str(&rest[..i]);
        let after = &rest[i + 6..];
        let len = after.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').count();
        let field = &after[..len];
        match last.get(field) {
            Some(Value::String(s)) => out.push_str(s),
            Some(other @ Value::Number(_)) => out.push_str(&other.to_string()),
            _ => {}
        }
        rest = &after[len..];
    }
    out.push_str(rest);
    out
}

/// A call's time limit: above the longest wait a tool may ask of the server (agenthold's
/// `wait_turn` waits up to 100 s), which the fetch's own 10 s would cut short on a loaded host.
const CALL_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(120);

fn post(server: &Server, message: &Value, env: &dyn Fn(&str) -> Option<String>) -> Result<Value, String> {
    let mut headers = server.headers.clone();
    headers.push(("Content-Type".to_owned(), "application/json".to_owned()));
    headers.push(("Accept".to_owned(), "application/json, text/event-stream".to_owned()));
    let body = message.to_string();
    let response = fetch::request_within(CALL_TIMEOUT, "POST", &server.url, &headers, Some(body.as_bytes()), env)?;
    if response.from_proxy || !(200..300).contains(&response.status) {
        let text = String::from_utf8_lossy(&response.body[..response.body.len().min(512)]).into_owned();
        let who = if response.from_proxy { "the proxy" } else { "the MCP server" };
        return Err(format!("{who} answered {}: {text}", response.status_line));
    }
    serde_json::from_slice(&response.body).map_err(|_| "the MCP server's answer is not JSON".to_owned())
}

/// `initialize`, then `method` with `params`: its result, or why it failed (transport,
/// JSON-RPC error).
fn initialized(
    server: &Server,
    method: &str,
    params: Value,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Value, String> {
    let init = jsonrpc::request(
        &json!(1),
        "initialize",
        &json!({"protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "fakeagent", "version": env!("CARGO_PKG_VERSION")}}),
    );
    let answer = post(server, &init, env)?;
    if let Some(error) = answer.get("error") {
        return Err(format!("initialize: {error}"));
    }
    let message = jsonrpc::request(&json!(2), method, &params);
    let answer = post(server, &message, env)?;
    match (answer.get("result"), answer.get("error")) {
        (Some(result), _) => Ok(result.clone()),
        (None, Some(error)) => Err(format!("JSON-RPC error {error}")),
        (None, None) => Err("the MCP server's answer has no result".to_owned()),
    }
}

/// Calls `tool` with `arguments` on `server`: the `tools/call` result (with `isError` when the
/// tool refused), or why the call failed.
pub fn call(
    server: &Server,
    tool: &str,
    arguments: Value,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Value, String> {
    initialized(server, "tools/call", json!({"name": tool, "arguments": arguments}), env)
}

/// The names of `server`'s tools (`tools/list`), or why they could not be listed.
pub fn list_tools(server: &Server, env: &dyn Fn(&str) -> Option<String>) -> Result<Vec<String>, String> {
    let result = initialized(server, "tools/list", json!({}), env)?;
    let tools = result.get("tools").and_then(Value::as_array).ok_or("the tools/list answer has no tools")?;
    Ok(tools.iter().filter_map(|t| t.get("name").and_then(Value::as_str).map(str::to_owned)).collect())
}

/// The text of a `tools/call` result's content.
pub fn text(result: &Value) -> String {
    result
        .get("content")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|c| c.get("text").and_then(Value::as_str))
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offered_servers_and_substitution() {
        let params = json!({"mcpServers": [
            {"name": "s", "command": "x", "args": [], "env": []},
            {"type": "http", "name": "agenthold", "url": "http://127.0.0.1:1/api/v1/mcp",
             "headers": [{"name": "Authorization", "value": "Bearer p"}, {"bad": 1}]},
            {"type": "http", "name": 3}
        ]});
        let got = servers(&params);
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].headers, vec![("Authorization".to_owned(), "Bearer p".to_owned())]);
        assert!(servers(&json!({})).is_empty());
        let last = json!({"turn_id": "t-1", "n": 3});
        assert_eq!(
            substitute(r#"{"turn_id":"$last.turn_id","x":$last.n,"y":"$last.none"}"#, &last),
            r#"{"turn_id":"t-1","x":3,"y":""}"#
        );
        assert_eq!(substitute("$last.", &last), "");
        assert_eq!(text(&json!({"content": [{"type": "text", "text": "a"}, {"text": "b"}]})), "a\nb");
    }

    #[test]
    fn an_unreachable_server_is_an_error() {
        let server = Server { name: "x".into(), url: "http://127.0.0.1:1/mcp".into(), headers: vec![] };
        let none = |_: &str| None;
        assert!(call(&server, "list_agents", json!({}), &none).is_err());
        assert!(list_tools(&server, &none).is_err());
        let bad = Server { url: "ftp://x".into(), ..server };
        assert!(call(&bad, "list_agents", json!({}), &none).is_err());
    }
}
