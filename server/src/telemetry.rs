//! Structured logs through `tracing`: `RUST_LOG` filters (default `info`);
//! `AGENTHOLD_LOG_FORMAT=json` writes one JSON object per line (with the request's id in its
//! span), `text` (the default) lines for people. Never a secret, a token or a request body.

/// Installs the log subscriber once (later calls are no-ops, for tests).
pub fn init() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_target(false);
    let _ = match std::env::var("AGENTHOLD_LOG_FORMAT").as_deref() {
        Ok("json") => builder.json().with_current_span(true).with_span_list(false).try_init(),
        _ => builder.try_init(),
    };
}
