//! Plumbing every agenthold crate needs and none of them owns, written once instead of once per
//! crate: [`tls`], the rustls setup of every client and server (the server's tunnel listener,
//! the egress proxy, sandboxd, fakeagent, the CLI; the `tls` feature, on by default), and
//! [`jsonrpc`], the JSON-RPC 2.0 envelope (the ACP client in agenthold-core, which takes this
//! crate without `tls`; the MCP server; fakeagent).

pub mod jsonrpc;
#[cfg(feature = "tls")]
pub mod tls;
