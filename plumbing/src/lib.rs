//! Plumbing every agenthold crate needs and none of them owns, written once instead of once per
//! crate: [`tls`], the rustls setup of every client and server (the server's tunnel listener,
//! the egress proxy, sandboxd, fakeagent, the CLI).
//!
//! Not here yet: the JSON-RPC 2.0 envelope (`Id`, `RpcError`, the `code` constants), still in
//! three copies — `server/src/acp/wire.rs`, `server/src/mcp/rpc.rs` and
//! `sandboxd/src/fakeagent/wire.rs` — to be folded together when the ACP layer moves into its
//! own crate.

pub mod tls;
