//! The composition root's second half: serves a built [`App`] on its listeners (the API, the
//! replicas' internal one, the tunnel, and the metrics listener when configured) until the
//! shutdown future resolves, then shuts the app down.

use std::net::SocketAddr;

use anyhow::Context;
use axum::serve::ListenerExt;

use super::build::App;
use super::listeners::{Listeners, wait_for};
use crate::{api, tunnel};

/// How long open WebSockets may hold a graceful shutdown up.
const SERVER_GRACE: std::time::Duration = std::time::Duration::from_secs(5);

/// Serves `app` until `shutdown` resolves (or a listener fails), then stops it.
pub async fn serve(
    app: App,
    listeners: Listeners,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let stopping = app.state.stopping.clone();
    // Small frames (acks, stream events) must not wait for Nagle's algorithm.
    let api_listener = listeners.api.tap_io(|tcp| {
        let _ = tcp.set_nodelay(true);
    });
    let tunnel_listener = listeners.tunnel.tap_io(|tcp| {
        let _ = tcp.set_nodelay(true);
    });
    let internal_listener = listeners.internal.tap_io(|tcp| {
        let _ = tcp.set_nodelay(true);
    });
    let api =
        axum::serve(api_listener, api::router(app.state.clone()).into_make_service_with_connect_info::<SocketAddr>())
            .with_graceful_shutdown(wait_for(stopping.clone()));
    let internal = axum::serve(
        internal_listener,
        api::internal_router(app.state.clone()).into_make_service_with_connect_info::<SocketAddr>(),
    )
    .with_graceful_shutdown(wait_for(stopping.clone()));
    let tunnel_router = crate::api::tunnel::router(app.state.clone());
    let tunnel: std::pin::Pin<Box<dyn Future<Output = std::io::Result<()>> + Send>> = match app.tunnel_tls.clone() {
        Some(acceptor) => {
            let listener = tunnel::tls::TlsListener::new(tunnel_listener, acceptor);
            Box::pin(
                axum::serve(listener, tunnel_router).with_graceful_shutdown(wait_for(stopping.clone())).into_future(),
            )
        }
        None => Box::pin(
            axum::serve(tunnel_listener, tunnel_router)
                .with_graceful_shutdown(wait_for(stopping.clone()))
                .into_future(),
        ),
    };
    // Prometheus metrics, on a listener of their own (docs/operations.md).
    let metrics = match app.state.config.metrics_listen {
        Some(addr) => {
            let listener = crate::metrics::bind(addr).await?;
            println!("agenthold metrics listening on {}", listener.local_addr()?);
            match app.recorder.clone() {
                Some(handle) => {
                    tracing::info!(%addr, "metrics at /metrics");
                    Some(tokio::spawn(crate::metrics::serve(listener, handle, wait_for(stopping.clone()))))
                }
                None => {
                    tracing::warn!("a metrics recorder is installed already: /metrics is not served");
                    None
                }
            }
        }
        None => None,
    };
    tracing::info!("agenthold is serving");
    let servers = async { tokio::try_join!(async { api.await }, async { internal.await }, tunnel) };
    tokio::pin!(servers);
    let served = tokio::select! {
        result = &mut servers => result.map(|_| ()).context("serving"),
        () = shutdown => {
            tracing::info!("shutting down");
            let _ = app.stop.send(true);
            // Open WebSockets would keep a graceful shutdown waiting: give them a moment.
            let _ = tokio::time::timeout(SERVER_GRACE, &mut servers).await;
            Ok(())
        }
    };
    if let Some(metrics) = metrics {
        metrics.abort();
    }
    app.shut_down().await;
    served
}
