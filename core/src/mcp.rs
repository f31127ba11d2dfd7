//! The MCP servers a harness is offered in `session/new` and `session/load` ([`Offered`]): the
//! core passes them on; the server makes them (`mcp::servers`).

use agent_client_protocol::v1::schema::McpServer;

/// The MCP servers a harness is offered. `Debug` names how many, never their headers (which
/// may hold a credential).
#[derive(Clone, Default, PartialEq)]
pub struct Offered(pub Vec<McpServer>);

impl std::fmt::Debug for Offered {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Offered({} MCP servers)", self.0.len())
    }
}
