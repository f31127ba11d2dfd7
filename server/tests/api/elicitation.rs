//! The harness's own questions (issue 10, part 4): agenthold advertises `elicitation.form`, and an
//! `elicitation/create` from the harness waits for a person like a permission question — in the
//! inbox (`kind: "elicitation"`), answerable with content checked against the requested schema,
//! with a reply posted to the session, or declined — whatever the agent's posture.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::{TestServer, of_type, texts};

const TURN: Duration = Duration::from_secs(120);

/// Waits for the session's `permission` event number `n` (from 1); returns its question id.
async fn question(server: &TestServer, session: &str, n: usize) -> (String, Value) {
    let started = Instant::now();
    loop {
        let events = server.events(session).await;
        if let Some(asked) = of_type(&events, "permission").get(n - 1) {
            let id = asked["payload"]["permission_id"].as_str().expect("permission_id").to_owned();
            return (id, asked["payload"].clone());
        }
        assert!(started.elapsed() < TURN, "no question: {events:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn the_harness_s_own_question_waits_for_a_person_and_takes_their_answer() {
    let server = TestServer::start().await;
    // Autonomous: the gate approves every call, but the agent's own question is for a person.
    let agent = server.create_agent(json!({})).await;
    let session = server.create_session(&agent).await;

    server.prompt(&session, "elicit Which release?\ntext after").await;
    let (id, asked) = question(&server, &session, 1).await;
    assert_eq!((asked["kind"].as_str(), asked["message"].as_str()), (Some("elicitation"), Some("Which release?")));
    assert_eq!(asked["requested_schema"]["required"], json!(["answer"]), "{asked}");
    let (_, inbox) = server.get("/api/v1/permissions?state=pending").await;
    let listed = &inbox["permissions"][0];
    assert_eq!((listed["id"].as_str(), listed["kind"].as_str()), (Some(id.as_str()), Some("elicitation")), "{inbox}");
    let answer = format!("/api/v1/permissions/{id}/answer");
    for bad in [
        json!({"content": {"nope": "x"}}),
        json!({"content": {}}),
        json!({"content": {"answer": 5}}),
        json!({"decision": "allow"}),
    ] {
        let (status, body) = server.post(&answer, bad.clone()).await;
        assert_eq!((status, body["error"]["code"].as_str()), (400, Some("INVALID_ANSWER")), "{bad}: {body}");
    }
    let (status, body) = server.post(&answer, json!({"content": {"answer": "Ventura"}})).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["outcome"]["action"], "accept", "{body}");
    let events = server.wait_turns(&session, 1, TURN).await;
    let said = texts(&events);
    assert!(said.iter().any(|t| t == "elicitation: accept Ventura"), "{said:?}");
    assert!(said.iter().any(|t| t == "after"), "{said:?}");
    let resolved = of_type(&events, "permission_resolved");
    assert_eq!(resolved[0]["payload"]["content"], json!({"answer": "Ventura"}));
    assert_eq!(server.post(&answer, json!({"text": "again"})).await.0, 409, "answered already");

    // A reply posted to the session answers it.
    server.prompt(&session, "elicit Codename?").await;
    question(&server, &session, 2).await;
    let (status, body) = server.post(&format!("/api/v1/sessions/{session}/prompt"), json!({"text": "Sonoma"})).await;
    assert_eq!((status, body["decision"].as_str()), (200, Some("reply")), "{body}");
    let events = server.wait_turns(&session, 2, TURN).await;
    assert!(texts(&events).iter().any(|t| t == "elicitation: accept Sonoma"), "{events:?}");

    // Declined.
    server.prompt(&session, "elicit Anything else?").await;
    let (id, _) = question(&server, &session, 3).await;
    let (status, body) = server.post(&format!("/api/v1/permissions/{id}/answer"), json!({"decision": "decline"})).await;
    assert_eq!(status, 200, "{body}");
    let events = server.wait_turns(&session, 3, TURN).await;
    assert!(texts(&events).iter().any(|t| t == "elicitation: decline"), "{events:?}");
}
