//! The warm pool (docs/design.md, "Warm pool"): a sandbox started ahead is taken by the next
//! agent of the default image — the agent gets its id, its running container and its connected
//! sandboxd, so the first prompt needs no container start — and the pool refills; a pooled
//! sandbox that dies is replaced; deleting every agent leaves only the pool; a restart leaves no
//! orphan. Docker driver only.

use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::support::skip::skip_unless_docker;
use crate::support::{TestServer, of_type};

/// Running sandboxes of the instance (`docker ps` names; not the network holders).
fn running(instance: &str) -> Vec<String> {
    let out = Command::new("docker")
        .args(["ps", "--filter", &format!("label=agenthold.instance={instance}")])
        .args(["--format", "{{.Names}} {{.Label \"agenthold.role\"}}"])
        .output()
        .expect("docker ps");
    let listed = String::from_utf8_lossy(&out.stdout);
    listed
        .lines()
        .filter_map(|l| l.split_once(' '))
        .filter(|(_, role)| role.is_empty())
        .map(|(n, _)| n.to_owned())
        .collect()
}

/// Waits until exactly `count` containers of the instance run and `check` holds; returns them.
async fn wait_running(instance: &str, count: usize, check: impl Fn(&[String]) -> bool) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let names = running(instance);
        if names.len() == count && check(&names) {
            return names;
        }
        assert!(Instant::now() < deadline, "waited for {count} running container(s); have {names:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Waits until the server log says a pooled sandbox connected as often as `times`.
async fn wait_connected(server: &TestServer, times: usize) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while server.log().matches("sandboxd connected").count() < times {
        assert!(Instant::now() < deadline, "no pooled sandbox connected; log: {}", server.log());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn a_new_agent_takes_the_pooled_sandbox_and_the_pool_refills() {
    if skip_unless_docker("the warm pool is the Docker driver's") {
        return;
    }
    let mut server =
        TestServer::start_with(&[("AGENTHOLD_WARM_POOL_SIZE", "1"), ("RUST_LOG", "info,agenthold_server=debug")]).await;
    let instance = server.instance.clone();
    let pooled = wait_running(&instance, 1, |_| true).await.remove(0);
    wait_connected(&server, 1).await;

    // The agent takes the pooled sandbox: its id is the one the container was made for.
    let agent = server.create_agent(json!({"limits": {"memory_mib": 384}})).await;
    assert_eq!(pooled, server.container(&agent), "the agent took the pooled container");
    assert!(server.log().contains("the agent took a sandbox from the warm pool"), "{}", server.log());
    // Its own limits were applied to the running container.
    let memory =
        Command::new("docker").args(["inspect", "-f", "{{.HostConfig.Memory}}", &pooled]).output().expect("inspect");
    assert_eq!(String::from_utf8_lossy(&memory.stdout).trim(), (384u64 << 20).to_string());

    let session = server.create_session(&agent).await;
    server.prompt(&session, "text hello from the pool").await;
    let events = server.wait_turns(&session, 1, Duration::from_secs(60)).await;
    assert_eq!(events.last().map(|e| e["payload"]["stop_reason"].clone()), Some(json!("end_turn")));
    assert!(of_type(&events, "error").is_empty(), "{:?}", of_type(&events, "error"));
    let started = server.log().lines().any(|line| line.contains("sandbox started") && line.contains(&agent));
    assert!(!started, "the first prompt started no container: {}", server.log());

    // The pool refills with a sandbox of a new id.
    let names = wait_running(&instance, 2, |names| names.iter().any(|n| *n != pooled)).await;
    let refill = names.into_iter().find(|n| *n != pooled).expect("the refill");

    // A pooled sandbox that dies is replaced.
    wait_connected(&server, 2).await;
    let _ = Command::new("docker").args(["rm", "-f", &refill]).status();
    wait_running(&instance, 2, |names| !names.contains(&refill)).await;

    // Deleting every agent leaves only the pool.
    let (status, _) = server.delete(&format!("/api/v1/agents/{agent}")).await;
    assert!(status == 200 || status == 204, "{status}");
    let left = wait_running(&instance, 1, |names| !names.contains(&pooled)).await;

    // A restart removes the pooled sandbox the old process held and makes a new one: no orphan.
    server.restart().await;
    wait_running(&instance, 1, |names| !names.contains(&left[0])).await;
    let volumes = Command::new("docker")
        .args(["volume", "ls", "-q", "--filter", &format!("label=agenthold.instance={instance}")])
        .output()
        .expect("docker volume ls");
    let homes: Vec<String> = String::from_utf8_lossy(&volumes.stdout)
        .lines()
        .filter(|v| v.contains(&left[0][instance.len() + 1..]))
        .map(str::to_owned)
        .collect();
    assert!(homes.is_empty(), "the old pooled sandbox's home is gone: {homes:?}");
}

#[tokio::test]
async fn an_agent_of_another_image_or_with_an_empty_pool_starts_the_cold_way() {
    if skip_unless_docker("the warm pool is the Docker driver's") {
        return;
    }
    let server = TestServer::start_with(&[("AGENTHOLD_WARM_POOL_SIZE", "1")]).await;
    let pooled = wait_running(&server.instance, 1, |_| true).await.remove(0);
    wait_connected(&server, 1).await;
    let image = std::env::var("AGENTHOLD_TEST_IMAGE").unwrap_or_else(|_| "agenthold/test:latest".to_owned());
    let alias = format!("{}:cold-{}", image.split(':').next().unwrap_or("agenthold/test"), &server.instance);
    assert!(Command::new("docker").args(["tag", &image, &alias]).status().expect("docker tag").success());
    let agent = server.create_agent(json!({"image": alias})).await;
    assert_ne!(server.container(&agent), pooled, "another image does not take the pool's sandbox");
    let session = server.create_session(&agent).await;
    server.prompt(&session, "text cold").await;
    let events = server.wait_turns(&session, 1, Duration::from_secs(90)).await;
    assert_eq!(events.last().map(|e| e["payload"]["stop_reason"].clone()), Some(json!("end_turn")));
    assert!(running(&server.instance).contains(&pooled), "the pooled sandbox is still waiting");
    let _ = Command::new("docker").args(["rmi", &alias]).status();
}

#[tokio::test]
async fn a_pooled_sandbox_whose_sandboxd_never_connects_is_replaced_and_never_handed_out() {
    if skip_unless_docker("the warm pool is the Docker driver's") {
        return;
    }
    // Sandboxes dial a port nothing listens on: no sandboxd ever connects.
    let nowhere = format!("ws://host.docker.internal:{}/tunnel", crate::support::free_port("0.0.0.0"));
    let server = TestServer::start_with(&[
        ("AGENTHOLD_WARM_POOL_SIZE", "1"),
        ("AGENTHOLD_WARM_POOL_CONNECT_TIMEOUT_SECS", "2"),
        ("AGENTHOLD_TUNNEL_URL", &nowhere),
    ])
    .await;
    let instance = server.instance.clone();
    let first = wait_running(&instance, 1, |_| true).await.remove(0);
    // An agent created now does not get the unconnected sandbox.
    let agent = server.create_agent(json!({})).await;
    assert_ne!(server.container(&agent), first, "an unconnected pooled sandbox is never handed out");
    // Past the timeout (2 s, not the default 30 s) it is removed and another one made in its place.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let names = running(&instance);
        if !names.contains(&first) && names.iter().any(|n| *n != first) {
            break;
        }
        assert!(Instant::now() < deadline, "the unconnected pooled sandbox was not replaced: {names:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(server.log().contains("did not connect in time"), "{}", server.log());
}

#[tokio::test]
async fn a_second_replica_keeps_its_hands_off_the_first_replicas_pool() {
    if skip_unless_docker("the warm pool is the Docker driver's") {
        return;
    }
    let first = TestServer::start_with(&[
        ("AGENTHOLD_WARM_POOL_SIZE", "1"),
        ("AGENTHOLD_SANDBOX_FIREWALL", "external"),
        ("AGENTHOLD_LEASE_TTL_SECS", "3"),
    ])
    .await;
    let instance = first.instance.clone();
    let pooled = wait_running(&instance, 1, |_| true).await.remove(0);
    wait_connected(&first, 1).await;
    // Another replica with a pool of its own: it removes no leftovers of the live first one.
    let second = first.replica(&[]).await;
    let both = wait_running(&instance, 2, |_| true).await;
    assert!(both.contains(&pooled), "the first replica's pooled sandbox survived the second's start: {both:?}");
    assert!(!second.log().contains(&pooled.replace(&format!("{instance}-"), "")), "the second never touched it");
    // The first replica's pooled sandbox is still its to hand out.
    let agent = first.create_agent(json!({})).await;
    assert_eq!(pooled, first.container(&agent), "the first replica's next agent took its pooled sandbox");
}
