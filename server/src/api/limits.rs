//! What every request on both listeners is held to (docs/operations.md, "Limits"): a cap on the
//! requests handled at once (`503 SERVER_BUSY` beyond it, never a queue), a deadline per request
//! (`503 REQUEST_TIMEOUT`), and on the API listener an immediate `503 DATABASE_UNAVAILABLE` while
//! Postgres does not answer — also for requests already in flight when it stops (except the
//! routes that do not need it). WebSockets hold a slot only
//! until they are upgraded. Body limits are axum's `DefaultBodyLimit`, set where the routers are
//! built; header limits are hyper's (100 headers, 400 KiB).

use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use tokio::sync::Semaphore;

use super::error::ApiError;
use crate::store::availability::Availability;

/// The limits of one listener.
#[derive(Clone, Debug)]
pub struct RequestLimits {
    slots: Arc<Semaphore>,
    timeout: Duration,
    database: Option<Availability>,
}

impl RequestLimits {
    /// `max_concurrent` requests at once, each within `timeout`; with `database`, requests that
    /// need Postgres are refused at once while it does not answer.
    pub fn new(max_concurrent: usize, timeout: Duration, database: Option<Availability>) -> Self {
        Self { slots: Arc::new(Semaphore::new(max_concurrent.max(1))), timeout, database }
    }
}

/// Routes that answer without Postgres (liveness, readiness's own answer, the document, the web
/// page and its files).
pub(super) fn needs_database(path: &str) -> bool {
    path.starts_with("/api/") && path != "/api/v1/openapi.json"
}

/// Middleware: applies [`RequestLimits`].
pub async fn enforce(State(limits): State<RequestLimits>, request: Request, next: Next) -> Response {
    let database = limits.database.as_ref().filter(|_| needs_database(request.uri().path())).cloned();
    if database.as_ref().is_some_and(|database| !database.is_up()) {
        return ApiError::DatabaseUnavailable.into_response();
    }
    let Ok(_slot) = limits.slots.clone().try_acquire_owned() else {
        return ApiError::ServerBusy.into_response();
    };
    let handled = tokio::time::timeout(limits.timeout, next.run(request));
    match database {
        // A request in flight when Postgres stops answering is answered at once (its handler is
        // dropped, as when a client goes away) rather than after the pool's acquire timeout.
        Some(database) => tokio::select! {
            handled = handled => handled.unwrap_or_else(|_| ApiError::Timeout.into_response()),
            () = database.went_down() => ApiError::DatabaseUnavailable.into_response(),
        },
        None => handled.await.unwrap_or_else(|_| ApiError::Timeout.into_response()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_api_routes_wait_on_the_database() {
        assert!(needs_database("/api/v1/agents"));
        assert!(!needs_database("/api/v1/openapi.json"));
        assert!(!needs_database("/healthz"));
        assert!(!needs_database("/readyz"));
        assert!(!needs_database("/assets/index.js"));
    }
}
