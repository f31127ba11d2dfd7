//! Schedules against the running server (docs/triggers.md): runs at the slots of a
//! seconds-granular expression with a short scheduler tick, skipped with a `notice` while the
//! previous run still goes, once (not once per missed slot) after a restart; paused and resumed;
//! a bad expression or zone refused naming it; who set one up is audited; each run's prompt
//! carries its origin.

use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use crate::openapi::check;
use crate::support::{TestServer, of_type};

const TICK: (&str, &str) = ("AGENTHOLD_SCHEDULER_TICK_MS", "100");

fn time(value: &Value) -> DateTime<Utc> {
    value.as_str().and_then(|t| DateTime::parse_from_rfc3339(t).ok()).map(|t| t.with_timezone(&Utc)).expect("a time")
}

async fn create_schedule(server: &TestServer, agent: &str, body: Value) -> Value {
    let (status, schedule) = server.post(&format!("/api/v1/agents/{agent}/schedules"), body).await;
    assert_eq!(status, 201, "{schedule}");
    schedule
}

async fn patch(server: &TestServer, path: &str, body: Value) -> (u16, Value) {
    let (status, _, body) = server.raw_with_headers("PATCH", path, Some(&server.token), &[], body).await;
    (status, body)
}

async fn runs(server: &TestServer, schedule: &str) -> Vec<Value> {
    let (status, body) = server.get(&format!("/api/v1/schedules/{schedule}/runs")).await;
    assert_eq!(status, 200, "{body}");
    let mut runs = body["runs"].as_array().cloned().unwrap_or_default();
    runs.reverse(); // oldest first
    runs
}

