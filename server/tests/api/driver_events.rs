//! Event-log fidelity through the real harness, appender and store: a payload with U+0000 is
//! stored with U+2400 in its place and kept exactly in the side table; an oversized update keeps
//! its structure, with its large field cut to a head and a tail; an update Postgres refuses as it
//! came is stored as its text, with the lines of its frame around it.

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::TestServer;

const TURN: Duration = Duration::from_secs(90);

#[tokio::test]
async fn an_update_with_nul_is_stored_with_a_symbol_and_kept_exactly() {
    let server = TestServer::start().await;
    let agent = server.create_agent(json!({})).await;
    let session = server.create_session(&agent).await;
    // The command's output holds a NUL byte: `x`, U+0000, `y`.
    server.prompt(&session, "run printf 'x\\000y'\ntext after the binary output").await;
    let events = server.wait_turns(&session, 1, TURN).await;
    let turn_end = events.iter().find(|e| e["type"] == "turn_end").expect("turn_end");
    assert_eq!(turn_end["payload"]["stop_reason"], "end_turn", "{events:?}");
    let event = events.iter().find(|e| e["payload"]["nul_replaced"] == true).expect("an event marked nul_replaced");
    assert_eq!(crate::support::texts(&events).concat(), "after the binary output", "the next message is there too");
    assert_eq!(event["payload"]["sessionUpdate"], "tool_call_update");
    assert_eq!(event["payload"]["content"][0]["content"]["text"], "x\u{2400}y");
    assert!(event["payload"].get("truncated").is_none());

    let link = event["payload"]["full_payload"].as_str().expect("a link to the exact payload");
    let (status, exact) = server.get(link).await;
    assert_eq!(status, 200);
    assert_eq!(exact["content"][0]["content"]["text"], "x\u{0}y");
    assert!(exact.get("nul_replaced").is_none(), "the exact payload is the harness's own: {exact}");

    // The stream sends the same stored event.
    let mut watcher = server.watch(&session, "0").await;
    let streamed = watcher.until("turn_end", Duration::from_secs(10)).await;
    assert!(streamed.iter().any(|e| e["seq"] == event["seq"] && e["payload"] == event["payload"]));
}

/// A frame of three updates whose middle one Postgres's `jsonb` refuses as it came (a lone
/// surrogate escape): the three share one persist, the statement that stores text as it came is
/// refused, and the batch is stored as values — the middle one as the string `serde_json` reads
/// it as, as the transaction path always stored it. Nothing is lost or stored twice.
#[tokio::test]
async fn an_update_postgres_refuses_as_it_came_is_stored_as_its_text_with_its_frame() {
    let server = TestServer::start().await;
    let agent = server.create_agent(json!({})).await;
    let session = server.create_session(&agent).await;
    server.prompt(&session, "unstorable\ntext still alive").await;
    let events = server.wait_turns(&session, 1, TURN).await;
    let turn_end = events.iter().find(|e| e["type"] == "turn_end").expect("turn_end");
    assert_eq!(turn_end["payload"]["stop_reason"], "end_turn", "{events:?}");
    let shapes: Vec<String> = events
        .iter()
        .filter(|e| e["type"] == "update" || e["type"] == "error")
        .map(|e| match (e["type"].as_str(), &e["payload"]) {
            (Some("error"), payload) => format!("error {}", payload["code"].as_str().unwrap_or_default()),
            (_, Value::String(text)) => format!("as text: {text}"),
            (_, payload) => payload["content"]["text"].as_str().unwrap_or_default().to_owned(),
        })
        .collect();
    let refused = r#"{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"\ud800"}}"#;
    assert_eq!(
        shapes,
        [
            "before the unstorable line".to_owned(),
            format!("as text: {refused}"),
            "after the unstorable line".to_owned(),
            "still alive".to_owned()
        ],
        "{events:?}"
    );
    let seqs: Vec<i64> = events.iter().filter_map(|e| e["seq"].as_i64()).collect();
    assert!(seqs.windows(2).all(|w| w[1] == w[0] + 1), "gapless, none twice: {seqs:?}");
    // The stream sends the same.
    let mut watcher = server.watch(&session, "0").await;
    let streamed = watcher.until("turn_end", Duration::from_secs(10)).await;
    assert_eq!(streamed.iter().filter(|e| e["payload"] == Value::String(refused.to_owned())).count(), 1);
}

#[tokio::test]
async fn an_oversized_update_keeps_its_structure() {
    let server = TestServer::start().await;
    let agent = server.create_agent(json!({})).await;
    let session = server.create_session(&agent).await;
    server.prompt(&session, "big 400000").await;
    let events = server.wait_turns(&session, 1, TURN).await;
    let big = events.iter().find(|e| e["payload"]["truncated"] == true).expect("a truncated event");
    let payload = &big["payload"];
    assert_eq!(payload["sessionUpdate"], "agent_message_chunk");
    assert_eq!(payload["content"]["type"], "text", "the structure is kept");
    assert_eq!(payload["truncated_fields"], json!(["content.text"]));
    let text = payload["content"]["text"].as_str().expect("the cut text");
    assert!(text.len() < 8 * 1024, "cut to a head and a tail: {} bytes", text.len());
    assert!(text.contains("…[truncated "), "{}", &text[..200.min(text.len())]);
    let (status, full) = server.get(payload["full_payload"].as_str().expect("link")).await;
    assert_eq!(status, 200);
    let whole = full["content"]["text"].as_str().expect("whole text");
    assert_eq!(whole.len(), 400_000);
    assert!(whole.starts_with(text.split("…[truncated ").next().unwrap_or_default()));
    assert_eq!(payload["full_size_bytes"].as_u64(), Some(serde_json::to_string(&full).expect("json").len() as u64));
}
