//! The shell's side of an agent's repository ([`agenthold_core::repo`]): before its harness
//! starts, the clone runs in the sandbox (the driver's [`crate::sandbox::SandboxDriver::run`]) with
//! the harness's own environment, so it goes through the egress proxy and git's credential
//! helper answers a `git_token` secret's placeholder for the host. The state it reaches
//! (`cloning`, then `cloned` or `failed` with the reason) is stored for the agent's view. A
//! failed clone does not stop the harness: it starts in the home, and the clone is tried again
//! at the harness's next start (after a secret is attached, for one).

use std::time::Duration;

use agenthold_core::repo::{Repo, failure_reason};

use super::Deps;
use crate::ids::AgentId;
use crate::store;

/// How long a clone may take before it counts as failed.
pub const CLONE_TIMEOUT: Duration = Duration::from_secs(300);

/// Clones the agent's repository if it has one not cloned yet; the folder sessions start in
/// when it is there (`None`: no repository, or it failed: the home).
pub(super) async fn prepare(deps: &Deps, agent_id: AgentId, home: &str, env: &[(String, String)]) -> Option<String> {
    let row = match store::repos::get(&deps.pool, agent_id).await {
        Ok(row) => row?,
        Err(error) => {
            tracing::error!(%error, agent.id = %agent_id, "reading the agent's repository; starting in the home");
            return None;
        }
    };
    let repo = match Repo::parse(&row.url, row.branch.as_deref()) {
        Ok(repo) => repo,
        Err(message) => {
            record(deps, agent_id, "failed", Some(&message)).await;
            return None;
        }
    };
    let path = repo.path_in(home);
    if row.state == "cloned" {
        return Some(path);
    }
    record(deps, agent_id, "cloning", None).await;
    let mut env = env.to_vec();
    // A clone never waits for a person to type a password.
    env.push(("GIT_TERMINAL_PROMPT".to_owned(), "0".to_owned()));
    let started = std::time::Instant::now();
    let ran = tokio::time::timeout(CLONE_TIMEOUT, deps.driver.run(agent_id, repo.clone_argv(home), env)).await;
    let failure = match ran {
        Ok(Ok(out)) if out.exit_code == Some(0) => None,
        Ok(Ok(out)) => Some(failure_reason(out.exit_code, &out.output)),
        Ok(Err(error)) => Some(format!("the clone could not run: {error}")),
        Err(_) => Some(format!("git clone did not finish within {} s", CLONE_TIMEOUT.as_secs())),
    };
    let duration_ms = started.elapsed().as_millis();
    match failure {
        None => {
            tracing::info!(agent.id = %agent_id, duration_ms, "cloned the agent's repository");
            record(deps, agent_id, "cloned", None).await;
            Some(path)
        }
        Some(reason) => {
            tracing::warn!(agent.id = %agent_id, duration_ms, %reason, "the agent's repository did not clone; starting in the home");
            record(deps, agent_id, "failed", Some(&reason)).await;
            None
        }
    }
}

async fn record(deps: &Deps, agent_id: AgentId, state: &str, error: Option<&str>) {
    if let Err(e) = store::repos::set_state(&deps.pool, agent_id, state, error).await {
        tracing::error!(error = %e, agent.id = %agent_id, state, "storing the repository's state");
    }
}
