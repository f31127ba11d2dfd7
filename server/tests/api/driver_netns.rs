//! The network holder (Docker driver): a sandbox joins the network namespace of its agent's
//! holder, which outlives a sleep, so a woken sandbox keeps its address and `host.docker.internal`;
//! the holder runs as nobody with a read-only root; a holder that dies under a running turn ends
//! that turn and the next prompt starts both again; a holder removed behind the server's back is
//! made again around the same home.

use std::time::{Duration, Instant};

use serde_json::json;

use crate::support::docker::docker;
use crate::support::skip::skip_unless_docker;
use crate::support::{TestServer, last_run_output};

const TURN: Duration = Duration::from_secs(90);

/// `docker inspect -f format name`, trimmed; panics when it fails.
fn inspect(name: &str, format: &str) -> String {
    let (ok, out) = docker(&["inspect", "-f", format, name]);
    assert!(ok, "docker inspect {name}: {out}");
    out
}

fn address(container: &str) -> String {
    inspect(container, "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}")
}

/// Asserts that the agent's sandbox runs in the namespace of the holder `id`.
fn joined(server: &TestServer, agent: &str, id: &str) {
    let mode = inspect(&server.container(agent), "{{.HostConfig.NetworkMode}}");
    assert_eq!(mode, format!("container:{id}"), "the sandbox joined its holder");
    assert_eq!(inspect(&server.container(agent), "{{range $n, $_ := .NetworkSettings.Networks}}{{$n}}{{end}}"), "");
}

