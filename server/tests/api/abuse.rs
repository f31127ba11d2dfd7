//! Slow clients hold connections, not capacity (issue 29, part 3): clients that send the head of
//! a request and then nothing never take a request slot, so a signed-in caller is answered at
//! once while they wait, and each is closed with `408 BODY_READ_TIMEOUT` after the body-read
//! deadline. (The other abuse probes: `limits.rs` — ceilings; `quotas.rs`; `turn_limits.rs` —
//! fair slots; `edges_stream.rs`/`edges_terminal.rs` — a Close answered mid-flood; the proxy's
//! own suite — its edges; `driver_disk.rs` — disk.)

use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::support::TestServer;

/// More half-sent requests than the server has slots.
const TRICKLERS: usize = 300;

#[tokio::test]
async fn clients_that_send_a_head_and_no_body_take_no_slot_and_are_closed_after_the_deadline() {
    let server = TestServer::start_with(&[
        ("AGENTHOLD_MAX_CONCURRENT_REQUESTS", "64"),
        ("AGENTHOLD_MAX_ANONYMOUS_REQUESTS", "16"),
        ("AGENTHOLD_BODY_READ_SECS", "2"),
    ])
    .await;
    let address = format!("127.0.0.1:{}", server.api_port());
    let head = "POST /api/v1/auth/login HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n\
                Content-Length: 200\r\n\r\n{\"username\":";
    let mut tricklers = Vec::with_capacity(TRICKLERS);
    for _ in 0..TRICKLERS {
        let mut stream = TcpStream::connect(&address).await.expect("connecting");
        stream.write_all(head.as_bytes()).await.expect("the head");
        tricklers.push(stream);
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    // A signed-in caller is answered at once.
    let asked = Instant::now();
    let (status, me) = server.get("/api/v1/me").await;
    let took = asked.elapsed();
    assert_eq!(status, 200, "{me}");
    assert!(took < Duration::from_secs(1), "answered in {took:?}");
    // An anonymous one too: no slot is held by the half-sent bodies.
    assert_eq!(server.anonymous("GET", "/api/v1/me").await, 401);

    // Each half-sent request is answered 408 and its connection closed, after ~2 s.
    let started = Instant::now();
    for (index, stream) in tricklers.iter_mut().enumerate().step_by(37) {
        let mut answer = Vec::new();
        let read = tokio::time::timeout(Duration::from_secs(15), stream.read_to_end(&mut answer)).await;
        assert!(read.is_ok(), "connection {index} was not closed within 15 s");
        let text = String::from_utf8_lossy(&answer);
        assert!(text.starts_with("HTTP/1.1 408"), "connection {index}: {text}");
        assert!(text.contains("BODY_READ_TIMEOUT"), "connection {index}: {text}");
    }
    assert!(started.elapsed() < Duration::from_secs(10), "closed in {:?}", started.elapsed());
}

#[tokio::test]
async fn a_body_that_arrives_slowly_within_its_deadline_is_served() {
    let server = TestServer::start_with(&[("AGENTHOLD_BODY_READ_SECS", "3")]).await;
    let body = format!("{{\"name\": \"{}\"}}", "slow-but-fine");
    let head = format!(
        "POST /api/v1/tokens HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        server.token,
        body.len()
    );
    let mut stream = TcpStream::connect(format!("127.0.0.1:{}", server.api_port())).await.expect("connecting");
    stream.write_all(head.as_bytes()).await.expect("the head");
    for chunk in body.as_bytes().chunks(4) {
        tokio::time::sleep(Duration::from_millis(100)).await;
        stream.write_all(chunk).await.expect("a piece of the body");
    }
    let mut answer = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut answer))
        .await
        .expect("answered")
        .expect("read");
    let text = String::from_utf8_lossy(&answer);
    assert!(text.starts_with("HTTP/1.1 201"), "{text}");
}
