//! Login throttling holds under concurrency and costs bounded memory; API tokens are not written
//! to on every request.

use serde_json::{Value, json};

use crate::support::TestServer;

const PASSWORD: &str = "a long enough password";
/// The per-account limit of failed logins (api/login.rs).
const LIMIT: usize = 10;
/// What one argon2 check allocates (the crate's defaults), KiB.
const ARGON2_KIB: u64 = 19 * 1024;
/// How much the server's peak RSS may grow while 60 logins race, beyond the argon2 memory of its
/// hashing threads (one per core, each keeping ~19 MiB once it has run: `auth::passwords`):
/// requests, responses, the allocator's slack. Unbounded, 60 checks took gigabytes. (A bound on
/// growth, not on the peak itself: the peak before the burst is whatever the server's start did.)
const GROWTH_SLACK_KIB: u64 = 32 * 1024;

/// A `kB` field of `/proc/<pid>/status`.
fn status_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("the server's /proc status");
    status
        .lines()
        .find_map(|line| line.strip_prefix(field))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("{field} in /proc/{pid}/status"))
}

async fn login(server: &TestServer, username: &str, password: &str) -> (u16, Option<String>) {
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new()).build_http();
    let body = json!({"username": username, "password": password}).to_string();
    let request = hyper::Request::builder()
        .method("POST")
        .uri(format!("{}/api/v1/auth/login", server.url))
        .header("content-type", "application/json")
        .body(http_body_util::Full::new(hyper::body::Bytes::from(body)))
        .expect("request");
    let response = client.request(request).await.expect("login request");
    let retry_after = response.headers().get("retry-after").and_then(|v| v.to_str().ok()).map(str::to_owned);
    (response.status().as_u16(), retry_after)
}

#[tokio::test]
async fn sixty_concurrent_wrong_logins_get_at_most_the_limit_of_401s_in_bounded_memory() {
    let server = TestServer::start().await;
    let (status, body) = server.post("/api/v1/users", json!({"username": "ivan", "password": PASSWORD})).await;
    assert_eq!(status, 201, "{body}");
    let pid = server.pid().expect("the server runs");
    let before = status_kib(pid, "VmHWM:");

    let attempts = (0..60).map(|_| login(&server, "ivan", "not the password at all"));
    let answers = futures_util::future::join_all(attempts).await;
    let after = status_kib(pid, "VmHWM:");

    let unauthorized = answers.iter().filter(|(status, _)| *status == 401).count();
    let throttled = answers.iter().filter(|(status, _)| *status == 429).count();
    eprintln!("60 concurrent wrong logins: {unauthorized}×401, {throttled}×429; peak RSS {before} kB → {after} kB");
    assert!(unauthorized <= LIMIT, "at most {LIMIT} password checks: {answers:?}");
    assert_eq!(unauthorized + throttled, 60, "the rest are throttled: {answers:?}");
    assert!(
        answers.iter().filter(|(status, _)| *status == 429).all(|(_, retry)| retry.is_some()),
        "a 429 says when to retry"
    );
    let cores = std::thread::available_parallelism().map_or(2, std::num::NonZeroUsize::get) as u64;
    let bound = cores * ARGON2_KIB + GROWTH_SLACK_KIB;
    // The kernel's RSS counts are per thread and folded in lazily: two readings of the peak can
    // even go down by a little (a run saw `after` below `before`).
    let grew = after.saturating_sub(before);
    assert!(
        grew < bound,
        "peak RSS grew {grew} kB ({before} → {after}); at most {bound} kB ({cores} hashing threads' argon2 memory and slack)"
    );
    // Throttled, not locked out: once the longest wait the 429s named is over, the right password
    // signs in. (Whether it is refused just before depends on how long the burst took: the pair's
    // backoff after five failures is one second from the last; `login_throttle` tests the rule.)
    let wait: Vec<u64> = answers.iter().filter_map(|(_, retry)| retry.as_deref()?.parse().ok()).collect();
    let longest = wait.iter().copied().max().expect("a Retry-After");
    assert!(longest <= 5, "a short wait, not a lockout: {wait:?}");
    tokio::time::sleep(std::time::Duration::from_secs(longest)).await;
    assert_eq!(login(&server, "ivan", PASSWORD).await.0, 200);
}

#[tokio::test]
async fn a_token_used_twice_within_a_minute_is_marked_used_once() {
    let server = TestServer::start().await;
    let (status, token) = server.post("/api/v1/tokens", json!({"name": "script"})).await;
    assert_eq!(status, 201, "{token}");
    let (value, id) = (token["token"].as_str().expect("token"), token["id"].as_str().expect("id"));
    let last_used = |tokens: &Value| {
        tokens["tokens"].as_array().expect("tokens").iter().find(|t| t["id"] == id).map(|t| t["last_used_at"].clone())
    };
    let me = |token: &str| {
        let token = token.to_owned();
        let server = &server;
        async move { server.raw_with_headers("GET", "/api/v1/me", Some(&token), &[], json!({})).await.0 }
    };
    assert_eq!(me(value).await, 200);
    let (_, listed) = server.get("/api/v1/tokens").await;
    let first = last_used(&listed).expect("listed");
    assert!(first.is_string(), "the first use is recorded: {listed}");
    // Postgres' now() has microseconds: a second write would show.
    assert_eq!(me(value).await, 200);
    let (_, listed) = server.get("/api/v1/tokens").await;
    assert_eq!(last_used(&listed).expect("listed"), first, "not written again within a minute");
}
