//! Prometheus metrics (`AGENTHOLD_METRICS_LISTEN`, a listener of their own: `GET /metrics` in the
//! text format; docs/operations.md has a scrape config). The `metrics` facade records, the
//! Prometheus exporter renders; no label carries a user-controlled string of unbounded
//! cardinality — routes are their templates (`/api/v1/agents/{id}`), event types, stop reasons and
//! error codes are closed sets.
//!
//! What is measured: HTTP requests by method, route and status, with latency; events stored by
//! type, with commit sizes and latency; turns running and queued, turn durations by stop reason;
//! stream watchers open, events sent while catching up vs live, watchers that lagged or were
//! closed (by reason); harness starts and exits (by kind); sandbox starts (by what was there) with
//! their latency, sandboxes awake; tunnel connections (first or again) and open tunnels; login
//! failures; whether Postgres answers; schedule runs and webhook deliveries (by outcome).

use std::net::SocketAddr;
use std::time::Instant;

use axum::Router;
use axum::extract::{MatchedPath, Request};
use axum::middleware::Next;
use axum::response::Response;
use axum::routing::get;
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};

/// Installs the process-wide recorder; `None` when one is installed already (tests).
pub fn install() -> Option<PrometheusHandle> {
    let buckets = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0];
    PrometheusBuilder::new()
        .set_buckets(&buckets)
        .ok()?
        .set_buckets_for_metric(
            metrics_exporter_prometheus::Matcher::Full("agenthold_commit_events".to_owned()),
            &[1.0, 2.0, 4.0, 16.0, 64.0, 256.0, 1024.0, 4096.0],
        )
        .ok()?
        .install_recorder()
        .ok()
}

/// Serves `GET /metrics` on its own listener until `stop`.
pub async fn serve(
    listener: tokio::net::TcpListener,
    handle: PrometheusHandle,
    stop: impl Future<Output = ()> + Send + 'static,
) {
    let app = Router::new().route(
        "/metrics",
        get(move || {
            let handle = handle.clone();
            async move { ([("content-type", "text/plain; version=0.0.4")], handle.render()) }
        }),
    );
    if let Err(error) = axum::serve(listener, app).with_graceful_shutdown(stop).await {
        tracing::warn!(%error, "the metrics listener failed");
    }
}

/// Binds the metrics listener.
pub async fn bind(addr: SocketAddr) -> anyhow::Result<tokio::net::TcpListener> {
    use anyhow::Context;
    tokio::net::TcpListener::bind(addr).await.with_context(|| format!("binding the metrics listener {addr}"))
}

/// Middleware: counts each request by method, route template and status, and times it.
pub async fn track_http(request: Request, next: Next) -> Response {
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "unmatched".to_owned(), |path| path.as_str().to_owned());
    let method = request.method().as_str().to_owned();
    let started = Instant::now();
    let response = next.run(request).await;
    let status = response.status().as_u16().to_string();
    let labels = [("method", method), ("route", route)];
    metrics::histogram!("agenthold_http_request_duration_seconds", &labels).record(started.elapsed().as_secs_f64());
    let [method, route] = labels;
    metrics::counter!("agenthold_http_requests_total", &[method, route, ("status", status)]).increment(1);
    response
}

