//! Structured logs through `tracing`: `RUST_LOG` filters (default `info`). Never a secret, a
//! token or a request body.

/// Installs the log subscriber once (later calls are no-ops, for tests).
pub fn init() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt().with_env_filter(filter).with_target(false).try_init();
}