#[tokio::test]
async fn a_sleeping_agent_keeps_its_holder_and_wakes_into_the_same_namespace() {
    if skip_unless_docker("network holders are the Docker driver's") {
        return;
    }
    let server = TestServer::start().await;
    let agent = server.create_agent(json!({})).await;
    let session = server.create_session(&agent).await;
    server.prompt(&session, "write kept.txt held\nrun getent hosts host.docker.internal").await;
    let events = server.wait_turns(&session, 1, TURN).await;
    assert!(last_run_output(&events).contains("host.docker.internal"), "the holder's hosts: {events:#?}");

    let holder = server.network_holder(&agent);
    let id = inspect(&holder, "{{.Id}}");
    let addr = address(&holder);
    assert!(!addr.is_empty(), "the holder has the agent's address");
    joined(&server, &agent, &id);
    // Nothing it does not need: nobody, a read-only root, no capabilities, no token.
    assert_eq!(inspect(&holder, "{{.Config.User}} {{.HostConfig.ReadonlyRootfs}}"), "65534:65534 true");
    assert_eq!(inspect(&holder, "{{json .HostConfig.CapDrop}}"), r#"["ALL"]"#);
    assert!(!inspect(&holder, "{{json .Config.Env}}").contains("AGENTHOLD_SANDBOX_TOKEN"));
    assert_eq!(inspect(&holder, "{{json .Config.Entrypoint}}"), r#"["/opt/agenthold/sandboxd","hold"]"#);

    let (status, _) = server.post(&format!("/api/v1/agents/{agent}/sleep"), json!({})).await;
    assert_eq!(status, 200);
    assert_eq!(inspect(&server.container(&agent), "{{.State.Running}}"), "false", "sleep stops the sandbox");
    assert_eq!(inspect(&holder, "{{.State.Running}}"), "true", "and keeps its holder");

    server.prompt(&session, "run cat kept.txt").await;
    let events = server.wait_turns(&session, 2, TURN).await;
    assert!(last_run_output(&events).contains("held"), "the woken sandbox has its home: {events:#?}");
    assert_eq!(inspect(&holder, "{{.Id}}"), id, "the same holder");
    assert_eq!(address(&holder), addr, "the same address");
    joined(&server, &agent, &id);
}

#[tokio::test]
async fn a_holder_killed_under_a_running_turn_ends_it_and_the_next_prompt_starts_both_again() {
    if skip_unless_docker("network holders are the Docker driver's") {
        return;
    }
    let server = TestServer::start().await;
    let (agent, session) = crate::lifecycle::mid_turn(&server).await;

    let killed_at = Instant::now();
    let holder = server.network_holder(&agent);
    assert!(docker(&["kill", &holder]).0, "docker kill the holder");
    let events = server.wait_turns(&session, 1, TURN).await;
    let ended_after = killed_at.elapsed();
    eprintln!("the turn ended {ended_after:?} after the holder was killed");
    // The engine's `die` event, not the reconnect grace (60 s).
    assert!(ended_after < Duration::from_secs(10), "the turn ended only after {ended_after:?}");
    let error = events.iter().find(|e| e["type"] == "error").expect("an error event");
    assert_eq!(error["payload"]["code"], "SANDBOX_EXITED", "{error}");

    // The sandbox (still running, but with only a loopback) and its holder both start again.
    server.prompt(&session, "run cat kept.txt").await;
    let events = server.wait_turns(&session, 2, TURN).await;
    assert!(last_run_output(&events).contains("survives"), "{events:#?}");
    assert_eq!(inspect(&holder, "{{.State.Running}}"), "true");
    joined(&server, &agent, &inspect(&holder, "{{.Id}}"));
}

#[tokio::test]
async fn a_holder_removed_behind_the_servers_back_is_made_again_around_the_same_home() {
    if skip_unless_docker("network holders are the Docker driver's") {
        return;
    }
    let server = TestServer::start().await;
    let agent = server.create_agent(json!({})).await;
    let session = server.create_session(&agent).await;
    server.prompt(&session, "write kept.txt survives").await;
    server.wait_turns(&session, 1, TURN).await;
    let holder = server.network_holder(&agent);
    let before = inspect(&holder, "{{.Id}}");
    let (status, _) = server.post(&format!("/api/v1/agents/{agent}/sleep"), json!({})).await;
    assert_eq!(status, 200);
    assert!(docker(&["rm", "-f", &holder]).0, "docker rm the holder");

    // The sandbox cannot start without the namespace it joined: made again, same home.
    server.prompt(&session, "run cat kept.txt").await;
    let events = server.wait_turns(&session, 2, TURN).await;
    assert!(last_run_output(&events).contains("survives"), "{events:#?}");
    let after = inspect(&holder, "{{.Id}}");
    assert_ne!(after, before, "a new holder");
    joined(&server, &agent, &after);
}

/// The ids of the instance's ready network holders (made for agents not created yet).
fn ready_holders(instance: &str) -> Vec<String> {
    let (ok, out) = docker(&[
        "ps",
        "-aq",
        "--no-trunc",
        "--filter",
        &format!("label=agenthold.instance={instance}"),
        "--filter",
        "label=agenthold.ready=true",
        "--filter",
        "label=agenthold.role=netns",
    ]);
    assert!(ok, "docker ps: {out}");
    out.lines().map(str::to_owned).collect()
}

#[tokio::test]
async fn a_second_replica_keeps_its_hands_off_the_first_replicas_ready_holders() {
    if skip_unless_docker("network holders are the Docker driver's") {
        return;
    }
    // One host firewall chain per instance, whose tunnel port the second replica's would replace.
    let a = TestServer::start_with(&[("AGENTHOLD_SANDBOX_FIREWALL", "external")]).await;
    let ready = agenthold_server::sandbox::READY_NETWORKS;
    let deadline = Instant::now() + Duration::from_secs(60);
    while ready_holders(&a.instance).len() < ready {
        assert!(Instant::now() < deadline, "A made no ready holders");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let of_a = ready_holders(&a.instance);

    // B starts on the same instance: it removes what an earlier process of itself left, and
    // makes its own; A's (one of which A may be making an agent's sandbox on) stay.
    let b = a.replica(&[]).await;
    let deadline = Instant::now() + Duration::from_secs(60);
    while ready_holders(&b.instance).len() < 2 * ready {
        assert!(Instant::now() < deadline, "B made no ready holders: {:?}", ready_holders(&b.instance));
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let now = ready_holders(&b.instance);
    assert!(of_a.iter().all(|id| now.contains(id)), "A's ready holders {of_a:?} stay: {now:?}");
    for id in &of_a {
        assert_eq!(inspect(id, "{{.State.Running}}"), "true");
    }
    // And A's next agent starts on one of them.
    let agent = a.create_agent(json!({})).await;
    let session = a.create_session(&agent).await;
    a.prompt(&session, "text on a ready holder").await;
    a.wait_turns(&session, 1, TURN).await;
    assert!(of_a.contains(&inspect(&a.network_holder(&agent), "{{.Id}}")), "A's agent took one of A's");
}
