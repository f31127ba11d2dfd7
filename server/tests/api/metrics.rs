//! Prometheus metrics: with `AGENTHOLD_METRICS_LISTEN` the server serves `GET /metrics` on a
//! listener of its own; requests are counted by route template (never an id), events by type,
//! harness starts, turn slots and durations, stream watchers and deliveries, sandboxes and their
//! starts, tunnels, login failures, and whether Postgres answers.

use std::time::Duration;

use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::support::TestServer;

async fn scrape(port: u16) -> String {
    let mut tcp = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.expect("the metrics listener");
    tcp.write_all(b"GET /metrics HTTP/1.0\r\nhost: metrics\r\n\r\n").await.expect("request");
    let mut answer = String::new();
    tokio::time::timeout(Duration::from_secs(10), tcp.read_to_string(&mut answer))
        .await
        .expect("in time")
        .expect("read");
    assert!(answer.starts_with("HTTP/1.0 200") || answer.starts_with("HTTP/1.1 200"), "{answer}");
    answer
}

/// The value of the first sample line starting with `prefix`.
fn value(metrics: &str, prefix: &str) -> Option<f64> {
    metrics.lines().find(|l| l.starts_with(prefix)).and_then(|l| l.rsplit(' ').next()).and_then(|v| v.parse().ok())
}

#[tokio::test]
async fn metrics_count_requests_by_route_events_harnesses_and_watchers() {
    let server = TestServer::start_with(&[("AGENTHOLD_METRICS_LISTEN", "127.0.0.1:0")]).await;
    let port = server.metrics_addr().port();
    let agent = server.create_agent(json!({})).await;
    let session = server.create_session(&agent).await;
    server.prompt(&session, "text hello").await;
    server.wait_turns(&session, 1, Duration::from_secs(120)).await;
    let mut watcher = server.watch(&session, "0").await;
    watcher.next(Duration::from_secs(10)).await.expect("an event");
    let (status, _, _) = server
        .raw_with_headers(
            "POST",
            "/api/v1/auth/login",
            None,
            &[],
            json!({"username": "nobody", "password": "wrong-password"}),
        )
        .await;
    assert_eq!(status, 401);

    let metrics = scrape(port).await;
    let created =
        value(&metrics, r#"agenthold_http_requests_total{method="POST",route="/api/v1/agents",status="201"}"#);
    assert_eq!(created, Some(1.0), "{metrics}");
    assert!(
        value(
            &metrics,
            r#"agenthold_http_requests_total{method="POST",route="/api/v1/sessions/{id}/prompt",status="202"}"#
        )
        .is_some()
    );
    assert!(metrics.contains("agenthold_http_request_duration_seconds_bucket"), "a latency histogram");
    assert!(!metrics.contains(&agent) && !metrics.contains(&session), "no id in any label");
    assert!(
        value(&metrics, r#"agenthold_events_stored_total{type="turn_end"}"#).is_some_and(|v| v >= 1.0),
        "{metrics}"
    );
    assert!(metrics.contains("agenthold_commit_events_bucket"), "commit sizes");
    assert!(value(&metrics, "agenthold_harness_starts_total").is_some_and(|v| v >= 1.0), "{metrics}");
    assert!(metrics.contains("agenthold_turns_running"), "{metrics}");
    assert_eq!(value(&metrics, "agenthold_stream_watchers"), Some(1.0), "{metrics}");
    assert_eq!(value(&metrics, r#"agenthold_login_failures_total{reason="bad_credentials"}"#), Some(1.0));
    // The stream read the finished turn from Postgres (catch-up), nothing live yet.
    assert!(value(&metrics, r#"agenthold_stream_events_sent_total{phase="catch_up"}"#).is_some_and(|v| v >= 1.0));
    assert!(
        value(&metrics, r#"agenthold_turn_duration_seconds_count{stop_reason="end_turn"}"#) == Some(1.0),
        "{metrics}"
    );
    assert!(value(&metrics, "agenthold_sandbox_start_duration_seconds_count").is_some_and(|v| v >= 1.0), "{metrics}");
    assert_eq!(value(&metrics, "agenthold_sandboxes_awake"), Some(1.0), "{metrics}");
    assert_eq!(value(&metrics, r#"agenthold_tunnel_connections_total{kind="first"}"#), Some(1.0), "{metrics}");
    assert_eq!(value(&metrics, "agenthold_tunnels_open"), Some(1.0), "{metrics}");
    assert_eq!(value(&metrics, "agenthold_database_up"), Some(1.0), "{metrics}");

    // A live event.
    server.prompt(&session, "text again").await;
    watcher.until("turn_end", Duration::from_secs(60)).await;
    let metrics = scrape(port).await;
    assert!(value(&metrics, r#"agenthold_stream_events_sent_total{phase="live"}"#).is_some_and(|v| v >= 1.0));
    drop(watcher);
}
