//! The ACP client side, as a small JSON-RPC layer of our own over the `agent-client-protocol`
//! crate's schema types. The crate's connection object cannot be taken over mid-turn by a
//! restarted server (its request ids and pending state live in memory); ours are plain data the
//! supervisor persists: request ids are unique across server incarnations, and the pending
//! `session/prompt` of a turn is a database row.

pub mod auth_methods;
pub mod messages;
pub mod wire;
