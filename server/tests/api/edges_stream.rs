//! Streams are bounded: a watcher that stops reading is closed after the send timeout (and
//! another watcher of the same session is not held up), and catching up on large events pages
//! by bytes without losing or repeating one.

use std::time::Duration;

use futures_util::StreamExt;
use serde_json::json;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

use crate::support::{TestServer, seqs};

/// Large events: 100 × 300 KB, 30 MB in all (more than socket buffers and one catch-up page).
const BIG_EVENTS: usize = 100;

#[tokio::test]
async fn a_watcher_that_stops_reading_is_closed_and_large_logs_catch_up_whole() {
    let server =
        TestServer::start_with(&[("AGENTHOLD_WS_SEND_TIMEOUT_SECS", "3"), ("AGENTHOLD_DRIVER", "local")]).await;
    let agent = server.create_agent(json!({})).await;
    let session = server.create_session(&agent).await;

    let url = format!("{}/api/v1/sessions/{session}/stream?after=0", server.url.replace("http://", "ws://"));
    let mut request = url.into_client_request().expect("request");
    request.headers_mut().insert("authorization", format!("Bearer {}", server.token).parse().expect("header"));
    let (mut stalled, _) = tokio_tungstenite::connect_async(request).await.expect("the stalled watcher");
    let mut reader = server.watch(&session, "0").await;

    let script = vec!["big 300000"; BIG_EVENTS].join("\n");
    server.prompt(&session, &script).await;
    let live = reader.until("turn_end", Duration::from_secs(60)).await;
    assert_eq!(live.iter().filter(|e| e["type"] == "update").count(), BIG_EVENTS, "the reading watcher got everything");

    // The one that never read is closed by the server.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let closed_as_slow = |log: String| {
        log.lines().any(|line| {
            line.contains("closing a WebSocket whose client did not read in time") && line.contains("stream")
        })
    };
    while !closed_as_slow(server.log()) {
        assert!(tokio::time::Instant::now() < deadline, "the stalled watcher was not closed; log: {}", server.log());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let drained = async {
        loop {
            match stalled.next().await {
                Some(Ok(Message::Close(frame))) => return frame.map(|f| u16::from(f.code)),
                Some(Ok(_)) => {}
                None | Some(Err(_)) => return None,
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(30), drained).await.expect("the stalled watcher's socket ends");

    // Catching up from the start (several byte-bounded pages) gives the whole log, in order.
    let mut late = server.watch(&session, "0").await;
    let caught_up = late.until("turn_end", Duration::from_secs(30)).await;
    assert_eq!(seqs(&caught_up), seqs(&live), "the same events, none lost or repeated");

    // The events route's pages are bounded by bytes too (4 MiB, the event that crosses it
    // included): ~300 kB events come 14 a page whatever the limit asked, and paging on with
    // next_after gives the whole log.
    let (mut after, mut paged, mut pages) = (0i64, Vec::new(), 0);
    loop {
        let (status, body) = server.get(&format!("/api/v1/sessions/{session}/events?after={after}&limit=1000")).await;
        assert_eq!(status, 200, "{body}");
        let events = body["events"].as_array().expect("events").clone();
        if events.is_empty() {
            break;
        }
        let payload_bytes: usize = events.iter().map(|e| e["payload"].to_string().len()).sum();
        let last_payload = events.last().map_or(0, |e| e["payload"].to_string().len());
        assert!(
            payload_bytes - last_payload < 4 << 20,
            "a page of {} events holds {payload_bytes} payload bytes: past the 4 MiB budget before its last event",
            events.len()
        );
        after = body["next_after"].as_i64().expect("next_after");
        paged.extend(events);
        pages += 1;
        assert!(pages < 100, "paging does not end");
    }
    assert!(pages >= 8, "{BIG_EVENTS} events of ~300 kB took only {pages} pages: the byte budget did not cut them");
    let paged = seqs(&paged);
    assert!(paged.iter().copied().eq(1..=paged.len() as i64), "paging gives every seq once, in order: {paged:?}");
    assert!(paged.starts_with(&seqs(&caught_up)), "paging gives the log the stream gave");
}

#[tokio::test]
async fn a_close_mid_flood_is_answered_at_once() {
    use futures_util::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::Message;
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    let server = TestServer::start().await;
    let agent = server.create_agent(serde_json::json!({})).await;
    let session = server.create_session(&agent).await;
    server.prompt(&session, "flood 20000 0").await;
    let url = format!("{}/api/v1/sessions/{session}/stream?after=0", server.url.replace("http://", "ws://"));
    let mut request = url.into_client_request().expect("request");
    request.headers_mut().insert("authorization", format!("Bearer {}", server.token).parse().expect("header"));
    let (mut socket, _) = tokio_tungstenite::connect_async(request).await.expect("the stream");
    let mut read = 0;
    while read < 200 {
        match tokio::time::timeout(std::time::Duration::from_secs(60), socket.next()).await {
            Ok(Some(Ok(Message::Text(_)))) => read += 1,
            Ok(Some(Ok(_))) => {}
            other => panic!("the flood stopped after {read} events: {other:?}"),
        }
    }
    let asked = std::time::Instant::now();
    let normal = tokio_tungstenite::tungstenite::protocol::CloseFrame {
        code: tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode::Normal,
        reason: "enough".into(),
    };
    socket.send(Message::Close(Some(normal))).await.expect("sending the close");
    // Events already in flight come first; the server's Close follows at once.
    let answered = loop {
        match tokio::time::timeout(std::time::Duration::from_secs(10), socket.next()).await {
            Ok(Some(Ok(Message::Close(frame)))) => break frame.map(|f| u16::from(f.code)),
            Ok(Some(Ok(_))) => {}
            other => panic!("no Close came back within 10 s: {other:?}"),
        }
    };
    let took = asked.elapsed();
    eprintln!("the server answered the client's Close mid-flood in {took:?}");
    assert_eq!(answered, Some(1000));
    assert!(took < std::time::Duration::from_secs(2), "answered in {took:?}");
}
