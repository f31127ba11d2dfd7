//! Helpers for the driver tests: a Docker driver on an instance of its own (whose containers,
//! volumes and networks are removed when it is dropped), `docker` CLI queries, and waiting for a
//! condition with a deadline.

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use agenthold_server::ids::AgentId;
use agenthold_server::sandbox::SandboxSpec;
use agenthold_server::sandbox::docker::DockerDriver;
use agenthold_server::secret::Secret;

/// The sandbox image the tests use.
pub fn test_image() -> String {
    std::env::var("AGENTHOLD_TEST_IMAGE").unwrap_or_else(|_| "agenthold/test:latest".to_owned())
}

/// Runs `docker` with `args`; returns (success, trimmed stdout).
pub fn docker(args: &[&str]) -> (bool, String) {
    let output = Command::new("docker").args(args).output().expect("running docker");
    (output.status.success(), String::from_utf8_lossy(&output.stdout).trim().to_owned())
}

/// The names of the containers, volumes and networks labelled `label` (`key=value`).
pub fn labelled(label: &str) -> Vec<String> {
    let filter = format!("label={label}");
    let mut found = Vec::new();
    for args in [
        vec!["ps", "-a", "--format", "container {{.Names}}", "--filter", &filter],
        vec!["volume", "ls", "--format", "volume {{.Name}}", "--filter", &filter],
        vec!["network", "ls", "--format", "network {{.Name}}", "--filter", &filter],
    ] {
        let (ok, out) = docker(&args);
        assert!(ok, "docker {args:?} failed");
        found.extend(out.lines().filter(|l| !l.is_empty()).map(str::to_owned));
    }
    found
}

/// Waits until `check` returns `Some`, polling every 100 ms; panics with `what` after `timeout`.
pub async fn wait_for<T, F, Fut>(timeout: Duration, what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(Instant::now() < deadline, "waited {timeout:?} for {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A Docker driver on an instance of its own.
pub struct DriverUnderTest {
    /// The driver.
    pub driver: DockerDriver,
    /// Its name prefix and `agenthold.instance` label.
    pub instance: String,
}

impl DriverUnderTest {
    /// A driver whose sandboxes get the server's own sandboxd and fakeagent.
    pub fn new() -> Self {
        Self::configured(|driver| driver)
    }

    /// Such a driver, configured further by `configure`.
    pub fn configured(configure: impl FnOnce(DockerDriver) -> DockerDriver) -> Self {
        let instance = format!("ahd{}", &uuid::Uuid::new_v4().simple().to_string()[..10]);
        let exe = PathBuf::from(env!("CARGO_BIN_EXE_agenthold"));
        let bin_dir = exe.parent().expect("bin dir").to_owned();
        let driver = configure(DockerDriver::connect(instance.clone(), bin_dir).expect("connecting to Docker"));
        Self { driver, instance }
    }

    /// A spec for `agent_id` with `memory_mib` of memory; sandboxd dials a port nobody serves
    /// (it keeps retrying, so the container keeps running).
    pub fn spec(&self, agent_id: AgentId, memory_mib: i32) -> SandboxSpec {
        SandboxSpec {
            agent_id,
            image: test_image(),
            tunnel_url: "ws://127.0.0.1:9/tunnel".to_owned(),
            tunnel_ca_pem: None,
            token: Secret::new(format!("t{}", uuid::Uuid::new_v4().simple())),
            cpus: 1.0,
            memory_mib,
            pids_limit: 256,
            disk_mib: None,
        }
    }

    /// The container of an agent.
    pub fn container(&self, agent_id: AgentId) -> String {
        format!("{}-{agent_id}", self.instance)
    }

    /// What the engine says of an agent's container (for failure messages).
    pub fn describe(&self, agent_id: AgentId) -> String {
        let container = self.container(agent_id);
        let (_, state) = docker(&["inspect", "-f", "{{json .State}}", &container]);
        let logs = Command::new("docker").args(["logs", "--tail", "20", &container]).output();
        let logs =
            logs.map(|o| format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr)));
        format!("state: {state}\nlogs:\n{}", logs.unwrap_or_default())
    }

    /// The home volume of an agent.
    pub fn home(&self, agent_id: AgentId) -> String {
        format!("{}-home-{agent_id}", self.instance)
    }
}

impl Drop for DriverUnderTest {
    fn drop(&mut self) {
        crate::support::remove_docker_objects(&self.instance);
    }
}
