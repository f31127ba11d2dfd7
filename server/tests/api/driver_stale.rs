//! A container made by another server version (other tools, other container settings, or no
//! version labels at all) is reported stale; removing it keeps the home, and the container made
//! again around that home is current. The full path through the supervisor (the next wake
//! recreates a stale container) is the last test.

use std::time::Duration;

use agenthold_server::ids::AgentId;
use agenthold_server::sandbox::docker::{HOME_DIR, SPEC_LABEL, SPEC_VERSION, TOOLS_LABEL};
use agenthold_server::sandbox::{SandboxDriver, SandboxStatus};
use serde_json::json;

use crate::support::TestServer;
use crate::support::docker::{DriverUnderTest, docker, test_image, wait_for};
use crate::support::skip::skip_unless_docker;

/// Replaces the agent's container by one an older server would have made: same name, agent
/// labels and home volume, but `version_labels` (none, or old ones) and `sleep` as its process.
fn replace_with_old_container(instance: &str, container: &str, agent: &str, home: &str, version_labels: &[String]) {
    let (ok, _) = docker(&["rm", "-f", container]);
    assert!(ok, "removing {container}");
    let mut args = vec![
        "create".to_owned(),
        "--name".to_owned(),
        container.to_owned(),
        "--label".to_owned(),
        format!("agenthold.instance={instance}"),
        "--label".to_owned(),
        format!("agenthold.agent={agent}"),
        "-v".to_owned(),
        format!("{home}:{HOME_DIR}"),
    ];
    for label in version_labels {
        args.extend(["--label".to_owned(), label.clone()]);
    }
    args.extend([test_image(), "sleep".to_owned(), "infinity".to_owned()]);
    let (ok, _) = docker(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(ok, "creating an old container");
}

#[tokio::test]
async fn a_container_of_another_version_is_stale_and_made_again_around_its_home() {
    if skip_unless_docker("container versions are the Docker driver's") {
        return;
    }
    let under = DriverUnderTest::new();
    let agent = AgentId::new();
    let (container, home) = (under.container(agent), under.home(agent));
    under.driver.create(under.spec(agent, 256)).await.expect("create");
    assert_eq!(under.driver.status(agent).await.expect("status"), SandboxStatus::Stopped);
    under.driver.start(agent).await.expect("start");
    assert_eq!(under.driver.status(agent).await.expect("status"), SandboxStatus::Running);
    // As the agent (root in a sandbox may not write into the agent's home: no DAC_OVERRIDE).
    let (ok, _) = docker(&["exec", "-u", "agent", &container, "sh", "-c", &format!("echo kept > {HOME_DIR}/marker")]);
    assert!(ok, "writing into the home; {}", under.describe(agent));

    let old_labels = [
        vec![],
        vec![
            format!("{TOOLS_LABEL}={}-tools-0123456789abcdef", under.instance),
            format!("{SPEC_LABEL}={SPEC_VERSION}"),
        ],
        vec![format!("{TOOLS_LABEL}=whatever"), format!("{SPEC_LABEL}=1")],
    ];
    for labels in &old_labels {
        replace_with_old_container(&under.instance, &container, &agent.to_string(), &home, labels);
        assert_eq!(under.driver.status(agent).await.expect("status"), SandboxStatus::Stale, "labels {labels:?}");
    }
    // The current tools but older settings are stale too.
    let (_, tools) = {
        under.driver.remove_container(agent).await.expect("remove");
        under.driver.create(under.spec(agent, 256)).await.expect("create");
        docker(&["inspect", "-f", &format!("{{{{index .Config.Labels \"{TOOLS_LABEL}\"}}}}"), &container])
    };
    replace_with_old_container(
        &under.instance,
        &container,
        &agent.to_string(),
        &home,
        &[format!("{TOOLS_LABEL}={tools}"), format!("{SPEC_LABEL}=1")],
    );
    assert_eq!(under.driver.status(agent).await.expect("status"), SandboxStatus::Stale);

    under.driver.remove_container(agent).await.expect("remove_container");
    assert_eq!(under.driver.status(agent).await.expect("status"), SandboxStatus::Missing);
    let (ok, _) = docker(&["volume", "inspect", &home]);
    assert!(ok, "the home survives remove_container");

    under.driver.create(under.spec(agent, 256)).await.expect("create again");
    under.driver.start(agent).await.expect("start again");
    assert_eq!(under.driver.status(agent).await.expect("status"), SandboxStatus::Running);
    let (ok, marker) = docker(&["exec", "-u", "agent", &container, "cat", &format!("{HOME_DIR}/marker")]);
    assert_eq!((ok, marker.as_str()), (true, "kept"), "the home is the same");
}

/// The supervisor treats `SandboxStatus::Stale` like `Missing` after `remove_container`: the
/// wake makes the sandbox again around the same home.
#[tokio::test]
async fn a_stale_container_is_recreated_on_wake_with_its_home() {
    if skip_unless_docker("container versions are the Docker driver's") {
        return;
    }
    let server = TestServer::start_with(&[("AGENTHOLD_RECONNECT_GRACE_SECS", "15")]).await;
    let agent = server.create_agent(json!({})).await;
    let session = server.create_session(&agent).await;
    server.prompt(&session, "write keep.txt kept").await;
    server.wait_turns(&session, 1, Duration::from_secs(90)).await;
    let (status, _) = server.post(&format!("/api/v1/agents/{agent}/sleep"), json!({})).await;
    assert_eq!(status, 200);

    let container = server.container(&agent);
    let home = format!("{}-home-{agent}", server.instance);
    replace_with_old_container(&server.instance, &container, &agent, &home, &[]);

    server.prompt(&session, "run cat keep.txt").await;
    let events = server.wait_turns(&session, 2, Duration::from_secs(90)).await;
    let output: String = events.iter().filter_map(|e| e["payload"]["content"][0]["content"]["text"].as_str()).collect();
    assert!(output.contains("kept"), "the home survived the recreation: {events:?}");
    let tools = wait_for(Duration::from_secs(5), "the recreated container", || async {
        let (ok, tools) =
            docker(&["inspect", "-f", &format!("{{{{index .Config.Labels \"{TOOLS_LABEL}\"}}}}"), &container]);
        (ok && !tools.is_empty() && tools != "<no value>").then_some(tools)
    })
    .await;
    assert!(tools.starts_with(&format!("{}-tools-", server.instance)), "{tools}");
}
