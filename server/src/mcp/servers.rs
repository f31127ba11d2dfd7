//! The `mcpServers` entry a harness is given in `session/new` and `session/load` (ACP's HTTP
//! transport, offered only to harnesses that advertise `mcpCapabilities.http`: agenthold's MCP
//! server is an HTTP route, and the stdio transport would need a program in the sandbox).
//!
//! Behind the egress proxy the URL names the reserved host [`super::HOST`] and the bearer is the
//! agent's placeholder: the proxy, which knows the sandbox by its own credentials, swaps it for
//! the agent's credential and sends the request to the server. Without a proxy (the `local`
//! driver, where the harness is a process of the server's host and already sees what the
//! server's user sees) the URL is the server's own address and the bearer the credential.

use std::sync::Arc;

use agent_client_protocol::v1::schema::{HttpHeader, McpServer, McpServerHttp};

use super::credential;
use crate::ids::AgentId;
use crate::secrets::master_key::MasterKey;

/// The name harnesses show for the server (tools appear as `agenthold` tools).
pub const SERVER_NAME: &str = "agenthold";

pub use agenthold_core::mcp::Offered;

/// Where harnesses reach the MCP route.
#[derive(Clone)]
pub struct Endpoint {
    /// The URL (`https://mcp.agenthold.internal/api/v1/mcp` behind the proxy).
    pub url: String,
    /// Whether the proxy adds the credential (the harness gets the placeholder).
    pub via_proxy: bool,
    /// Derives the credentials.
    pub master_key: Arc<MasterKey>,
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoint").field("url", &self.url).field("via_proxy", &self.via_proxy).finish()
    }
}

impl Endpoint {
    /// The proxied endpoint.
    pub fn proxied(master_key: Arc<MasterKey>) -> Self {
        Self { url: format!("https://{}{}", super::HOST, super::PATH), via_proxy: true, master_key }
    }

    /// The server's own address (`http://127.0.0.1:<port>`), for harnesses on the server's host.
    pub fn direct(api: std::net::SocketAddr, master_key: Arc<MasterKey>) -> Self {
        let host = if api.ip().is_unspecified() { "127.0.0.1".to_owned() } else { api.ip().to_string() };
        let host = if host.contains(':') { format!("[{host}]") } else { host };
        Self { url: format!("http://{host}:{}{}", api.port(), super::PATH), via_proxy: false, master_key }
    }

    /// The agent's entry. It holds the agent's credential when not proxied: never log it.
    pub fn server_for(&self, agent: AgentId) -> McpServer {
        let bearer = if self.via_proxy {
            credential::placeholder(agent)
        } else {
            credential::token(&self.master_key, agent).expose().to_owned()
        };
        let header = HttpHeader::new("Authorization", format!("Bearer {bearer}"));
        McpServer::Http(McpServerHttp::new(SERVER_NAME, self.url.clone()).headers(vec![header]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proxied_sandboxes_hold_the_placeholder_and_local_ones_the_credential() {
        let key = Arc::new(MasterKey::generate());
        let agent = AgentId::new();
        let proxied = serde_json::to_value(Endpoint::proxied(key.clone()).server_for(agent)).expect("json");
        assert_eq!(proxied["type"], "http");
        assert_eq!(proxied["name"], "agenthold");
        assert_eq!(proxied["url"], "https://mcp.agenthold.internal/api/v1/mcp");
        let bearer = format!("Bearer {}", credential::placeholder(agent));
        assert_eq!(proxied["headers"], serde_json::json!([{"name": "Authorization", "value": bearer}]));
        let direct = Endpoint::direct("0.0.0.0:8080".parse().expect("addr"), key.clone());
        assert_eq!(direct.url, "http://127.0.0.1:8080/api/v1/mcp");
        let entry = serde_json::to_value(direct.server_for(agent)).expect("json");
        let header = entry["headers"][0]["value"].as_str().unwrap_or_default();
        assert_eq!(credential::verify(&key, header), Some(agent));
        assert!(!format!("{direct:?}").contains("ahmcp1"));
        assert!(!format!("{:?}", Offered(vec![direct.server_for(agent)])).contains("ahmcp1"));
    }
}
