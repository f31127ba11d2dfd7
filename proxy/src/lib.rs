//! `agenthold-proxy`: the sandboxes' egress proxy. An HTTP proxy with CONNECT that knows each
//! sandbox by its proxy credentials (and address), lets it reach only its allow-list, refuses
//! internal destinations after resolving them, passes ordinary TLS through as bytes, and for the
//! hosts that carry secrets terminates TLS with a certificate from its own name-constrained CA
//! and swaps the sandbox's placeholder for the real value in exactly one header.
//!
//! `docs/proxy.md` describes the behaviour and the configuration file.

pub mod addr;
pub mod admission;
pub mod ca;
pub mod clienthello;
pub mod config;
pub mod connect;
pub mod cut;
pub mod forward;
pub mod headers;
pub mod host;
pub mod hostaddrs;
pub mod inject;
pub mod limits;
pub mod mitm;
pub mod net;
pub mod passthrough;
pub mod path;
pub mod policy;
pub mod reload;
pub mod respond;
pub mod secret;
pub mod server;
pub mod tunnel;
pub mod upstream;

use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;

pub use net::{Network, SystemNetwork};
pub use server::run_with;

/// Serves the proxy on `listener`, following the configuration file at `config`, until
/// `shutdown` resolves.
pub async fn run(
    listener: tokio::net::TcpListener,
    config: PathBuf,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    run_with(listener, config, Arc::new(SystemNetwork), shutdown).await
}
