//! agenthold's core without IO: the supervisor's protocol logic as a state machine
//! ([`supervisor`]: inputs in, effects out) and the pure types it speaks — validated ids ([`ids`]), ACP's messages and
//! JSON-RPC framing ([`acp`]), every error code ([`error_code`]), events and the state changes stored with them ([`events`]), the
//! permission engine ([`permissions`]) and the MCP servers a harness is offered ([`mcp`]).
//!
//! Nothing here does IO: no async runtime, no database, no sockets, no clock. The crate depends
//! on no IO crate (`scripts/check-core-deps.sh`), so that purity is a build fact, not a review
//! comment. The server (`agenthold-server`) performs what the core asks for.

#[macro_use]
mod code_list;

pub mod acp;
pub mod error_code;
pub mod events;
pub mod ids;
pub mod mcp;
pub mod permissions;
pub mod repo;
pub mod supervisor;
