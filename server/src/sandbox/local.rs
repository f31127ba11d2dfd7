//! The local driver: sandboxd as a plain child process of the server, with a home directory
//! under the data directory. **No isolation**: the harness runs as the server's user with the
//! server's file system. For development on machines without Docker and for fast tests; agents
//! on it are labelled `"isolated": false` in the API and a warning is logged at start.

use std::collections::HashMap;
use std::path::PathBuf;

use futures_util::FutureExt;
use futures_util::future::BoxFuture;
use parking_lot::Mutex;
use tokio::process::{Child, Command};

use super::{DriverError, SandboxDriver, SandboxSpec, SandboxStatus};
use crate::ids::AgentId;

/// The local driver.
pub struct LocalDriver {
    /// `<data dir>/sandboxes`.
    root: PathBuf,
    /// Directory holding the `sandboxd` and `fakeagent` binaries.
    bin_dir: PathBuf,
    /// sandboxd children started by this server process (reaped when stopped).
    children: Mutex<HashMap<AgentId, Child>>,
}

/// What `create` records for `start`.
#[derive(serde::Serialize, serde::Deserialize)]
struct LaunchFile {
    tunnel_url: String,
    token: String,
    #[serde(default)]
    tunnel_ca_pem: Option<String>,
}

impl LocalDriver {
    /// A driver keeping sandboxes under `data_dir/sandboxes`.
    pub fn new(data_dir: PathBuf, bin_dir: PathBuf) -> Self {
        tracing::warn!("the local sandbox driver runs harnesses WITHOUT isolation, as the server's own user");
        Self { root: data_dir.join("sandboxes"), bin_dir, children: Mutex::default() }
    }

    fn dir(&self, agent_id: AgentId) -> PathBuf {
        self.root.join(agent_id.to_string())
    }

    fn pid_file(&self, agent_id: AgentId) -> PathBuf {
        self.dir(agent_id).join("sandboxd.pid")
    }

    fn running_pid(&self, agent_id: AgentId) -> Option<u32> {
        let pid: u32 = std::fs::read_to_string(self.pid_file(agent_id)).ok()?.trim().parse().ok()?;
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // A zombie (state Z after the command name) no longer runs.
        let state = stat.rsplit_once(") ").and_then(|(_, rest)| rest.chars().next());
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
        let is_sandboxd = cmdline.split(|b| *b == 0).next().is_some_and(|arg0| arg0.ends_with(b"sandboxd"));
        (state != Some('Z') && is_sandboxd).then_some(pid)
    }

    fn reap_finished(&self) {
        self.children.lock().retain(|_, child| matches!(child.try_wait(), Ok(None)));
    }
}

fn io(context: &str, error: std::io::Error) -> DriverError {
    DriverError::Engine(format!("{context}: {error}"))
}