/// Waits until `check` holds for the schedule's runs.
async fn wait_runs(server: &TestServer, schedule: &str, what: &str, check: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let runs = runs(server, schedule).await;
        if check(&runs) {
            return runs;
        }
        assert!(Instant::now() < deadline, "waited for {what}; runs: {runs:#?}\nlog: {}", server.log());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn started(runs: &[Value]) -> Vec<&Value> {
    runs.iter().filter(|r| r["outcome"] == "started").collect()
}

#[tokio::test]
async fn a_schedule_runs_at_its_slots_in_new_sessions_with_its_origin_and_pauses() {
    let server = TestServer::start_with(&[TICK]).await;
    let agent = server.create_agent(json!({})).await;

    // Bad input names what is wrong.
    for (body, code, named) in [
        (json!({"name": "bad", "cron": "61 * * * *", "prompt": "x"}), "INVALID_CRON", "61 * * * *"),
        (
            json!({"name": "bad", "cron": "* * * * *", "time_zone": "Mars/Olympus", "prompt": "x"}),
            "INVALID_TIME_ZONE",
            "Mars/Olympus",
        ),
        (json!({"name": "bad", "cron": "0 0 30 2 *", "prompt": "x"}), "INVALID_CRON", "never due"),
        (json!({"name": "bad", "cron": "* * * * *", "prompt": " "}), "INVALID_PROMPT", "empty"),
    ] {
        let (status, error) = server.post(&format!("/api/v1/agents/{agent}/schedules"), body).await;
        assert_eq!((status, error["error"]["code"].as_str()), (400, Some(code)), "{error}");
        assert!(error["error"]["message"].as_str().is_some_and(|m| m.contains(named)), "{error}");
    }

    let schedule = create_schedule(
        &server,
        &agent,
        json!({"name": "every-2s", "cron": "*/2 * * * * *", "time_zone": "Europe/Berlin", "prompt": "text tick"}),
    )
    .await;
    let id = schedule["id"].as_str().expect("id").to_owned();
    assert_eq!(schedule["paused"], false);
    let first_due = time(&schedule["next_run_at"]);
    assert_eq!(first_due.timestamp() % 2, 0, "a slot of */2 seconds");

    let runs = wait_runs(&server, &id, "three started runs", |runs| started(runs).len() >= 3).await;
    let runs = started(&runs);
    for pair in runs.windows(2) {
        let (a, b) = (time(&pair[0]["due_at"]), time(&pair[1]["due_at"]));
        assert!(b > a && (b - a).num_seconds() % 2 == 0, "slots two seconds apart: {a} {b}");
    }
    let mut sessions = Vec::new();
    for run in &runs {
        let (due, ran) = (time(&run["due_at"]), time(&run["ran_at"]));
        assert_eq!(due.timestamp() % 2, 0, "{run}");
        assert!(ran >= due && (ran - due).num_milliseconds() < 2500, "ran on time: {run}");
        sessions.push(run["session_id"].as_str().expect("session").to_owned());
    }
    sessions.dedup();
    assert_eq!(sessions.len(), runs.len(), "a new session per run");

    // Each run's prompt says where it came from.
    let events = server.wait_turns(&sessions[0], 1, Duration::from_secs(90)).await;
    let prompt = &of_type(&events, "prompt")[0]["payload"];
    assert_eq!(prompt["origin"]["kind"], "schedule");
    assert_eq!(prompt["origin"]["id"], id.as_str());
    assert_eq!(prompt["origin"]["run_id"], runs[0]["id"]);
    assert_eq!(prompt["turn_id"], runs[0]["turn_id"]);
    assert!(events.iter().any(|e| e["payload"]["content"]["text"] == "tick"), "the harness ran the prompt");

    // Paused: no next run, and none made.
    let (status, paused) = patch(&server, &format!("/api/v1/schedules/{id}"), json!({"paused": true})).await;
    assert_eq!(status, 200, "{paused}");
    assert_eq!((paused["paused"].clone(), paused["next_run_at"].clone()), (json!(true), Value::Null));
    let count = self::runs(&server, &id).await.len();
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(self::runs(&server, &id).await.len(), count, "a paused schedule does not run");
    // Resumed: runs again, from the next slot after now.
    let resumed_at = Utc::now();
    let (status, resumed) = patch(&server, &format!("/api/v1/schedules/{id}"), json!({"paused": false})).await;
    assert_eq!(status, 200, "{resumed}");
    assert!(time(&resumed["next_run_at"]) > resumed_at);
    let after = wait_runs(&server, &id, "a run after resuming", |runs| runs.len() > count).await;
    assert!(time(&after[count]["due_at"]) > resumed_at, "what fell due while paused did not run");
    let (status, bad) = patch(&server, &format!("/api/v1/schedules/{id}"), json!({"time_zone": "Nowhere/Else"})).await;
    assert_eq!((status, bad["error"]["code"].as_str()), (400, Some("INVALID_TIME_ZONE")));

    let doc = agenthold_server::api::openapi::document();
    check(&doc, "post", "/api/v1/agents/{id}/schedules", 201, &schedule);
    check(&doc, "patch", "/api/v1/schedules/{id}", 200, &resumed);
    check(&doc, "patch", "/api/v1/schedules/{id}", 400, &bad);
    let (status, all_runs) = server.get(&format!("/api/v1/schedules/{id}/runs")).await;
    check(&doc, "get", "/api/v1/schedules/{id}/runs", status, &all_runs);
    // The list shows it with its last run; the audit log who set it up and changed it.
    let (status, list) = server.get(&format!("/api/v1/agents/{agent}/schedules")).await;
    check(&doc, "get", "/api/v1/agents/{id}/schedules", status, &list);
    assert_eq!(list["schedules"][0]["id"], id.as_str());
    assert!(list["schedules"][0]["last_run_at"].is_string());
    let (_, me) = server.get("/api/v1/me").await;
    let workspace = me["workspaces"][0]["workspace_id"].as_str().expect("workspace").to_owned();
    let (_, audit) = server.get(&format!("/api/v1/workspaces/{workspace}/audit")).await;
    let records = audit["records"].as_array().expect("records");
    for action in ["schedule.created", "schedule.paused", "schedule.resumed"] {
        let record = records.iter().find(|r| r["action"] == action).unwrap_or_else(|| panic!("{action}: {audit}"));
        assert_eq!(record["actor_user_id"], me["id"], "{record}");
        assert_eq!(record["resource_id"], id.as_str());
    }
    let (status, _) = server.delete(&format!("/api/v1/schedules/{id}")).await;
    assert_eq!(status, 204);
    assert_eq!(server.get(&format!("/api/v1/schedules/{id}")).await.0, 404);
}

#[tokio::test]
async fn a_run_that_finds_the_previous_one_going_is_skipped_with_a_notice() {
    let server = TestServer::start_with(&[TICK]).await;
    let agent = server.create_agent(json!({})).await;
    let schedule = create_schedule(
        &server,
        &agent,
        json!({"name": "slow", "cron": "* * * * * *", "prompt": "sleep 4000\ntext slow done"}),
    )
    .await;
    let id = schedule["id"].as_str().expect("id").to_owned();
    // The first run's turn takes seconds; the runs due meanwhile are skipped, then one starts again.
    let runs = wait_runs(&server, &id, "a second started run", |runs| started(runs).len() >= 2).await;
    let first = started(&runs)[0].clone();
    let second = started(&runs)[1].clone();
    let skipped: Vec<&Value> =
        runs.iter().filter(|r| r["outcome"] == "skipped" && time(&r["due_at"]) < time(&second["due_at"])).collect();
    assert!(skipped.len() >= 2, "runs skipped while the first went on: {runs:#?}");
    let session = first["session_id"].as_str().expect("session");
    for run in &skipped {
        assert_eq!(run["session_id"], session, "told in the running session");
        assert!(run["reason"].as_str().is_some_and(|r| r.contains("still going")), "{run}");
    }
    let events = server.wait_turns(session, 1, Duration::from_secs(60)).await;
    let notices: Vec<&Value> =
        of_type(&events, "notice").into_iter().filter(|e| e["payload"]["code"] == "SCHEDULE_SKIPPED").collect();
    assert!(notices.len() >= skipped.len(), "a notice per skipped run: {events:#?}");
    assert_eq!(of_type(&events, "prompt").len(), 1, "never stacked");
    let turn_end = time(&of_type(&events, "turn_end")[0]["created_at"]);
    assert!(time(&second["ran_at"]) >= turn_end, "the next run started once the first had ended");
    let (status, _) = patch(&server, &format!("/api/v1/schedules/{id}"), json!({"paused": true})).await;
    assert_eq!(status, 200);
}

#[tokio::test]
async fn slots_missed_while_the_server_was_down_run_once_after_a_restart() {
    let mut server = TestServer::start_with(&[TICK]).await;
    let agent = server.create_agent(json!({})).await;
    let schedule =
        create_schedule(&server, &agent, json!({"name": "steady", "cron": "*/2 * * * * *", "prompt": "text hi"})).await;
    let id = schedule["id"].as_str().expect("id").to_owned();
    wait_runs(&server, &id, "a first run", |runs| !started(runs).is_empty()).await;
    server.kill();
    let down_at = Utc::now();
    // Down for about four slots.
    tokio::time::sleep(Duration::from_secs(8)).await;
    let restarted_at = Utc::now();
    server.restart().await;
    let runs = wait_runs(&server, &id, "runs after the restart", |runs| {
        runs.iter().filter(|r| time(&r["ran_at"]) >= restarted_at).count() >= 2
    })
    .await;
    let (status, _) = patch(&server, &format!("/api/v1/schedules/{id}"), json!({"paused": true})).await;
    assert_eq!(status, 200);
    let missed: Vec<&Value> =
        runs.iter().filter(|r| time(&r["ran_at"]) >= restarted_at && time(&r["due_at"]) < restarted_at).collect();
    assert_eq!(missed.len(), 1, "the slots missed while down make one run: {runs:#?}");
    assert!(time(&missed[0]["due_at"]) >= down_at - chrono::Duration::seconds(2), "{missed:?}");
    // The runs after it are at slots after the restart.
    let later: Vec<&Value> = runs.iter().filter(|r| time(&r["ran_at"]) >= restarted_at).skip(1).collect();
    assert!(later.iter().all(|r| time(&r["due_at"]) >= restarted_at), "{later:#?}");
}

#[tokio::test]
async fn two_replicas_never_claim_the_same_due_schedule() {
    // The server's own scheduler looks once a minute: the test claims as two replicas would.
    let server = TestServer::start_with(&[("AGENTHOLD_SCHEDULER_TICK_MS", "60000")]).await;
    let agent = server.create_agent(json!({})).await;
    let schedule =
        create_schedule(&server, &agent, json!({"name": "nightly", "cron": "0 3 * * *", "prompt": "text hi"})).await;
    let id: uuid::Uuid = schedule["id"].as_str().and_then(|id| id.parse().ok()).expect("id");
    let pool = sqlx::PgPool::connect(&server.database_url).await.expect("connecting");
    sqlx::query("UPDATE schedules SET next_run_at = now() - interval '1 hour' WHERE id = $1")
        .bind(id)
        .execute(&pool)
        .await
        .expect("making it due");
    let (mut one, mut two) = (pool.begin().await.expect("tx"), pool.begin().await.expect("tx"));
    let now = Utc::now();
    let claimed = agenthold_server::store::schedules::claim_due(&mut one, now).await.expect("claim");
    assert_eq!(claimed.as_ref().map(|s| s.0.id), Some(id));
    let other = agenthold_server::store::schedules::claim_due(&mut two, now).await.expect("claim");
    assert!(other.is_none(), "a row another replica holds is skipped, not waited for nor run twice");
    // The first records its run and moves the schedule on in the same transaction…
    let run = agenthold_server::store::schedules::RunRow {
        id: uuid::Uuid::new_v4(),
        due_at: claimed.expect("claimed").0.next_run_at,
        ran_at: now,
        outcome: "skipped".to_owned(),
        reason: Some("test".to_owned()),
        session_id: None,
        turn_id: None,
    };
    let next = now + chrono::Duration::hours(1);
    agenthold_server::store::schedules::record_run(&mut one, id, &run, Some(next)).await.expect("record");
    one.commit().await.expect("commit");
    // …so once it commits, the slot is no longer due for anyone.
    let again = agenthold_server::store::schedules::claim_due(&mut two, Utc::now()).await.expect("claim");
    assert!(again.is_none(), "the slot ran once");
    two.rollback().await.expect("rollback");
    let runs = runs(&server, &id.to_string()).await;
    assert_eq!(runs.len(), 1, "{runs:#?}");
    pool.close().await;
}
