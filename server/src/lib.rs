//! The agenthold server: the REST/WebSocket API, the event log, the ACP client side of every
//! harness, the sandbox drivers and the tunnel sandboxd dials into.
//!
//! [`app::run`] wires it together; `main.rs` only parses the configuration and calls it. The
//! pure parts (ids, ACP framing, event types, the permission engine, the supervisor's core) are
//! the `agenthold-core` crate, re-exported here under their old paths.

pub use agenthold_core::{acp, error_code, ids, permissions};

pub mod api;
pub mod app;
pub mod auth;
pub mod config;
pub mod crash_points;
pub mod dispatch;
pub mod events;
pub mod fleet;
pub mod harness;
pub mod housekeeping;
pub mod logins;
pub mod mcp;
pub mod metrics;
pub mod outbound;
pub mod prompting;
pub mod proxy_feed;
pub mod replicas;
pub mod sandbox;
pub mod secret;
pub mod secrets;
pub mod state;
pub mod store;
pub mod supervisor;
pub mod telemetry;
pub mod triggers;
pub mod tunnel;
