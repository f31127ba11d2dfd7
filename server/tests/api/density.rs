//! One host, many agents: a cap on agents (503 `CAPACITY`), a cap on awake sandboxes (a wake past
//! it waits with a `CAPACITY_WAIT` notice and makes no container until a slot frees), auto-sleep
//! of idle agents (audited, noticed, woken by the next prompt), and the orphan sweep.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::docker::{docker, wait_for};
use crate::support::skip::skip_unless_docker;
use crate::support::{TestServer, of_type, texts};

const TURN: Duration = Duration::from_secs(90);

fn notices<'a>(events: &'a [Value], code: &str) -> Vec<&'a Value> {
    of_type(events, "notice").into_iter().filter(|e| e["payload"]["code"] == code).collect()
}

#[tokio::test]
async fn creating_an_agent_past_the_limit_is_refused_with_capacity_even_concurrently() {
    let server = TestServer::start_with(&[("AGENTHOLD_MAX_AGENTS", "3")]).await;
    let first = server.create_agent(json!({})).await;
    let body = |name: &str| json!({"name": name, "harness": "fake"});
    // Three at once for the two places left: exactly two get in.
    let (b1, b2, b3) = futures_util::join!(
        server.post("/api/v1/agents", body("b1")),
        server.post("/api/v1/agents", body("b2")),
        server.post("/api/v1/agents", body("b3"))
    );
    let mut statuses = vec![b1.0, b2.0, b3.0];
    statuses.sort_unstable();
    assert_eq!(statuses, [201, 201, 503], "{b1:?} {b2:?} {b3:?}");
    let (status, refused) = server.post("/api/v1/agents", body("b4")).await;
    assert_eq!(status, 503, "{refused}");
    assert_eq!(refused["error"]["code"], "CAPACITY");
    assert!(refused["error"]["message"].as_str().unwrap_or_default().contains("AGENTHOLD_MAX_AGENTS"));
    let (_, listed) = server.get("/api/v1/agents").await;
    assert_eq!(listed["agents"].as_array().map(Vec::len), Some(3), "nothing stored for refused ones");
    // A deleted agent makes room.
    assert_eq!(server.delete(&format!("/api/v1/agents/{first}")).await.0, 204);
    let (status, again) = server.post("/api/v1/agents", body("b4")).await;
    assert_eq!(status, 201, "{again}");
}

#[tokio::test]
async fn a_wake_past_the_awake_limit_waits_with_a_notice_and_makes_no_container_until_a_slot_frees() {
    let server = TestServer::start_with(&[("AGENTHOLD_MAX_AWAKE", "1")]).await;
    let (first, second) = (server.create_agent(json!({})).await, server.create_agent(json!({})).await);
    let one = server.create_session(&first).await;
    server.prompt(&one, "text first").await;
    server.wait_turns(&one, 1, TURN).await;
    let two = server.create_session(&second).await;
    server.prompt(&two, "text second").await;
    let waiting = wait_for(Duration::from_secs(20), "a CAPACITY_WAIT notice", || async {
        let events = server.events(&two).await;
        (!notices(&events, "CAPACITY_WAIT").is_empty()).then_some(events)
    })
    .await;
    assert!(of_type(&waiting, "turn_end").is_empty(), "the turn waits, it does not fail");
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(of_type(&server.events(&two).await, "turn_end").is_empty(), "still waiting");
    if crate::support::driver() == "docker" {
        let (_, found) = docker(&["ps", "-a", "-q", "--filter", &format!("name={}", server.container(&second))]);
        assert!(found.is_empty(), "no container is made while the host is full");
    }
    // A person asking to wake it is told at once.
    let (status, full) = server.post(&format!("/api/v1/agents/{second}/wake"), json!({})).await;
    assert_eq!((status, full["error"]["code"].as_str()), (503, Some("CAPACITY")), "{full}");
    // The first agent sleeps: its slot goes to the waiting wake.
    let (status, body) = server.post(&format!("/api/v1/agents/{first}/sleep"), json!({})).await;
    assert_eq!(status, 200, "{body}");
    let events = server.wait_turns(&two, 1, TURN).await;
    assert_eq!(texts(&events), ["second"], "{events:?}");
    assert_eq!(notices(&events, "CAPACITY_WAIT").len(), 1);
}

