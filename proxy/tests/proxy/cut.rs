//! A response its upstream cuts short (declared 1000 bytes, sent 100, then closed): the client's
//! body fails, and the proxy logs it, counts it (`GET /metrics`) and reports it for the sandbox
//! in `proxy-report.json` beside its configuration, where agenthold's server reads it.

use agenthold_proxy::cut::{EndedBy, REPORT_FILE, Report};
use http_body_util::BodyExt;
use serde_json::json;
use tokio::io::AsyncWriteExt;

use crate::support::*;

#[tokio::test]
async fn a_response_cut_short_by_its_upstream_is_counted_and_reported_for_its_sandbox() {
    let setup = Setup::new();
    let si = StandIn::https(&setup.root, &["api.anthropic.com"]).await;
    let config = json!({
        "ca": setup.ca(),
        "sandboxes": [sandbox_a(&[])],
        "upstream_overrides": { "api.anthropic.com:443": setup.over(&si) }
    });
    let proxy = TestProxy::start(setup, &config).await;
    let report_path = proxy.config_path.with_file_name(REPORT_FILE);
    assert!(!report_path.exists());

    // A whole response first: nothing is reported.
    let mut client = intercepted(&proxy, "api.anthropic.com:443", "api.anthropic.com", (A_USER, A_PASS)).await;
    assert_eq!(
        send(&mut client, get("api.anthropic.com", "/v1/messages", &[("x-api-key", A_PLACEHOLDER)])).await.status,
        200
    );

    let mut client = intercepted(&proxy, "api.anthropic.com:443", "api.anthropic.com", (A_USER, A_PASS)).await;
    let request = get("api.anthropic.com", "/v1/cut", &[("x-api-key", A_PLACEHOLDER)]);
    let response = tokio::time::timeout(DEADLINE, client.send_request(request)).await.expect("in time").expect("head");
    assert_eq!(response.status(), 200);
    let body = tokio::time::timeout(DEADLINE, response.into_body().collect()).await.expect("in time");
    assert!(body.is_err(), "the client sees the response end early");
    assert_eq!(si.requests().last().and_then(|r| r.one("x-api-key")).as_deref(), Some(A_SECRET));

    let mut report = None;
    eventually("the cut to be reported", || {
        let found = Report::read(&report_path);
        let done = found.is_some();
        report = found;
        async move { done }
    })
    .await;
    let report = report.expect("report");
    let cuts = &report.cut_short["sandbox-a"];
    assert_eq!(cuts.count, 1, "{report:?}");
    let cut = &cuts.last;
    assert_eq!((cut.host.as_str(), cut.path.as_str(), cut.status), ("api.anthropic.com", "/v1/cut", 200));
    assert_eq!((cut.bytes_sent, cut.declared_bytes, cut.ended_by), (100, Some(1000), EndedBy::Upstream), "{cut:?}");
    assert!(cut.reason.contains("closed the connection before the response ended"), "{}", cut.reason);
    let text = std::fs::read_to_string(&report_path).expect("report");
    assert!(!text.contains(A_SECRET) && !text.contains(A_PLACEHOLDER), "{text}");

    // The count, at `GET /metrics`.
    let mut stream = tokio::net::TcpStream::connect(proxy.addr).await.expect("connect");
    stream.write_all(b"GET /metrics HTTP/1.1\r\nhost: proxy\r\n\r\n").await.expect("write");
    let (status, _, body) = read_response(&mut stream).await;
    assert_eq!(status, 200);
    assert!(body.contains("agenthold_proxy_responses_cut_short_total{ended_by=\"upstream\"} 1\n"), "{body}");
    proxy.stop().await;
}
