//! What every request is held to (docs/operations.md, "Limits"): a body limit (413), a
//! request id on every answer and in the JSON logs, housekeeping purges, and a graceful shutdown
//! that closes open streams with 1012 so clients resume. The cap on requests at once and the
//! deadline per request are driven in-process (`api::limits`'s tests); half-sent bodies, which
//! take no slot, in `abuse.rs`.

use std::time::Duration;

use serde_json::{Value, json};
use sqlx::Connection;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::support::TestServer;

async fn read_answer(tcp: &mut TcpStream, timeout: Duration) -> String {
    let mut answer = vec![0u8; 4096];
    let read = tokio::time::timeout(timeout, tcp.read(&mut answer)).await.expect("an answer in time").expect("reading");
    String::from_utf8_lossy(&answer[..read]).into_owned()
}

#[tokio::test]
async fn a_body_over_the_limit_is_refused_with_413() {
    let server = TestServer::start_with(&[("AGENTHOLD_MAX_BODY_BYTES", "2048")]).await;
    let big = json!({"name": "x".repeat(4096), "harness": "fake"});
    let (status, body) = server.post("/api/v1/agents", big).await;
    assert_eq!((status, body["error"]["code"].as_str()), (413, Some("PAYLOAD_TOO_LARGE")), "{body}");
    let (status, _) = server.post("/api/v1/agents", json!({"name": "small", "harness": "fake"})).await;
    assert_eq!(status, 201);
}

#[tokio::test]
async fn every_answer_carries_a_request_id_that_the_json_logs_repeat() {
    let server = TestServer::start_with(&[("AGENTHOLD_LOG_FORMAT", "json")]).await;
    let client = IdClient { url: server.url.clone(), token: server.token.clone() };
    let (id, status) = client.get_with_id("/api/v1/no-such-route", Some("trace-42.a_b")).await;
    assert_eq!((status, id.as_deref()), (404, Some("trace-42.a_b")), "a well-formed id is kept");
    let (id, _) = client.get_with_id("/api/v1/me", Some("bad id with spaces")).await;
    let id = id.expect("an id");
    assert!(uuid::Uuid::parse_str(&id).is_ok(), "a malformed id is replaced: {id}");
    let (fresh, _) = client.get_with_id("/api/v1/me", None).await;
    assert!(fresh.is_some_and(|fresh| fresh != id), "a new id per request");

    // Each request's access line carries its id.
    let log = server.log();
    let lines: Vec<Value> = log.lines().filter_map(|line| serde_json::from_str(line).ok()).collect();
    assert!(lines.len() > 3, "the log is JSON lines: {log}");
    assert!(
        lines.iter().any(|line| line["span"]["request_id"] == json!("trace-42.a_b")),
        "a request's lines carry its id: {log}"
    );
}

#[tokio::test]
async fn housekeeping_purges_expired_browser_sessions_and_old_failed_logins() {
    let server = TestServer::start_with(&[("AGENTHOLD_HOUSEKEEPING_SECS", "1")]).await;
    let mut db = sqlx::PgConnection::connect(&server.database_url).await.expect("database");
    let user: uuid::Uuid = sqlx::query_scalar("SELECT id FROM users LIMIT 1").fetch_one(&mut db).await.expect("a user");
    for (expires, hash) in [("now() - interval '1 minute'", "a"), ("now() + interval '1 hour'", "b")] {
        sqlx::query(&format!(
            "INSERT INTO browser_sessions (id, token_hash, user_id, csrf_token, expires_at) VALUES ($1, $2, $3, 'c', {expires})"
        ))
        .bind(uuid::Uuid::new_v4())
        .bind(hash.as_bytes())
        .bind(user)
        .execute(&mut db)
        .await
        .expect("a browser session");
    }
    sqlx::query("INSERT INTO login_failures (username, address, at) VALUES ('old', '1.2.3.4', now() - interval '2 days'), ('new', '1.2.3.4', now())")
        .execute(&mut db)
        .await
        .expect("failures");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let sessions: i64 =
            sqlx::query_scalar("SELECT count(*) FROM browser_sessions").fetch_one(&mut db).await.expect("count");
        let failures: Vec<String> =
            sqlx::query_scalar("SELECT username FROM login_failures").fetch_all(&mut db).await.expect("failures");
        if sessions == 1 && failures == ["new"] {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "not purged: {sessions} sessions, failures {failures:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test]
async fn a_graceful_shutdown_closes_open_streams_with_1012() {
    let mut server = TestServer::start().await;
    let agent = server.create_agent(json!({})).await;
    let session = server.create_session(&agent).await;
    let mut watcher = server.watch(&session, "0").await;
    assert!(server.terminate(Duration::from_secs(15)), "the server did not stop");
    assert_eq!(watcher.close_code(Duration::from_secs(5)).await, Some(1012));
}

/// A small client that sends an `X-Request-Id` and reads the answer's.
struct IdClient {
    url: String,
    token: String,
}

impl IdClient {
    async fn get_with_id(&self, path: &str, id: Option<&str>) -> (Option<String>, u16) {
        let addr = self.url.trim_start_matches("http://").to_owned();
        let mut tcp = TcpStream::connect(addr).await.expect("connecting");
        let id_header = id.map(|id| format!("x-request-id: {id}\r\n")).unwrap_or_default();
        let request = format!(
            "GET {path} HTTP/1.1\r\nhost: x\r\nconnection: close\r\nauthorization: Bearer {}\r\n{id_header}\r\n",
            self.token
        );
        tcp.write_all(request.as_bytes()).await.expect("writing");
        let answer = read_answer(&mut tcp, Duration::from_secs(10)).await;
        let status = answer.get(9..12).and_then(|s| s.parse().ok()).unwrap_or(0);
        let id = answer.lines().find_map(|line| line.strip_prefix("x-request-id: ").map(|v| v.trim().to_owned()));
        (id, status)
    }
}