/// A batch of events committed: its size, how long the commit took, and each event's type.
pub fn events_committed(types: impl Iterator<Item = &'static str>, seconds: f64) {
    // One counter update per type in the batch, not per event (a flood commits thousands of
    // updates at once; each update is a registry lookup). A batch has a handful of types.
    let mut per_type: Vec<(&'static str, u64)> = Vec::new();
    let mut count = 0u64;
    for kind in types {
        count += 1;
        match per_type.iter_mut().find(|(known, _)| *known == kind) {
            Some((_, n)) => *n += 1,
            None => per_type.push((kind, 1)),
        }
    }
    for (kind, n) in per_type {
        metrics::counter!("agenthold_events_stored_total", "type" => kind).increment(n);
    }
    metrics::histogram!("agenthold_commit_events").record(count as f64);
    metrics::histogram!("agenthold_commit_duration_seconds").record(seconds);
}

/// The server-wide turn slots now.
pub fn turns(running: usize, queued: usize) {
    metrics::gauge!("agenthold_turns_running").set(running as f64);
    metrics::gauge!("agenthold_turns_queued").set(queued as f64);
}

/// A stream watcher opened (`+1`) or closed (`-1`).
pub fn watchers(delta: f64) {
    metrics::gauge!("agenthold_stream_watchers").increment(delta);
}

/// A harness started.
pub fn harness_started() {
    metrics::counter!("agenthold_harness_starts_total").increment(1);
}

/// A login failed (`reason`: `bad_credentials`, `throttled`, `busy`).
pub fn login_failed(reason: &'static str) {
    metrics::counter!("agenthold_login_failures_total", "reason" => reason).increment(1);
}

/// Events a stream sent: `catch_up` (read from Postgres) or `live` (from the feed).
pub fn stream_sent(phase: &'static str, count: usize) {
    metrics::counter!("agenthold_stream_events_sent_total", "phase" => phase).increment(count as u64);
}

/// A stream fell behind the live feed (a gap or a lag) and reads the missing range from Postgres.
pub fn stream_lagged() {
    metrics::counter!("agenthold_stream_lagged_total").increment(1);
}

/// A stream was closed by the server (`reason`: `too_slow`, `revoked`, `deleted`, `error`,
/// `shutdown`).
pub fn stream_closed(reason: &'static str) {
    metrics::counter!("agenthold_stream_closed_total", "reason" => reason).increment(1);
}

/// The stop reasons a turn can end with (anything else a harness says counts as `other`).
const STOP_REASONS: &[&str] =
    &["end_turn", "max_tokens", "max_turn_requests", "refusal", "cancelled", "error", "timeout", "interrupted"];

/// A turn ended (committed) after `seconds`.
pub fn turn_ended(stop_reason: &str, seconds: f64) {
    let reason = STOP_REASONS.iter().find(|known| **known == stop_reason).copied().unwrap_or("other");
    metrics::histogram!("agenthold_turn_duration_seconds", "stop_reason" => reason).record(seconds);
}

/// A harness process exited: `exit_0`, `exit_nonzero`, `signal` or `unknown`.
pub fn harness_exited(code: Option<i32>, signal: Option<i32>) {
    let kind = match (code, signal) {
        (Some(0), _) => "exit_0",
        (Some(_), _) => "exit_nonzero",
        (None, Some(_)) => "signal",
        (None, None) => "unknown",
    };
    metrics::counter!("agenthold_harness_exits_total", "kind" => kind).increment(1);
}

/// A sandbox was started (`from`: `missing` — created first — or `stopped`), taking `seconds`.
pub fn sandbox_started(from: &'static str, seconds: f64) {
    metrics::histogram!("agenthold_sandbox_start_duration_seconds", "from" => from).record(seconds);
}

/// The engine's own start of a sandbox (the driver's `start` call alone: for Docker, `docker
/// start`), taking `seconds`: the part of a wake that is the engine's.
pub fn sandbox_engine_started(from: &'static str, seconds: f64) {
    metrics::histogram!("agenthold_sandbox_engine_start_duration_seconds", "from" => from).record(seconds);
}

/// Sandboxes awake on this server now.
pub fn sandboxes_awake(count: usize) {
    metrics::gauge!("agenthold_sandboxes_awake").set(count as f64);
}

/// A sandbox's tunnel connected (`again`: it had connected before for this sandbox).
pub fn tunnel_connected(again: bool) {
    let kind = if again { "reconnect" } else { "first" };
    metrics::counter!("agenthold_tunnel_connections_total", "kind" => kind).increment(1);
    metrics::gauge!("agenthold_tunnels_open").increment(1.0);
}

/// A sandbox's tunnel closed.
pub fn tunnel_closed() {
    metrics::gauge!("agenthold_tunnels_open").decrement(1.0);
}

/// Whether Postgres answers the availability monitor.
pub fn database_up(up: bool) {
    metrics::gauge!("agenthold_database_up").set(if up { 1.0 } else { 0.0 });
}

/// An agent claimed a pooled harness: took it running (`taken`), or only its sandbox.
pub fn pooled_harness_claimed(taken: bool) {
    let outcome = if taken { "taken" } else { "differed" };
    metrics::counter!("agenthold_pooled_harness_claims_total", "outcome" => outcome).increment(1);
}

/// Pooled harnesses of one profile (`harness[@model][:VARIABLES]`) ready to claim.
pub fn pooled_harnesses_ready(profile: &str, ready: usize) {
    metrics::gauge!("agenthold_pooled_harnesses_ready", "profile" => profile.to_owned()).set(ready as f64);
}

/// Pooled sandboxes ready to claim.
pub fn warm_pool(ready: usize) {
    metrics::gauge!("agenthold_warm_pool_ready").set(ready as f64);
}