impl SandboxDriver for LocalDriver {
    fn kind(&self) -> &'static str {
        "local"
    }

    /// Runs the command on the host (the local driver isolates nothing) with a cleared
    /// environment: `PATH`, then `env`; killed when the caller stops waiting.
    fn run(
        &self,
        agent_id: AgentId,
        argv: Vec<String>,
        env: Vec<(String, String)>,
    ) -> BoxFuture<'_, Result<super::RunOutput, DriverError>> {
        async move {
            let (program, args) =
                argv.split_first().ok_or_else(|| DriverError::Engine("an empty command".to_owned()))?;
            let mut command = tokio::process::Command::new(program);
            command
                .args(args)
                .env_clear()
                .env("PATH", std::env::var_os("PATH").unwrap_or_default())
                .envs(env)
                .current_dir(self.home_dir(agent_id))
                .stdin(std::process::Stdio::null())
                .kill_on_drop(true);
            let done = command.output().await.map_err(|e| io("running the command", e))?;
            let mut ran = super::RunOutput { exit_code: done.status.code().map(i64::from), output: String::new() };
            ran.push(&done.stdout);
            ran.push(&done.stderr);
            Ok(ran)
        }
        .boxed()
    }

    fn isolated(&self) -> bool {
        false
    }

    fn home_dir(&self, agent_id: AgentId) -> String {
        self.dir(agent_id).join("home").to_string_lossy().into_owned()
    }

    fn sandbox_user(&self) -> Option<String> {
        None
    }

    fn tools_dir(&self) -> String {
        self.bin_dir.to_string_lossy().into_owned()
    }

    fn create(&self, spec: SandboxSpec) -> BoxFuture<'_, Result<String, DriverError>> {
        async move {
            let dir = self.dir(spec.agent_id);
            tokio::fs::create_dir_all(dir.join("home")).await.map_err(|e| io("creating the sandbox", e))?;
            let launch = LaunchFile {
                tunnel_url: spec.tunnel_url,
                token: spec.token.expose().to_owned(),
                tunnel_ca_pem: spec.tunnel_ca_pem,
            };
            let text = serde_json::to_vec(&launch).map_err(|e| DriverError::Engine(e.to_string()))?;
            let path = dir.join("launch.json");
            tokio::fs::write(&path, text).await.map_err(|e| io("writing the launch file", e))?;
            set_private(&path).await?;
            Ok(dir.to_string_lossy().into_owned())
        }
        .boxed()
    }

    fn start(&self, agent_id: AgentId) -> BoxFuture<'_, Result<(), DriverError>> {
        async move {
            self.reap_finished();
            if self.running_pid(agent_id).is_some() {
                return Ok(());
            }
            let dir = self.dir(agent_id);
            let launch =
                tokio::fs::read(dir.join("launch.json")).await.map_err(|e| io("reading the launch file", e))?;
            let launch: LaunchFile = serde_json::from_slice(&launch).map_err(|e| DriverError::Engine(e.to_string()))?;
            let log = std::fs::File::create(dir.join("sandboxd.log")).map_err(|e| io("opening the log", e))?;
            let log_err = log.try_clone().map_err(|e| io("opening the log", e))?;
            let mut command = Command::new(self.bin_dir.join("sandboxd"));
            command
                .env_clear()
                .env("PATH", std::env::var("PATH").unwrap_or_else(|_| "/usr/bin:/bin".to_owned()))
                .env("HOME", dir.join("home"))
                .env("AGENTHOLD_TUNNEL_URL", launch.tunnel_url)
                .env("AGENTHOLD_SANDBOX_TOKEN", launch.token);
            if let Some(pem) = &launch.tunnel_ca_pem {
                command.env("AGENTHOLD_TUNNEL_CA_PEM", pem);
            }
            let child = command
                .current_dir(dir.join("home"))
                .stdin(std::process::Stdio::null())
                .stdout(log)
                .stderr(log_err)
                .process_group(0)
                .spawn()
                .map_err(|e| io("starting sandboxd", e))?;
            if let Some(pid) = child.id() {
                tokio::fs::write(self.pid_file(agent_id), pid.to_string())
                    .await
                    .map_err(|e| io("writing the pid file", e))?;
            }
            self.children.lock().insert(agent_id, child);
            Ok(())
        }
        .boxed()
    }

    fn stop(&self, agent_id: AgentId) -> BoxFuture<'_, Result<(), DriverError>> {
        async move {
            if let Some(pid) = self.running_pid(agent_id) {
                // The whole process group: sandboxd and everything it started.
                kill_group(pid);
            }
            let child = self.children.lock().remove(&agent_id);
            if let Some(mut child) = child {
                let _ = child.wait().await;
            }
            let _ = tokio::fs::remove_file(self.pid_file(agent_id)).await;
            Ok(())
        }
        .boxed()
    }

    fn destroy(&self, agent_id: AgentId) -> BoxFuture<'_, Result<(), DriverError>> {
        async move {
            self.stop(agent_id).await?;
            match tokio::fs::remove_dir_all(self.dir(agent_id)).await {
                Ok(()) => Ok(()),
                Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(()),
                Err(error) => Err(io("removing the sandbox", error)),
            }
        }
        .boxed()
    }

    fn remove_container(&self, agent_id: AgentId) -> BoxFuture<'_, Result<(), DriverError>> {
        // The "container" is the sandboxd process; the launch file is made again by `create`.
        self.stop(agent_id)
    }

    fn oom_killed(&self, _agent_id: AgentId) -> BoxFuture<'_, Result<bool, DriverError>> {
        Box::pin(std::future::ready(Ok(false)))
    }

    fn status(&self, agent_id: AgentId) -> BoxFuture<'_, Result<SandboxStatus, DriverError>> {
        async move {
            self.reap_finished();
            if self.running_pid(agent_id).is_some() {
                Ok(SandboxStatus::Running)
            } else if tokio::fs::try_exists(self.dir(agent_id).join("launch.json")).await.unwrap_or(false) {
                Ok(SandboxStatus::Stopped)
            } else {
                Ok(SandboxStatus::Missing)
            }
        }
        .boxed()
    }
}

/// SIGKILL to the process group `pgid` (never to "all processes": a pid of 0 is refused).
pub fn kill_group(pgid: u32) {
    let pid = i32::try_from(pgid).ok().and_then(rustix::process::Pid::from_raw);
    if let Some(pid) = pid {
        let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
    }
}

async fn set_private(path: &std::path::Path) -> Result<(), DriverError> {
    use std::os::unix::fs::PermissionsExt;
    tokio::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
        .await
        .map_err(|e| io("protecting the launch file", e))
}
