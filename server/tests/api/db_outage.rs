//! Postgres outages in the middle of a turn (docs/operations.md, "Postgres outages"): nothing is
//! lost or repeated (sandboxd keeps what was not acknowledged and sends it again), API calls answer
//! `503 DATABASE_UNAVAILABLE` within 2 s instead of waiting, `/readyz` says 503, and an open
//! stream stays open and goes on where it was once Postgres is back.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::{TestServer, assert_gap_free, of_type, seqs};

async fn outage_mid_turn(outage: Duration, chunks: usize, rate: usize) {
    let (server, gate) = TestServer::start_behind_gate(&[]).await;
    let agent = server.create_agent(json!({})).await;
    let session = server.create_session(&agent).await;
    server.prompt(&session, &format!("flood {chunks} {rate}\ntext done")).await;

    let mut watcher = server.watch(&session, "0").await;
    let mut seen: Vec<Value> = Vec::new();
    while seen.len() < 200 {
        seen.push(watcher.next(Duration::from_secs(60)).await.expect("events before the outage"));
    }

    gate.shut();
    // A call right as the outage begins answers within 2 s (once the server notices: the pool
    // alone would wait 10 s for a connection)…
    let started = Instant::now();
    let (status, body) = server.get("/api/v1/agents").await;
    let took = started.elapsed();
    assert_eq!((status, body["error"]["code"].as_str()), (503, Some("DATABASE_UNAVAILABLE")), "{body}");
    assert!(took < Duration::from_secs(2), "the first call during the outage took {took:?}");
    // …and once the server noticed, at once; readiness says so too.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let started = Instant::now();
    let (status, body) = server.get(&format!("/api/v1/sessions/{session}/events?after=0")).await;
    assert_eq!((status, body["error"]["code"].as_str()), (503, Some("DATABASE_UNAVAILABLE")), "{body}");
    assert!(
        started.elapsed() < Duration::from_millis(500),
        "a call once the outage is known took {:?}",
        started.elapsed()
    );
    assert_eq!(server.get("/readyz").await.0, 503);
    assert_eq!(server.get("/healthz").await.0, 200);

    // The stream stays open through the outage (it may deliver what was stored before it).
    let deadline = Instant::now() + outage.saturating_sub(Duration::from_millis(1500));
    while Instant::now() < deadline {
        let wait = deadline.saturating_duration_since(Instant::now()).min(Duration::from_secs(5));
        if let Some(event) = watcher.next(wait).await {
            seen.push(event);
        }
    }
    gate.open().await;

    // The same stream goes on to the end of the turn, without a gap or a repeat.
    seen.extend(watcher.until("turn_end", Duration::from_secs(120)).await);
    assert_gap_free(&seen);
    // The server notices the database is back within a fraction of a second.
    let back = Instant::now() + Duration::from_secs(2);
    while server.get("/api/v1/agents").await.0 != 200 {
        assert!(Instant::now() < back, "API calls still fail 2 s after the stream went on");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let events = server.wait_turns(&session, 1, Duration::from_secs(120)).await;
    assert_eq!(seqs(&seen), seqs(&events), "the stream saw exactly the log");
    assert_gap_free(&events);
    let indices: Vec<i64> = events.iter().filter_map(|e| e["payload"]["_meta"]["fakeagent"]["i"].as_i64()).collect();
    let missing: Vec<i64> = (1..=chunks as i64).filter(|i| !indices.contains(i)).collect();
    let repeated: Vec<&i64> =
        indices.iter().enumerate().filter(|(n, i)| indices[..*n].contains(i)).map(|(_, i)| i).collect();
    assert!(
        indices == (1..=chunks as i64).collect::<Vec<i64>>(),
        "every chunk exactly once, in order: {} stored, missing {missing:?}, repeated {repeated:?}; other events: {:?}",
        indices.len(),
        events.iter().filter(|e| e["payload"]["_meta"]["fakeagent"]["i"].is_null()).collect::<Vec<_>>()
    );
    assert_eq!(of_type(&events, "turn_end").len(), 1);
    assert_eq!(events.last().map(|e| e["payload"]["stop_reason"].clone()), Some(json!("end_turn")));
    assert!(of_type(&events, "error").is_empty(), "{:?}", of_type(&events, "error"));
    assert_eq!(server.get("/readyz").await.0, 200);

    // The agent keeps working.
    server.prompt(&session, "text after the outage").await;
    let events = server.wait_turns(&session, 2, Duration::from_secs(60)).await;
    assert_gap_free(&events);
}

#[tokio::test]
async fn a_three_second_outage_mid_turn_loses_and_repeats_nothing() {
    outage_mid_turn(Duration::from_secs(3), 3000, 500).await;
}

#[tokio::test]
async fn a_sixty_second_outage_mid_turn_loses_and_repeats_nothing() {
    outage_mid_turn(Duration::from_secs(60), 3000, 100).await;
}
