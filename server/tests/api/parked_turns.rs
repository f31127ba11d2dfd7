//! Questions that outlive their sandbox (issue 10, part 6): a turn whose container is killed
//! while a question of its waits for a person is parked, not failed — the question stays in the
//! inbox; the answer resumes the turn in a new harness (its session loaded again, a prompt telling
//! the answer), and the call the person approved, tried again, is allowed once under a one-shot
//! grant: nobody is asked twice. The same holds when the server was killed too and finds the
//! harness gone after its restart. (fakeagent resumes like a model would: it runs the rest of
//! the script it was interrupted in, asking for the same call again.)

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::skip::skip_unless_docker;
use crate::support::{TestServer, of_type, texts};

const TURN: Duration = Duration::from_secs(120);

async fn wait_for(server: &TestServer, session: &str, what: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    let started = Instant::now();
    loop {
        let events = server.events(session).await;
        if what(&events) {
            return events;
        }
        assert!(started.elapsed() < TURN, "waited too long: {events:#?}\n{}", server.log());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn notice(events: &[Value], code: &str) -> bool {
    of_type(events, "notice").iter().any(|n| n["payload"]["code"] == code)
}

fn kill_container(server: &TestServer, agent: &str) {
    let status = std::process::Command::new("docker").args(["kill", &server.container(agent)]).status();
    assert!(status.expect("docker kill").success());
}

/// Asks for a deploy and waits for the question; returns its id.
async fn ask(server: &TestServer, session: &str) -> String {
    server.prompt(session, "text before\nask execute make deploy\ntext deployed").await;
    let events = wait_for(server, session, |e| !of_type(e, "permission").is_empty()).await;
    of_type(&events, "permission")[0]["payload"]["permission_id"].as_str().expect("id").to_owned()
}

/// Answers `allow` (retrying while the server is still taking the agent over) and checks the
/// turn resumes and ends, the call allowed once by the grant.
async fn answer_and_check_resumed(server: &TestServer, session: &str, id: &str) {
    let (_, inbox) = server.get("/api/v1/permissions?state=pending").await;
    assert!(inbox["permissions"].as_array().is_some_and(|p| p.iter().any(|q| q["id"] == id)), "{inbox}");
    let started = Instant::now();
    let (status, body) = loop {
        let answer = server.post(&format!("/api/v1/permissions/{id}/answer"), json!({"decision": "allow"})).await;
        if answer.0 != 409 || started.elapsed() > TURN {
            break answer;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(status, 200, "{body}");
    let events = server.wait_turns(session, 1, TURN).await;
    assert!(notice(&events, "TURN_RESUMED"), "{events:#?}");
    let end = &of_type(&events, "turn_end")[0]["payload"];
    assert_eq!(end["stop_reason"], "end_turn", "{events:#?}");
    let said = texts(&events);
    assert!(said.iter().any(|t| t == "fakeagent: resuming"), "{said:?}");
    assert!(said.iter().any(|t| t == "deployed"), "{said:?}");
    // Asked twice by the harness, answered once by a person: the second by the grant.
    let asked = of_type(&events, "permission");
    assert_eq!(asked.len(), 2, "{events:#?}");
    let resolved = of_type(&events, "permission_resolved");
    assert_eq!(resolved.len(), 2, "{resolved:#?}");
    assert_eq!(resolved[0]["payload"]["parked"], true);
    assert_eq!(resolved[1]["payload"]["by"]["grant"], json!(id), "{resolved:#?}");
    let (_, inbox) = server.get("/api/v1/permissions?state=pending").await;
    assert_eq!(inbox["permissions"].as_array().map(Vec::len), Some(0), "{inbox}");
}

#[tokio::test]
async fn a_turn_whose_sandbox_dies_while_a_question_waits_is_parked_and_resumed_by_the_answer() {
    if skip_unless_docker("it kills the sandbox's container") {
        return;
    }
    let server = TestServer::start().await;
    let agent = server.create_agent(json!({"posture": "approval"})).await;
    let session = server.create_session(&agent).await;
    let id = ask(&server, &session).await;
    kill_container(&server, &agent);
    let events = wait_for(&server, &session, |e| notice(e, "TURN_PARKED")).await;
    assert!(of_type(&events, "turn_end").is_empty(), "parked, not ended: {events:#?}");
    answer_and_check_resumed(&server, &session, &id).await;
}

#[tokio::test]
async fn a_turn_whose_sandbox_died_while_the_server_was_down_is_parked_after_the_restart() {
    if skip_unless_docker("it kills the sandbox's container") {
        return;
    }
    let mut server = TestServer::start().await;
    let agent = server.create_agent(json!({"posture": "approval"})).await;
    let session = server.create_session(&agent).await;
    let id = ask(&server, &session).await;
    server.kill();
    kill_container(&server, &agent);
    server.restart().await;
    let events = wait_for(&server, &session, |e| notice(e, "TURN_PARKED")).await;
    assert!(of_type(&events, "turn_end").is_empty(), "parked, not ended: {events:#?}");
    answer_and_check_resumed(&server, &session, &id).await;
}
