//! Asking a person (issue 10, parts 1, 4, 6): an agent with the `approval` posture holds the
//! harness's permission request as a question; it is listed in the approvals inbox; any operator
//! of the workspace answers it (a viewer or an outsider cannot), the first answer wins (409 after),
//! an option the harness did not offer is refused; the answer reaches the harness and the turn
//! goes on. A question survives a SIGKILL of the server (still pending afterwards; an answer given
//! after the restart reaches the harness, which waited in its sandbox); cancelling the turn answers
//! its questions `cancelled`. Postures are checked at the edge.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::secrets::{admin, call, make_user};
use crate::support::{TestServer, texts};

const TURN: Duration = Duration::from_secs(120);

/// Waits until the session has a `permission` event past `after` events; returns its question id.
async fn question(server: &TestServer, session: &str, after: usize) -> String {
    let started = Instant::now();
    loop {
        let events = server.events(session).await;
        if let Some(asked) = events.iter().skip(after).find(|e| e["type"] == "permission") {
            return asked["payload"]["permission_id"].as_str().expect("permission_id").to_owned();
        }
        assert!(started.elapsed() < TURN, "no permission question: {events:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn pending_ids(listed: &Value) -> Vec<String> {
    listed["permissions"]
        .as_array()
        .expect("permissions")
        .iter()
        .filter_map(|p| p["id"].as_str().map(str::to_owned))
        .collect()
}

#[tokio::test]
async fn a_question_waits_for_an_operator_and_the_first_answer_wins() {
    let server = TestServer::start().await;
    let viewer = make_user(&server, "pv").await;
    let operator = make_user(&server, "po").await;
    let outsider = make_user(&server, "px").await;
    let (_, team) = admin(&server, "POST", "/api/v1/workspaces", json!({"name": "approvals"})).await;
    let ws = team["id"].as_str().expect("id").to_owned();
    for (user, role) in [(&viewer, "viewer"), (&operator, "operator")] {
        let path = format!("/api/v1/workspaces/{ws}/members/{}", user.id);
        assert_eq!(admin(&server, "PUT", &path, json!({"role": role})).await.0, 204);
    }
    let agent = server.create_agent(json!({"workspace_id": ws, "posture": "ask"})).await;
    let (_, view) = server.get(&format!("/api/v1/agents/{agent}")).await;
    assert_eq!((view["posture"].as_str(), view["own_posture"].as_str()), (Some("approval"), Some("approval")));
    let session = server.create_session(&agent).await;
    // The operator's inbox, live: empty at first.
    let mut inbox_ws = server.websocket("/api/v1/permissions/stream", &operator.token).await;
    let first = inbox_ws.next(TURN).await.expect("the inbox's first message");
    assert_eq!((first["type"].as_str(), first["permissions"].as_array().map(Vec::len)), (Some("pending"), Some(0)));
    server.prompt(&session, "ask execute rm -rf build/").await;
    let id = question(&server, &session, 0).await;
    let pushed = inbox_ws.next(TURN).await.expect("the question pushed");
    assert_eq!(pending_ids(&pushed), std::slice::from_ref(&id), "{pushed}");

    // In the operator's inbox, not in the outsider's; the turn waits.
    let (status, inbox) = call(&server, "GET", "/api/v1/permissions?state=pending", &operator.token, json!({})).await;
    assert_eq!(status, 200, "{inbox}");
    assert_eq!(pending_ids(&inbox), std::slice::from_ref(&id));
    let (_, theirs) = call(&server, "GET", "/api/v1/permissions", &outsider.token, json!({})).await;
    assert!(pending_ids(&theirs).is_empty(), "{theirs}");
    assert!(server.events(&session).await.iter().all(|e| e["type"] != "turn_end"), "the turn ended unanswered");

    let answer = format!("/api/v1/permissions/{id}/answer");
    assert_eq!(call(&server, "POST", &answer, &viewer.token, json!({"decision": "allow"})).await.0, 403);
    assert_eq!(call(&server, "POST", &answer, &outsider.token, json!({"decision": "allow"})).await.0, 404);
    let bad = call(&server, "POST", &answer, &operator.token, json!({"option_id": "not-offered"})).await;
    assert_eq!((bad.0, bad.1["error"]["code"].as_str()), (400, Some("INVALID_OPTION")), "{}", bad.1);
    let bad = call(&server, "POST", &answer, &operator.token, json!({"decision": "maybe"})).await;
    assert_eq!((bad.0, bad.1["error"]["code"].as_str()), (400, Some("INVALID_ANSWER")), "{}", bad.1);
    let (status, answered) = call(&server, "POST", &answer, &operator.token, json!({"decision": "allow"})).await;
    assert_eq!(status, 200, "{answered}");
    assert_eq!(answered["outcome"]["optionId"], "allow-once");
    let again = call(&server, "POST", &answer, &operator.token, json!({"decision": "deny"})).await;
    assert_eq!((again.0, again.1["error"]["code"].as_str()), (409, Some("ALREADY_ANSWERED")), "{}", again.1);

    let emptied = inbox_ws.next(TURN).await.expect("the answer pushed");
    assert!(pending_ids(&emptied).is_empty(), "{emptied}");
    let events = server.wait_turns(&session, 1, TURN).await;
    assert!(texts(&events).iter().any(|t| t == "permission: allow-once"), "{events:?}");
    let resolved: Vec<&Value> = events.iter().filter(|e| e["type"] == "permission_resolved").collect();
    assert_eq!(resolved.len(), 1, "{events:?}");
    assert_eq!(resolved[0]["payload"]["by"]["user_id"], operator.id.as_str());
    assert_eq!(resolved[0]["payload"]["option_kind"], "allow_once");
    let (_, inbox) = call(&server, "GET", "/api/v1/permissions", &operator.token, json!({})).await;
    assert!(pending_ids(&inbox).is_empty(), "{inbox}");
}

#[tokio::test]
async fn a_question_survives_a_server_kill_and_its_answer_reaches_the_waiting_harness() {
    let mut server = TestServer::start().await;
    let agent = server.create_agent(json!({"posture": "approval"})).await;
    let session = server.create_session(&agent).await;
    server.prompt(&session, "ask edit src/main.rs").await;
    let id = question(&server, &session, 0).await;

    server.restart().await;
    let (status, inbox) = server.get("/api/v1/permissions?state=pending").await;
    assert_eq!(status, 200, "{inbox}");
    assert_eq!(pending_ids(&inbox), std::slice::from_ref(&id), "the question is still pending after the restart");
    // The answer is given after the restart, to the harness that kept waiting in its sandbox.
    let started = Instant::now();
    let (status, answered) = loop {
        let answer =
            admin(&server, "POST", &format!("/api/v1/permissions/{id}/answer"), json!({"decision": "deny"})).await;
        // The supervisor takes the question over once sandboxd has reconnected.
        if answer.0 != 409 || started.elapsed() > TURN {
            break answer;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(status, 200, "{answered}");
    let events = server.wait_turns(&session, 1, TURN).await;
    assert!(texts(&events).iter().any(|t| t == "permission: reject-once"), "{events:?}");
    let kinds: Vec<&str> = events.iter().filter_map(|e| e["type"].as_str()).collect();
    assert_eq!(kinds.iter().filter(|k| **k == "permission").count(), 1, "asked once: {kinds:?}");
    assert_eq!(kinds.iter().filter(|k| **k == "permission_resolved").count(), 1, "{kinds:?}");
}

#[tokio::test]
async fn cancelling_a_turn_answers_its_questions_cancelled() {
    let server = TestServer::start().await;
    let agent = server.create_agent(json!({"posture": "approval"})).await;
    let session = server.create_session(&agent).await;
    server.prompt(&session, "ask execute make deploy").await;
    let id = question(&server, &session, 0).await;
    assert_eq!(server.post(&format!("/api/v1/sessions/{session}/cancel"), json!({})).await.0, 202);
    let events = server.wait_turns(&session, 1, TURN).await;
    assert!(texts(&events).iter().any(|t| t == "permission: cancelled"), "{events:?}");
    let resolved = events.iter().find(|e| e["type"] == "permission_resolved").expect("resolved");
    assert_eq!(resolved["payload"]["by"], "cancel");
    let answer =
        admin(&server, "POST", &format!("/api/v1/permissions/{id}/answer"), json!({"decision": "allow"})).await;
    assert_eq!(answer.0, 409, "{}", answer.1);
}

#[tokio::test]
async fn postures_are_checked_and_autonomous_can_be_forbidden() {
    let server = TestServer::start_with(&[("AGENTHOLD_FORBID_AUTONOMOUS", "true")]).await;
    let refused =
        admin(&server, "POST", "/api/v1/agents", json!({"name": "p1", "harness": "fake", "posture": "yolo"})).await;
    assert_eq!((refused.0, refused.1["error"]["code"].as_str()), (400, Some("UNKNOWN_POSTURE")), "{}", refused.1);
    let refused =
        admin(&server, "POST", "/api/v1/agents", json!({"name": "p2", "harness": "fake", "posture": "auto-approve"}))
            .await;
    assert_eq!((refused.0, refused.1["error"]["code"].as_str()), (400, Some("AUTONOMOUS_FORBIDDEN")), "{}", refused.1);
    // No posture of its own: the default (autonomous) is forbidden, so its harness does not start.
    let agent = server.create_agent(json!({})).await;
    let (_, view) = server.get(&format!("/api/v1/agents/{agent}")).await;
    assert_eq!(view["posture"], "forbidden", "{view}");
    let session = server.create_session(&agent).await;
    server.prompt(&session, "text hi").await;
    let events = server.wait_turns(&session, 1, TURN).await;
    let error = events.iter().find(|e| e["type"] == "error").expect("an error");
    assert!(error["payload"]["message"].as_str().unwrap_or_default().contains("POSTURE_FORBIDDEN"), "{error}");
    // Given a posture, it runs; the change is audited.
    let patched = admin(&server, "PATCH", &format!("/api/v1/agents/{agent}"), json!({"posture": "approval"})).await;
    assert_eq!((patched.0, &patched.1["posture"]), (200, &json!("approval")), "{}", patched.1);
}

/// Runs `script` as a new turn of `session` (the `turns`-th) and returns its events.
async fn turn(server: &TestServer, session: &str, script: &str, turns: usize) -> Vec<Value> {
    server.prompt(session, script).await;
    let events = server.wait_turns(session, turns, TURN).await;
    let starts: Vec<usize> = events.iter().enumerate().filter(|(_, e)| e["type"] == "prompt").map(|(i, _)| i).collect();
    events[starts[turns - 1]..].to_vec()
}

#[tokio::test]
async fn a_guarded_agent_is_answered_by_its_policy_and_the_server_s_rules_bind_every_posture() {
    let dir = std::env::temp_dir().join(format!("agenthold-policy-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).expect("dir");
    let rules = dir.join("rules.json");
    std::fs::write(&rules, r#"{"rules": [{"effect": "network", "answer": "deny"}]}"#).expect("rules");
    let server = TestServer::start_with(&[("AGENTHOLD_POLICY_FILE", rules.to_str().expect("path"))]).await;

    // Bad policies are refused at the edge, naming the rule.
    let bad = json!({"name": "g0", "harness": "fake", "posture": "guarded",
        "policy": {"rules": [{"effect": "write", "answer": "allow"}, {"effect": "exec", "answer": "maybe"}], "default": "ask"}});
    let refused = admin(&server, "POST", "/api/v1/agents", bad).await;
    assert_eq!((refused.0, refused.1["error"]["code"].as_str()), (400, Some("INVALID_POLICY")), "{}", refused.1);
    assert!(refused.1["error"]["message"].as_str().unwrap_or_default().contains("rule 1"), "{}", refused.1);

    // Guarded without a policy: the harness does not start.
    let bare = server.create_agent(json!({"posture": "guarded"})).await;
    let bare_session = server.create_session(&bare).await;
    let events = turn(&server, &bare_session, "text hi", 1).await;
    let error = events.iter().find(|e| e["type"] == "error").expect("an error");
    assert!(error["payload"]["message"].as_str().unwrap_or_default().contains("POLICY_MISSING"), "{error}");

    let policy = json!({"rules": [{"effect": "write", "answer": "allow"}, {"effect": "exec", "answer": "deny"}],
        "default": "ask"});
    let agent = server.create_agent(json!({"posture": "guarded", "policy": policy})).await;
    let session = server.create_session(&agent).await;

    // A write: allowed by the agent's first rule.
    let events = turn(&server, &session, "ask edit src/lib.rs", 1).await;
    let applied = events.iter().find(|e| e["type"] == "policy_applied").expect("policy_applied before the turn");
    assert_eq!(applied["payload"]["posture"], "guarded");
    assert_eq!(applied["payload"]["rules"][0]["origin"], "server", "server rules first: {applied}");
    assert_eq!(applied["payload"]["default"], "ask");
    assert!(texts(&events).iter().any(|t| t == "permission: allow-once"), "{events:?}");
    let resolved = events.iter().find(|e| e["type"] == "permission_resolved").expect("resolved");
    assert_eq!(resolved["payload"]["by"], "policy:agent:0");

    // A command: denied by the agent's second rule, with a policy_denied event.
    let events = turn(&server, &session, "ask execute rm -rf /", 2).await;
    assert!(texts(&events).iter().any(|t| t == "permission: reject-once"), "{events:?}");
    let denied = events.iter().find(|e| e["type"] == "policy_denied").expect("policy_denied");
    assert_eq!(denied["payload"]["rule"]["index"], 1, "{denied}");
    assert_eq!(denied["payload"]["effect"], "exec", "{denied}");

    // A fetch: the server's rule denies it before the agent's default could ask.
    let events = turn(&server, &session, "ask fetch https://example.invalid/", 3).await;
    assert!(texts(&events).iter().any(|t| t == "permission: reject-once"), "{events:?}");
    let resolved = events.iter().find(|e| e["type"] == "permission_resolved").expect("resolved");
    assert_eq!(resolved["payload"]["by"], "policy:server:0");

    // Something no rule names: the default asks a person.
    let events_before = server.events(&session).await.len();
    server.prompt(&session, "ask other something").await;
    let id = question(&server, &session, events_before).await;
    let answered =
        admin(&server, "POST", &format!("/api/v1/permissions/{id}/answer"), json!({"decision": "allow"})).await;
    assert_eq!(answered.0, 200, "{}", answered.1);
    server.wait_turns(&session, 4, TURN).await;

    // The server's rule binds an autonomous agent too.
    let free = server.create_agent(json!({"posture": "autonomous"})).await;
    let free_session = server.create_session(&free).await;
    let events = turn(&server, &free_session, "ask fetch https://example.invalid/", 1).await;
    assert!(texts(&events).iter().any(|t| t == "permission: reject-once"), "{events:?}");
    let events = turn(&server, &free_session, "ask edit README.md", 2).await;
    assert!(texts(&events).iter().any(|t| t == "permission: allow-once"), "{events:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn a_reply_posted_while_a_question_waits_answers_it_and_only_a_clear_yes_approves() {
    let server = TestServer::start().await;
    let agent = server.create_agent(json!({"posture": "approval"})).await;
    let session = server.create_session(&agent).await;
    for (turns, reply, decision, option) in
        [(1, "Yes!", "allow", "permission: allow-once"), (2, "yes, but not in /etc", "deny", "permission: reject-once")]
    {
        let before = server.events(&session).await.len();
        server.prompt(&session, "ask execute make install").await;
        let id = question(&server, &session, before).await;
        let (status, answered) =
            server.post(&format!("/api/v1/sessions/{session}/prompt"), json!({"text": reply})).await;
        assert_eq!(status, 200, "{answered}");
        assert_eq!((answered["answered"].as_str(), answered["decision"].as_str()), (Some(id.as_str()), Some(decision)));
        let events = server.wait_turns(&session, turns, TURN).await;
        assert!(texts(&events).iter().any(|t| t == option), "{reply}: {events:?}");
        // The reply started no turn of its own.
        assert_eq!(events.iter().filter(|e| e["type"] == "prompt").count(), turns, "{events:?}");
    }
}

/// The `permission_resolved` events of a session.
fn resolved_events(events: &[Value]) -> Vec<&Value> {
    events.iter().filter(|e| e["type"] == "permission_resolved").collect()
}

#[tokio::test]
async fn always_stays_agenthold_s_a_session_grant_answers_the_same_call_until_revoked() {
    let server = TestServer::start().await;
    let viewer = make_user(&server, "gv").await;
    let (_, team) = admin(&server, "POST", "/api/v1/workspaces", json!({"name": "grants"})).await;
    let ws = team["id"].as_str().expect("id").to_owned();
    let path = format!("/api/v1/workspaces/{ws}/members/{}", viewer.id);
    assert_eq!(admin(&server, "PUT", &path, json!({"role": "viewer"})).await.0, 204);
    let agent = server.create_agent(json!({"workspace_id": ws, "posture": "approval"})).await;
    let (_, view) = server.get(&format!("/api/v1/agents/{agent}")).await;
    assert_eq!(view["permission_policy"], "approval", "the real posture: {view}");
    let session = server.create_session(&agent).await;
    let token = server.token.clone();
    let answer = |id: &str| format!("/api/v1/permissions/{id}/answer");

    // The harness's own "always" option, picked by id: the harness gets its one-time allow.
    server.prompt(&session, "ask execute make deploy").await;
    let id = question(&server, &session, 0).await;
    let (status, answered) = call(&server, "POST", &answer(&id), &token, json!({"option_id": "allow-always"})).await;
    assert_eq!((status, &answered["outcome"]["optionId"]), (200, &json!("allow-once")), "{answered}");
    let events = server.wait_turns(&session, 1, TURN).await;
    assert!(texts(&events).iter().any(|t| t == "permission: allow-once"), "{events:?}");
    let picked = resolved_events(&events)[0]["payload"].clone();
    assert_eq!(
        (picked["option_kind"].clone(), picked["picked"]["kind"].clone()),
        (json!("allow_once"), json!("allow_always"))
    );

    // So the same call asks again; this time "approve for this session".
    let seen = events.len();
    server.prompt(&session, "ask execute make deploy").await;
    let granted = question(&server, &session, seen).await;
    let (status, answered) =
        call(&server, "POST", &answer(&granted), &token, json!({"decision": "allow_for_session"})).await;
    assert_eq!((status, &answered["outcome"]["optionId"]), (200, &json!("allow-once")), "{answered}");
    let events = server.wait_turns(&session, 2, TURN).await;
    assert_eq!(resolved_events(&events).last().expect("resolved")["payload"]["scope"], "session");
    let grants = format!("/api/v1/sessions/{session}/grants");
    let (status, listed) = call(&server, "GET", &grants, &viewer.token, json!({})).await;
    assert_eq!(status, 200, "{listed}");
    let grant = &listed["grants"][0];
    assert_eq!(
        (grant["id"].as_str(), &grant["call"]["title"]),
        (Some(granted.as_str()), &json!("make deploy")),
        "{listed}"
    );
    assert_eq!(grant["revoked_at"], Value::Null);

    // The third time agenthold answers itself — once, naming the grant — and nobody is asked.
    let seen = events.len();
    server.prompt(&session, "ask execute make deploy").await;
    let events = server.wait_turns(&session, 3, TURN).await;
    let third = resolved_events(&events[seen..]);
    assert_eq!(third.len(), 1, "{events:?}");
    assert_eq!(third[0]["payload"]["by"], json!({"grant": granted, "scope": "session"}));
    assert_eq!(third[0]["payload"]["option_kind"], "allow_once");
    assert!(texts(&events[seen..]).iter().any(|t| t == "permission: allow-once"), "{events:?}");
    // Another call still asks (and is cancelled below).

    // Revoked by an operator (a viewer cannot): the same call asks again.
    let revoke = format!("{grants}/{granted}");
    assert_eq!(call(&server, "DELETE", &revoke, &viewer.token, json!({})).await.0, 403);
    assert_eq!(call(&server, "DELETE", &revoke, &token, json!({})).await.0, 204);
    assert_eq!(call(&server, "DELETE", &revoke, &token, json!({})).await.0, 204, "revoked already: done");
    let unknown = format!("{grants}/{}", uuid::Uuid::new_v4());
    assert_eq!(call(&server, "DELETE", &unknown, &token, json!({})).await.0, 404, "no such grant");
    let (_, listed) = call(&server, "GET", &grants, &token, json!({})).await;
    assert_eq!(listed["grants"], json!([]), "{listed}");
    let (_, all) = call(&server, "GET", &format!("{grants}?state=all"), &token, json!({})).await;
    assert!(all["grants"][0]["revoked_at"].is_string(), "{all}");
    let seen = server.events(&session).await.len();
    server.prompt(&session, "ask execute make deploy").await;
    let again = question(&server, &session, seen).await;
    assert_ne!(again, granted);
    let (_, audit) = call(&server, "GET", &format!("/api/v1/workspaces/{ws}/audit"), &token, json!({})).await;
    let actions: Vec<&str> =
        audit["records"].as_array().into_iter().flatten().filter_map(|r| r["action"].as_str()).collect();
    assert!(
        actions.contains(&"permission.granted_for_session") && actions.contains(&"permission.grant_revoked"),
        "{audit}"
    );
}

#[tokio::test]
async fn a_posture_change_decides_the_question_a_running_turn_waits_on() {
    let server = TestServer::start().await;
    let agent = server.create_agent(json!({"posture": "approval"})).await;
    let session = server.create_session(&agent).await;
    server.prompt(&session, "ask execute make deploy\nask execute make release").await;
    let first = question(&server, &session, 0).await;
    let (status, _) =
        admin(&server, "PATCH", &format!("/api/v1/agents/{agent}"), json!({"posture": "autonomous"})).await;
    assert_eq!(status, 200);
    // The waiting question is answered by the new posture, and the turn's next one at once.
    let events = server.wait_turns(&session, 1, TURN).await;
    let resolved = resolved_events(&events);
    assert_eq!(resolved.len(), 2, "{events:?}");
    assert_eq!(resolved[0]["payload"]["permission_id"], first.as_str());
    assert_eq!(
        (resolved[0]["payload"]["redecided"].clone(), resolved[0]["payload"]["by"].clone()),
        (json!(true), json!("auto"))
    );
    assert_eq!(resolved[1]["payload"]["by"], "auto");
    assert_eq!(texts(&events).iter().filter(|t| *t == "permission: allow-once").count(), 2, "{events:?}");
    // No restart: the harness that asked is the one that finished.
    assert!(events.iter().all(|e| e["payload"]["code"] != "CONTEXT_RESET"), "{events:?}");
}
