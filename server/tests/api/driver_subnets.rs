//! Addresses for many agents: agent networks get subnets from agenthold's own pool in small
//! blocks, so a stock engine holds hundreds; what is taken survives a new driver (a restart), and
//! a full pool is a clear capacity error, not an engine error.

use std::collections::HashSet;
use std::time::Instant;

use agenthold_server::ids::AgentId;
use agenthold_server::sandbox::subnets::{Ipv4Net, SubnetPool};
use agenthold_server::sandbox::{DriverError, SandboxDriver};
use futures_util::StreamExt;

use crate::support::docker::{DriverUnderTest, docker};
use crate::support::skip::skip_unless_docker;

/// The subnets of the networks labelled with the instance.
fn subnets(instance: &str) -> Vec<String> {
    let (ok, ids) = docker(&["network", "ls", "-q", "--filter", &format!("label=agenthold.instance={instance}")]);
    assert!(ok, "docker network ls");
    let ids: Vec<&str> = ids.lines().filter(|l| !l.is_empty()).collect();
    if ids.is_empty() {
        return Vec::new();
    }
    let mut args = vec!["network", "inspect", "-f", "{{range .IPAM.Config}}{{.Subnet}}{{end}}"];
    args.extend(ids);
    let (ok, out) = docker(&args);
    assert!(ok, "docker network inspect");
    out.lines().map(str::to_owned).collect()
}

fn pool(text: &str) -> SubnetPool {
    SubnetPool::new(text, 28).expect("a valid pool")
}

#[tokio::test]
async fn three_hundred_agent_networks_fit_on_a_stock_engine_and_survive_a_restart() {
    if skip_unless_docker("agent networks' subnets are the Docker driver's") {
        return;
    }
    // A pool of its own (512 blocks), so tests running alongside take none of it.
    let range = "10.215.0.0/19";
    let under = DriverUnderTest::configured(|d| d.with_subnet_pool(Some(pool(range))));
    let agents: Vec<AgentId> = (0..300).map(|_| AgentId::new()).collect();
    let began = Instant::now();
    let made: Vec<_> = futures_util::stream::iter(agents.iter().map(|a| under.driver.make_network(*a)))
        .buffer_unordered(8)
        .collect()
        .await;
    let elapsed = began.elapsed();
    for result in &made {
        assert!(result.is_ok(), "making a network: {result:?}");
    }
    let held = subnets(&under.instance);
    let distinct: HashSet<&String> = held.iter().collect();
    assert_eq!((held.len(), distinct.len()), (300, 300), "300 networks, each with a subnet of its own");
    let range = Ipv4Net::parse(range).expect("net");
    for subnet in &held {
        let net = Ipv4Net::parse(subnet).expect("an IPv4 subnet");
        assert!(net.prefix() == 28 && range.overlaps(net), "{subnet} is a /28 of the pool");
    }
    eprintln!("300 networks made in {elapsed:?}");

    // A new driver (a restarted server) reads what is taken from the engine.
    let restarted =
        agenthold_server::sandbox::docker::DockerDriver::connect(under.instance.clone(), "/nonexistent".into())
            .expect("connecting")
            .with_subnet_pool(Some(pool("10.215.0.0/19")));
    for _ in 0..20 {
        restarted.make_network(AgentId::new()).await.expect("a network after the restart");
    }
    let held = subnets(&under.instance);
    assert_eq!(held.iter().collect::<HashSet<_>>().len(), 320, "no subnet handed out twice across the restart");

    // Removed with their agents.
    let removed: Vec<_> =
        futures_util::stream::iter(agents.iter().map(|a| under.driver.destroy(*a))).buffer_unordered(8).collect().await;
    assert!(removed.iter().all(Result::is_ok), "removing the networks");
    assert_eq!(subnets(&under.instance).len(), 20);
}

#[tokio::test]
async fn a_full_subnet_pool_is_a_capacity_error_and_a_removed_network_frees_its_block() {
    if skip_unless_docker("agent networks' subnets are the Docker driver's") {
        return;
    }
    // Two blocks, somewhere in 10.215.128.0/17 (tests running alongside pick others).
    let random = uuid::Uuid::new_v4().as_u128();
    let range = format!("10.215.{}.{}/27", 128 + random % 128, (random >> 8) % 8 * 32);
    let under = DriverUnderTest::configured(|d| d.with_subnet_pool(Some(pool(&range))));
    let (first, second, third) = (AgentId::new(), AgentId::new(), AgentId::new());
    under.driver.make_network(first).await.expect("first block");
    under.driver.make_network(second).await.expect("second block");
    assert!(under.driver.make_network(first).await.is_ok(), "an agent's existing network is kept");
    let full = under.driver.make_network(third).await;
    assert!(
        matches!(&full, Err(DriverError::Capacity(m)) if m.contains(&range) && m.contains("2 agent networks")),
        "{full:?}"
    );
    assert!(matches!(under.driver.room_for_agent().await, Err(DriverError::Capacity(_))));
    under.driver.destroy(first).await.expect("removing the first agent");
    under.driver.room_for_agent().await.expect("room again");
    under.driver.make_network(third).await.expect("the freed block");
    assert_eq!(subnets(&under.instance).len(), 2);
}
