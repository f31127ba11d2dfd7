//! What every request on both listeners is held to (docs/operations.md, "Limits"): a cap on the
//! requests handled at once (`503 SERVER_BUSY` beyond it, never a queue), of which requests
//! without credentials (logins, webhook deliveries, anything anonymous) may take only a share —
//! the rest is kept for signed-in callers; a cap per caller (per credential: an API token, a
//! browser session, an agent's MCP credential — smaller on the MCP route), `429
//! TOO_MANY_REQUESTS` beyond it; a deadline per request (`503 REQUEST_TIMEOUT`), and on the API
//! listener an immediate `503 DATABASE_UNAVAILABLE` while Postgres does not answer — also for
//! requests already in flight when it stops (except the routes that do not need it). WebSockets
//! hold a slot only until they are upgraded. A request's body is read before it takes a slot
//! ([`super::body_read`]). Body limits are axum's `DefaultBodyLimit`, set where the routers are
//! built; header limits are hyper's (100 headers, 400 KiB).
//!
//! A caller is told apart by its credential's presence only (it is checked later, by the
//! route): a made-up credential gets the signed-in share but is refused at once by its route, so
//! it holds a slot for a database lookup, not for a handler's work.

use std::collections::HashMap;
use std::hash::BuildHasher;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use parking_lot::Mutex;
use tokio::sync::Semaphore;

use super::error::ApiError;
use crate::config::Config;
use crate::error_code::ErrorCode;
use crate::store::availability::Availability;

/// How many requests one caller may have in flight.
#[derive(Clone, Copy, Debug)]
pub struct CallerCaps {
    /// On any route.
    pub per_caller: usize,
    /// On the MCP route (`/api/v1/mcp`, one agent's credential).
    pub per_agent_mcp: usize,
}

impl CallerCaps {
    /// The configured caps (docs/operations.md, "Limits").
    pub fn of(config: &Config) -> Self {
        Self {
            per_caller: usize::try_from(config.max_requests_per_caller).unwrap_or(usize::MAX),
            per_agent_mcp: usize::try_from(config.max_mcp_requests_per_agent).unwrap_or(usize::MAX),
        }
    }
}

/// The limits of one listener.
#[derive(Clone, Debug)]
pub struct RequestLimits {
    slots: Arc<Semaphore>,
    anonymous: Arc<Semaphore>,
    callers: Arc<InFlight>,
    caps: CallerCaps,
    timeout: Duration,
    database: Option<Availability>,
}

/// Requests in flight per caller (keyed by a hash of the credential, never the credential).
#[derive(Debug, Default)]
struct InFlight {
    hasher: std::hash::RandomState,
    counts: Mutex<HashMap<u64, usize>>,
}

/// One request of a caller; counted until dropped.
struct Counted {
    callers: Arc<InFlight>,
    key: u64,
}

impl InFlight {
    fn try_take(self: &Arc<Self>, key: u64, cap: usize) -> Option<Counted> {
        let mut counts = self.counts.lock();
        let count = counts.entry(key).or_insert(0);
        if *count >= cap {
            return None;
        }
        *count += 1;
        Some(Counted { callers: Arc::clone(self), key })
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        let mut counts = self.callers.counts.lock();
        if let Some(count) = counts.get_mut(&self.key) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                counts.remove(&self.key);
            }
        }
    }
}

impl RequestLimits {
    /// `max_concurrent` requests at once — of which at most `max_anonymous` without credentials
    /// — each within `timeout`, and `caps` per caller; with `database`, requests that need
    /// Postgres are refused at once while it does not answer.
    pub fn new(
        max_concurrent: usize,
        max_anonymous: usize,
        caps: CallerCaps,
        timeout: Duration,
        database: Option<Availability>,
    ) -> Self {
        let max_concurrent = max_concurrent.max(1);
        Self {
            slots: Arc::new(Semaphore::new(max_concurrent)),
            anonymous: Arc::new(Semaphore::new(max_anonymous.clamp(1, max_concurrent))),
            callers: Arc::new(InFlight::default()),
            caps,
            timeout,
            database,
        }
    }
}