#[tokio::test]
async fn an_idle_agent_is_put_to_sleep_and_the_next_prompt_wakes_it() {
    let server = TestServer::start_with(&[("AGENTHOLD_AUTO_SLEEP_SECS", "3")]).await;
    let agent = server.create_agent(json!({})).await;
    let never = server.create_agent(json!({"limits": {"auto_sleep_secs": 0}})).await;
    assert_eq!(server.get(&format!("/api/v1/agents/{never}")).await.1["limits"]["auto_sleep_secs"], 0);
    let session = server.create_session(&agent).await;
    let other = server.create_session(&never).await;
    server.prompt(&session, "text before").await;
    server.prompt(&other, "text before").await;
    server.wait_turns(&session, 1, TURN).await;
    server.wait_turns(&other, 1, TURN).await;
    let idle_from = Instant::now();
    wait_for(Duration::from_secs(30), "an AUTO_SLEEP notice", || async {
        let events = server.events(&session).await;
        (!notices(&events, "AUTO_SLEEP").is_empty()).then_some(())
    })
    .await;
    let slept_after = idle_from.elapsed();
    assert!(slept_after >= Duration::from_secs(2), "not before its time ({slept_after:?})");
    if crate::support::driver() == "docker" {
        let (_, running) = docker(&["inspect", "-f", "{{.State.Running}}", &server.container(&agent)]);
        assert_eq!(running, "false", "the container is stopped");
        let (_, running) = docker(&["inspect", "-f", "{{.State.Running}}", &server.container(&never)]);
        assert_eq!(running, "true", "auto_sleep_secs 0 never sleeps");
    }
    assert!(notices(&server.events(&other).await, "AUTO_SLEEP").is_empty());
    let (_, shown) = server.get(&format!("/api/v1/agents/{agent}")).await;
    assert_eq!(shown["desired_state"], "asleep");
    let workspace = shown["workspace_id"].as_str().expect("workspace").to_owned();
    let (_, audit) = server.get(&format!("/api/v1/workspaces/{workspace}/audit")).await;
    let records = audit["records"].as_array().cloned().unwrap_or_default();
    let slept = records.iter().find(|r| r["action"] == "agent.auto_slept").expect("an agent.auto_slept record");
    assert_eq!(slept["resource_id"], agent.as_str());
    assert!(slept["detail"]["idle_secs"].as_u64().is_some_and(|s| s >= 3), "{slept}");
    // The next prompt wakes it as usual.
    server.prompt(&session, "text after").await;
    let events = server.wait_turns(&session, 2, TURN).await;
    assert_eq!(texts(&events), ["before", "after"]);
    eprintln!("auto-slept {slept_after:?} after its turn (setting 3 s)");
    // The agent's own time is changed, and returned to the server's with null.
    let path = format!("/api/v1/agents/{never}");
    let (status, patched) = server.raw("PATCH", &path, r#"{"limits": {"auto_sleep_secs": 600}}"#).await;
    assert_eq!((status, &patched["limits"]["auto_sleep_secs"]), (200, &json!(600)), "{patched}");
    let (status, patched) = server.raw("PATCH", &path, r#"{"limits": {"auto_sleep_secs": null}}"#).await;
    assert_eq!((status, &patched["limits"]["auto_sleep_secs"]), (200, &Value::Null), "{patched}");
    let (status, refused) = server.raw("PATCH", &path, r#"{"limits": {"auto_sleep_secs": -1}}"#).await;
    assert_eq!((status, &refused["error"]["code"]), (400, &json!("INVALID_LIMITS")), "{refused}");
}

#[tokio::test]
async fn the_orphan_sweep_removes_objects_of_agents_that_no_longer_exist_and_no_others() {
    if skip_unless_docker("the orphan sweep's Docker objects") {
        return;
    }
    let server =
        TestServer::start_with(&[("AGENTHOLD_ORPHAN_SWEEP_SECS", "1"), ("AGENTHOLD_ORPHAN_GRACE_SECS", "0")]).await;
    let live = server.create_agent(json!({})).await;
    let session = server.create_session(&live).await;
    server.prompt(&session, "text alive").await;
    server.wait_turns(&session, 1, TURN).await;
    // Objects of an agent the database never had (a crash between making them and storing it).
    let ghost = uuid::Uuid::new_v4();
    let labels =
        ["--label", &format!("agenthold.instance={}", server.instance), "--label", &format!("agenthold.agent={ghost}")];
    let volume = format!("{}-home-{ghost}", server.instance);
    let network = format!("{}-net-{ghost}", server.instance);
    let made = Instant::now();
    let mut args = vec!["volume", "create"];
    args.extend(labels);
    args.push(&volume);
    assert!(docker(&args).0, "docker volume create");
    // And its network holder, on that network (the network goes only once the holder has). The
    // sweep (every second, no grace) may take the network before the holder is on it: again then.
    let holder = format!("{}-netns-{ghost}", server.instance);
    let image = std::env::var("AGENTHOLD_TEST_IMAGE").unwrap_or_else(|_| "agenthold/test:latest".to_owned());
    for attempt in 1.. {
        let mut args = vec!["network", "create", "--internal"];
        args.extend(labels);
        args.push(&network);
        assert!(docker(&args).0, "docker network create");
        let mut args = vec!["run", "-d", "--name", &holder, "--network", &network, "--label", "agenthold.role=netns"];
        args.extend(labels);
        args.extend(["--entrypoint", "sleep", &image, "infinity"]);
        if docker(&args).0 {
            break;
        }
        assert!(attempt < 30, "docker run the holder");
        let _ = docker(&["rm", "-f", &holder]);
        let _ = docker(&["network", "rm", &network]);
    }
    let exists = |kind: &str, name: &str| docker(&[kind, "inspect", name]).0;
    wait_for(Duration::from_secs(30), "the orphans to be swept", || async {
        (!exists("volume", &volume) && !exists("network", &network) && !exists("container", &holder)).then_some(())
    })
    .await;
    eprintln!("orphans swept {:?} after they were made", made.elapsed());
    assert!(exists("container", &server.container(&live)), "a live agent's container stays");
    assert!(exists("volume", &format!("{}-home-{live}", server.instance)), "and its home");
    assert!(exists("network", &format!("{}-net-{live}", server.instance)), "and its network");
    assert!(exists("container", &server.network_holder(&live)), "and its network holder");
    assert!(server.log().contains("removed an orphaned sandbox object"), "the sweep says what it removed");
    // The live agent still works.
    server.prompt(&session, "text still").await;
    assert_eq!(texts(&server.wait_turns(&session, 2, TURN).await), ["alive", "still"]);
}

#[tokio::test]
async fn fifty_agents_created_at_once_all_wake_with_subnets_of_their_own() {
    if skip_unless_docker("agent networks' subnets are the Docker driver's") {
        return;
    }
    let server = TestServer::start().await;
    let started = Instant::now();
    let woken = futures_util::future::join_all((0..50).map(|_| async {
        let agent = server.create_agent(json!({})).await;
        let session = server.create_session(&agent).await;
        server.prompt(&session, "text awake").await;
        let events = server.wait_turns(&session, 1, Duration::from_secs(600)).await;
        (agent, texts(&events))
    }))
    .await;
    let elapsed = started.elapsed();
    for (agent, texts) in &woken {
        assert_eq!(texts, &["awake"], "agent {agent}");
    }
    // Each on a network with a /28 of its own from the pool.
    let (ok, ids) =
        docker(&["network", "ls", "-q", "--filter", &format!("label=agenthold.instance={}", server.instance)]);
    assert!(ok);
    let mut args = vec!["network", "inspect", "-f", "{{.Name}} {{range .IPAM.Config}}{{.Subnet}}{{end}}"];
    args.extend(ids.lines());
    let (_, listed) = docker(&args);
    let subnets: std::collections::HashSet<&str> = listed
        .lines()
        .filter(|l| woken.iter().any(|(agent, _)| l.contains(agent.as_str())))
        .filter_map(|l| l.split_once(' ').map(|(_, subnet)| subnet))
        .collect();
    assert_eq!(subnets.len(), 50, "{listed}");
    assert!(subnets.iter().all(|s| s.starts_with("10.214.") && s.ends_with("/28")), "{subnets:?}");
    eprintln!("50 agents created at once, all awake after {elapsed:?}");
}
