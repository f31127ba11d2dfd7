//! The server's listeners (bound before anything else, so that a port-0 address is known to what
//! the server builds) and the signals that stop it.

use std::net::SocketAddr;

use anyhow::Context;
use tokio::net::TcpListener;

use crate::config::Config;

/// The bound listeners (tests bind port 0 and read the ports back).
pub struct Listeners {
    /// The API.
    pub api: TcpListener,
    /// The tunnel.
    pub tunnel: TcpListener,
    /// The replicas' own (`AGENTHOLD_INTERNAL_LISTEN`).
    pub internal: TcpListener,
}

impl Listeners {
    /// Binds the configured addresses.
    pub async fn bind(config: &Config) -> anyhow::Result<Self> {
        let api = TcpListener::bind(config.listen).await.with_context(|| format!("binding {}", config.listen))?;
        let tunnel = TcpListener::bind(config.tunnel_listen)
            .await
            .with_context(|| format!("binding {}", config.tunnel_listen))?;
        let internal = TcpListener::bind(config.internal_listen)
            .await
            .with_context(|| format!("binding {}", config.internal_listen))?;
        // The bound addresses, for whoever started the server on port 0 (the tests do).
        println!("agenthold listening on {}", api.local_addr()?);
        println!("agenthold tunnel listening on {}", tunnel.local_addr()?);
        println!("agenthold internal listening on {}", internal.local_addr()?);
        Ok(Self { api, tunnel, internal })
    }

    /// The API's bound address.
    pub fn api_addr(&self) -> std::io::Result<SocketAddr> {
        self.api.local_addr()
    }
}

/// Resolves on SIGTERM or SIGINT.
pub async fn shutdown_signal() {
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        () = terminate => {}
    }
}

pub(super) async fn wait_for(mut stop: tokio::sync::watch::Receiver<bool>) {
    let _ = stop.wait_for(|stop| *stop).await;
}
