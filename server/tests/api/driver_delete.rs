//! Deleting an agent leaves nothing behind, also while prompts arrive: the agent is marked as
//! being deleted before anything is torn down (a prompt meanwhile gets 404/409 and the
//! supervisor creates nothing), a deletion left halfway is finished by a retried `DELETE` or at
//! the next server start, and no container, volume or network labelled for the agent remains.

use std::time::{Duration, Instant};

use serde_json::json;
use sqlx::Connection;

use crate::support::TestServer;
use crate::support::docker::{labelled, wait_for};
use crate::support::skip::skip_unless_docker;

const TURN: Duration = Duration::from_secs(90);

/// Asserts that nothing labelled for `agent` exists now and for `window` after (a supervisor
/// that wakes the sandbox after the delete would make it appear).
async fn nothing_left_for(agent: &str, window: Duration) {
    let label = format!("agenthold.agent={agent}");
    let until = Instant::now() + window;
    while Instant::now() < until {
        let left = labelled(&label);
        assert!(left.is_empty(), "left behind for agent {agent}: {left:?}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

async fn agent_rows(server: &TestServer, agent: &str) -> i64 {
    let mut db = sqlx::PgConnection::connect(&server.database_url).await.expect("connecting");
    let id: uuid::Uuid = agent.parse().expect("uuid");
    sqlx::query_scalar::<_, i64>("SELECT count(*) FROM agents WHERE id = $1")
        .bind(id)
        .fetch_one(&mut db)
        .await
        .expect("counting")
}

/// What a server that died right after marking the agent would leave.
async fn mark_deleting(server: &TestServer, agent: &str) {
    let mut db = sqlx::PgConnection::connect(&server.database_url).await.expect("connecting");
    let id: uuid::Uuid = agent.parse().expect("uuid");
    let done = sqlx::query("UPDATE agents SET deleting_at = now() WHERE id = $1")
        .bind(id)
        .execute(&mut db)
        .await
        .expect("marking");
    assert_eq!(done.rows_affected(), 1);
}

#[tokio::test]
async fn deleting_an_agent_while_prompts_arrive_leaves_nothing_behind() {
    if skip_unless_docker("no container, volume or network may be left") {
        return;
    }
    let server = TestServer::start().await;
    for round in 0..4 {
        let agent = server.create_agent(json!({})).await;
        let sessions = [server.create_session(&agent).await, server.create_session(&agent).await];
        if round % 2 == 1 {
            // The sandbox exists and runs; otherwise the prompts below race its creation.
            server.prompt(&sessions[0], "text warm").await;
            server.wait_turns(&sessions[0], 1, TURN).await;
        }
        let server = &server;
        let prompt = |session: &str| {
            let path = format!("/api/v1/sessions/{session}/prompt");
            async move { server.post(&path, json!({"text": "sleep 200\ntext hi"})).await }
        };
        let delete_path = format!("/api/v1/agents/{agent}");
        // Prompts before, beside and after the delete in one poll order, so some reach the
        // server while the delete is under way.
        let (first, (deleted, _), second, third) =
            tokio::join!(prompt(&sessions[0]), server.delete(&delete_path), prompt(&sessions[1]), prompt(&sessions[0]));
        assert_eq!(deleted, 204, "round {round}: the delete succeeds");
        for (status, body) in [first, second, third] {
            assert!(matches!(status, 202 | 404 | 409), "round {round}: a prompt got {status}: {body}");
        }
        let (status, _) = prompt(&sessions[1]).await;
        assert_eq!(status, 404, "round {round}: a prompt after the delete");
        nothing_left_for(&agent, Duration::from_secs(3)).await;
        assert_eq!(agent_rows(server, &agent).await, 0);
    }
}

#[tokio::test]
async fn an_agent_being_deleted_is_gone_and_a_retried_delete_finishes_it() {
    let server = TestServer::start().await;
    let agent = server.create_agent(json!({})).await;
    let session = server.create_session(&agent).await;
    server.prompt(&session, "text hi").await;
    server.wait_turns(&session, 1, TURN).await;
    mark_deleting(&server, &agent).await;

    assert_eq!(server.get(&format!("/api/v1/agents/{agent}")).await.0, 404);
    let (_, list) = server.get("/api/v1/agents").await;
    assert!(list["agents"].as_array().is_some_and(|a| a.iter().all(|a| a["id"] != agent.as_str())), "{list}");
    let (status, _) = server.post(&format!("/api/v1/sessions/{session}/prompt"), json!({"text": "text again"})).await;
    assert_eq!(status, 404, "a prompt to an agent being deleted");
    assert_eq!(server.post(&format!("/api/v1/agents/{agent}/wake"), json!({})).await.0, 404);

    let (status, _) = server.delete(&format!("/api/v1/agents/{agent}")).await;
    assert_eq!(status, 204, "the retried delete finishes the deletion");
    assert_eq!(agent_rows(&server, &agent).await, 0);
    if crate::support::driver() == "docker" {
        nothing_left_for(&agent, Duration::from_secs(1)).await;
    }
}

#[tokio::test]
async fn a_deletion_left_halfway_is_finished_at_the_next_start() {
    let mut server = TestServer::start().await;
    let agent = server.create_agent(json!({})).await;
    let session = server.create_session(&agent).await;
    server.prompt(&session, "text hi").await;
    server.wait_turns(&session, 1, TURN).await;
    if crate::support::driver() == "docker" {
        assert!(!labelled(&format!("agenthold.agent={agent}")).is_empty(), "the sandbox exists");
    }
    mark_deleting(&server, &agent).await;
    server.restart().await;

    wait_for(Duration::from_secs(30), "the deletion to be finished at start", || async {
        (agent_rows(&server, &agent).await == 0).then_some(())
    })
    .await;
    if crate::support::driver() == "docker" {
        nothing_left_for(&agent, Duration::from_secs(1)).await;
    }
}
