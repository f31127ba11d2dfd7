//! The Docker driver reports a sandbox process killed for want of memory: a memory hog in a
//! container with a small memory limit (and no swap beyond it) is OOM-killed and
//! `oom_killed` says so; before, it says not.

use std::time::Duration;

use agenthold_server::ids::AgentId;
use agenthold_server::sandbox::SandboxDriver;

use crate::support::docker::{DriverUnderTest, docker, wait_for};
use crate::support::skip::skip_unless_docker;

#[tokio::test]
async fn a_memory_hog_is_reported_oom_killed() {
    if skip_unless_docker("it drives the Docker driver (an OOM kill under a container's memory limit)") {
        return;
    }
    let under = DriverUnderTest::new();
    let agent = AgentId::new();
    under.driver.create(under.spec(agent, 64)).await.expect("creating the sandbox");
    under.driver.start(agent).await.expect("starting the sandbox");
    assert!(!under.driver.oom_killed(agent).await.expect("oom_killed"), "nothing was OOM-killed yet");

    // `tail` keeps the whole (newline-free) input in memory: far past the 64 MiB limit.
    let container = under.container(agent);
    let (ok, _) = docker(&["exec", &container, "sh", "-c", "head -c 512m /dev/zero | tail > /dev/null"]);
    assert!(!ok, "the memory hog was killed; {}", under.describe(agent));

    wait_for(Duration::from_secs(30), "oom_killed to report the kill", || async {
        under.driver.oom_killed(agent).await.expect("oom_killed").then_some(())
    })
    .await;
    // sandboxd itself lives on: only the hog was killed.
    let (_, running) = docker(&["inspect", "-f", "{{.State.Running}}", &container]);
    assert_eq!(running, "true");
}

#[tokio::test]
async fn a_missing_sandbox_was_not_oom_killed() {
    if skip_unless_docker("it drives the Docker driver (an OOM kill under a container's memory limit)") {
        return;
    }
    let under = DriverUnderTest::new();
    assert!(!under.driver.oom_killed(AgentId::new()).await.expect("oom_killed"));
}