/// Routes that answer without Postgres (liveness, readiness's own answer, the document, the web
/// page and its files).
pub(super) fn needs_database(path: &str) -> bool {
    path.starts_with("/api/") && path != "/api/v1/openapi.json"
}

/// The credential a request carries, if any: its `Authorization` header, else a session cookie.
fn credential(request: &Request) -> Option<&[u8]> {
    if let Some(value) = request.headers().get(header::AUTHORIZATION) {
        return Some(value.as_bytes());
    }
    request
        .headers()
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|cookies| cookies.split(';'))
        .map(str::trim)
        .find(|c| {
            [crate::auth::SESSION_COOKIE, crate::auth::SECURE_SESSION_COOKIE]
                .iter()
                .any(|name| c.strip_prefix(name).is_some_and(|rest| rest.starts_with('=')))
        })
        .map(str::as_bytes)
}

/// Middleware: applies [`RequestLimits`].
pub async fn enforce(State(limits): State<RequestLimits>, request: Request, next: Next) -> Response {
    let database = limits.database.as_ref().filter(|_| needs_database(request.uri().path())).cloned();
    if database.as_ref().is_some_and(|database| !database.is_up()) {
        return ApiError::DatabaseUnavailable.into_response();
    }
    let (_anonymous, _caller) = match credential(&request) {
        None => match limits.anonymous.clone().try_acquire_owned() {
            Ok(permit) => (Some(permit), None),
            Err(_) => return ApiError::ServerBusy.into_response(),
        },
        Some(credential) => {
            let cap =
                if request.uri().path() == "/api/v1/mcp" { limits.caps.per_agent_mcp } else { limits.caps.per_caller };
            let key = limits.callers.hasher.hash_one(credential);
            match limits.callers.try_take(key, cap) {
                Some(counted) => (None, Some(counted)),
                None => return too_many(cap),
            }
        }
    };
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

/// `429 TOO_MANY_REQUESTS`: the caller has `cap` requests in flight.
fn too_many(cap: usize) -> Response {
    let error = ApiError::Refused {
        status: StatusCode::TOO_MANY_REQUESTS,
        code: ErrorCode::TooManyRequests,
        message: format!("this credential has {cap} requests in flight, as many as this server allows one caller"),
    };
    let mut response = error.into_response();
    response.headers_mut().insert(header::RETRY_AFTER, header::HeaderValue::from_static("1"));
    response
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

    fn request(headers: &[(&str, &str)]) -> Request {
        let mut builder = Request::builder().uri("/api/v1/me");
        for (name, value) in headers {
            builder = builder.header(*name, *value);
        }
        builder.body(axum::body::Body::empty()).expect("request")
    }

    #[test]
    fn a_credential_is_a_bearer_header_or_a_session_cookie() {
        assert_eq!(credential(&request(&[("authorization", "Bearer ah_x")])), Some(&b"Bearer ah_x"[..]));
        assert_eq!(
            credential(&request(&[("cookie", "theme=dark; agenthold_session=abc")])),
            Some(&b"agenthold_session=abc"[..])
        );
        assert_eq!(
            credential(&request(&[("cookie", "__Host-agenthold_session=s")])),
            Some(&b"__Host-agenthold_session=s"[..])
        );
        assert_eq!(credential(&request(&[("cookie", "theme=dark")])), None);
        assert_eq!(credential(&request(&[])), None);
    }

    #[test]
    fn callers_are_counted_apart_and_given_back() {
        let callers = Arc::new(InFlight::default());
        let first = callers.try_take(1, 2).expect("first");
        let _second = callers.try_take(1, 2).expect("second");
        assert!(callers.try_take(1, 2).is_none(), "at the cap");
        let _other = callers.try_take(2, 2).expect("another caller");
        drop(first);
        assert!(callers.try_take(1, 2).is_some(), "given back");
        assert!(callers.counts.lock().len() <= 2, "only callers in flight are kept");
    }

    /// A router whose `/hold` waits until `release` is notified, behind [`enforce`].
    fn held(limits: RequestLimits, release: Arc<tokio::sync::Notify>) -> axum::Router {
        let hold = move || {
            let release = Arc::clone(&release);
            async move { release.notified().await }
        };
        axum::Router::new()
            .route("/hold", axum::routing::get(hold.clone()))
            .route("/api/v1/mcp", axum::routing::get(hold))
            .route("/now", axum::routing::get(|| async {}))
            .layer(axum::middleware::from_fn_with_state(limits, enforce))
    }

    async fn status(router: &axum::Router, path: &str, authorization: Option<&str>) -> u16 {
        use tower::ServiceExt;
        let mut builder = Request::builder().uri(path);
        if let Some(value) = authorization {
            builder = builder.header("authorization", value);
        }
        let request = builder.body(axum::body::Body::empty()).expect("request");
        router.clone().oneshot(request).await.expect("infallible").status().as_u16()
    }

    /// Starts `count` requests that hold their slot, and lets them reach their handler.
    async fn hold(router: &axum::Router, path: &'static str, authorization: Option<&'static str>, count: usize) {
        for _ in 0..count {
            let router = router.clone();
            tokio::spawn(async move { status(&router, path, authorization).await });
        }
        for _ in 0..20 {
            tokio::task::yield_now().await;
        }
    }

    #[tokio::test]
    async fn anonymous_requests_take_only_their_share_and_signed_in_callers_are_still_answered() {
        let release = Arc::new(tokio::sync::Notify::new());
        let caps = CallerCaps { per_caller: 100, per_agent_mcp: 100 };
        let limits = RequestLimits::new(8, 3, caps, Duration::from_secs(60), None);
        let router = held(limits, Arc::clone(&release));
        hold(&router, "/hold", None, 3).await;
        assert_eq!(status(&router, "/now", None).await, 503, "the anonymous share is taken");
        assert_eq!(status(&router, "/now", Some("Bearer a")).await, 200, "a signed-in caller still gets a slot");
        hold(&router, "/hold", Some("Bearer b"), 5).await;
        assert_eq!(status(&router, "/now", Some("Bearer c")).await, 503, "every slot is taken now");
        release.notify_waiters();
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert_eq!(status(&router, "/now", None).await, 200, "given back");
    }

    #[tokio::test]
    async fn one_caller_holds_at_most_its_cap_and_an_agent_fewer_on_the_mcp_route() {
        let release = Arc::new(tokio::sync::Notify::new());
        let caps = CallerCaps { per_caller: 2, per_agent_mcp: 1 };
        let router = held(RequestLimits::new(100, 10, caps, Duration::from_secs(60), None), Arc::clone(&release));
        hold(&router, "/hold", Some("Bearer greedy"), 2).await;
        assert_eq!(status(&router, "/now", Some("Bearer greedy")).await, 429);
        assert_eq!(status(&router, "/now", Some("Bearer other")).await, 200, "another caller is not held up");
        hold(&router, "/api/v1/mcp", Some("Bearer agent"), 1).await;
        assert_eq!(status(&router, "/api/v1/mcp", Some("Bearer agent")).await, 429, "one MCP call at a time");
        release.notify_waiters();
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert_eq!(status(&router, "/now", Some("Bearer greedy")).await, 200, "given back");
    }

    #[tokio::test]
    async fn a_request_past_its_deadline_is_answered_503_request_timeout_and_its_slot_comes_back() {
        let release = Arc::new(tokio::sync::Notify::new());
        let caps = CallerCaps { per_caller: 10, per_agent_mcp: 10 };
        let router = held(RequestLimits::new(1, 1, caps, Duration::from_millis(200), None), release);
        let started = std::time::Instant::now();
        assert_eq!(status(&router, "/hold", Some("Bearer a")).await, 503);
        assert!(started.elapsed() < Duration::from_secs(2));
        assert_eq!(status(&router, "/now", Some("Bearer a")).await, 200, "the one slot is free again");
    }
}
