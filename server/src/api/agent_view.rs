//! An agent as the API shows it: [`Agent`] (in lists and creation answers) — its settings, the
//! secrets attached to it (names and presets, never values or placeholders), its egress
//! allow-list, its sandbox's observed [`AgentState`] beside the desired one — and [`AgentDetail`]
//! (one agent), which adds what its harness advertised, the login methods it offers and whose
//! provider logins it uses.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;
use uuid::Uuid;

use super::error::ApiError;
use crate::ids::AgentId;
use crate::logins::methods::LoginMethod;
use crate::proxy_feed::egress::Egress;
use crate::secrets::validate;
use crate::state::AppState;
use crate::store;
use crate::store::agents::AgentRow;
use crate::store::proxy_identities::AgentEgress;
use crate::store::secrets::Attachment;
use crate::supervisor::core::Observed;

/// An agent.
#[derive(Debug, Serialize, ToSchema)]
pub struct Agent {
    /// Its id.
    id: AgentId,
    /// Its workspace.
    workspace_id: Uuid,
    /// Who made it (`null` once that user is gone).
    #[schema(required = true)]
    created_by: Option<Uuid>,
    /// Its name, unique in the workspace.
    name: String,
    /// Its harness (`claude-code`, `codex`, `opencode`, `command`, `fake`).
    harness: String,
    /// The command of a `command` harness.
    #[schema(required = true)]
    command: Option<Vec<String>>,
    /// The login method its harness is signed in with when it asks (`null`: none named; the
    /// adapter's own, else the only advertised method whose key the sandbox holds).
    #[schema(required = true)]
    auth_method: Option<String>,
    /// The model (`null`: the harness's own).
    #[schema(required = true)]
    model: Option<String>,
    /// Plain environment variables (credentials go in secrets).
    env: BTreeMap<String, String>,
    /// The sandbox image.
    image: String,
    /// The sandbox driver (`docker`, `kubernetes`, `local`).
    driver: String,
    /// The Docker engine its sandbox lives on, for life: `local` (the server's own) or a name
    /// from `AGENTHOLD_DOCKER_ENGINES` (docs/engines.md).
    engine: String,
    /// Whether its sandbox is confined to its own network.
    isolated: bool,
    /// The permission posture in effect, as `posture` (kept for clients that read this name;
    /// it once always read `auto-approve`).
    permission_policy: &'static str,
    /// The permission posture in effect (its own or the server's).
    posture: &'static str,
    /// Its own posture (`null`: the server's default).
    #[schema(required = true)]
    own_posture: Option<String>,
    /// The policy of a guarded agent.
    #[schema(required = true)]
    policy: Option<Value>,
    /// Its resource limits.
    limits: AgentLimits,
    /// Whose provider logins it uses.
    #[schema(required = true)]
    login_user_id: Option<Uuid>,
    /// When someone signed in inside its sandbox (a login method run in its terminal).
    #[schema(required = true)]
    sandbox_login_at: Option<chrono::DateTime<chrono::Utc>>,
    /// `awake` or `asleep`: what was last asked for (a wake, a sleep).
    desired_state: String,
    /// What its sandbox is doing, as the server observes it.
    state: AgentState,
    /// Why it is in `error` (`null` otherwise).
    #[schema(required = true)]
    state_reason: Option<String>,
    /// When it was made.
    created_at: chrono::DateTime<chrono::Utc>,
    /// The secrets attached to it.
    secrets: Vec<AttachedSecret>,
    /// Whether credentials may sit inside its sandbox (a credential-looking plain env variable,
    /// or a login made in its terminal).
    credentials_inside_sandbox: bool,
    /// What the sandbox may reach besides its secrets' hosts (in force: its own list, or its
    /// workspace's default).
    egress: Egress,
    /// True when `egress` is its workspace's default, which it follows (it has no list of its
    /// own); false when it has its own.
    egress_inherited: bool,
    /// The repository it was made for, and how its clone went (`null`: none).
    #[schema(required = true)]
    repo: Option<RepoView>,
}

/// An agent's repository (docs/api.md, "An agent for a repository").
#[derive(Debug, Serialize, ToSchema)]
pub struct RepoView {
    /// `https://…`.
    url: String,
    /// The branch cloned (`null`: the remote's default).
    #[schema(required = true)]
    branch: Option<String>,
    /// The folder of the home it is cloned into; sessions start there once it is cloned.
    path: String,
    /// `pending` (until the first wake), `cloning`, `cloned` or `failed`.
    state: String,
    /// Why the clone failed (`failed` only); it is tried again at the harness's next start.
    #[schema(required = true)]
    error: Option<String>,
    /// When the state last changed.
    updated_at: chrono::DateTime<chrono::Utc>,
}

/// An agent's sandbox as observed (docs/api.md, "Agent states").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum AgentState {
    /// Being started, or waiting for its sandbox to connect (again).
    Starting,
    /// Its sandbox is connected.
    Awake,
    /// Being put to sleep or deleted.
    Stopping,
    /// Nothing runs (its home is kept).
    Asleep,
    /// Its last start or run failed (`state_reason` says why); the next prompt or wake tries again.
    Error,
}

/// The API's view of a supervisor's observation.
fn observed_state(observed: Observed) -> (AgentState, Option<String>) {
    match observed {
        Observed::Starting => (AgentState::Starting, None),
        Observed::Awake => (AgentState::Awake, None),
        Observed::Stopping => (AgentState::Stopping, None),
        Observed::Asleep => (AgentState::Asleep, None),
        Observed::Error(reason) => (AgentState::Error, Some(reason)),
    }
}

/// An agent's resource limits.
#[derive(Debug, Serialize, ToSchema)]
pub struct AgentLimits {
    /// CPUs.
    cpus: f64,
    /// Memory, MiB.
    memory_mib: i32,
    /// Processes.
    pids: i32,
    /// Disk space, MiB, of the sandbox's home and of its writable layer, each (its own, or the
    /// server's default).
    disk_mib: i32,
    /// Which of those its engine enforces (`null`: not known yet, the engine was not asked).
    #[schema(required = true)]
    disk_enforced: Option<DiskEnforced>,
    /// Seconds of activity a turn may take (`null`: the server's limit).
    #[schema(required = true)]
    turn_seconds: Option<i32>,
    /// Seconds idle before it is put to sleep (0: never; `null`: the server's setting).
    #[schema(required = true)]
    auto_sleep_secs: Option<i32>,
}

/// Which disk limits an agent's engine enforces (docs/security.md, "Disk").
#[derive(Debug, Serialize, ToSchema)]
pub struct DiskEnforced {
    /// The home's size.
    home: bool,
    /// The writable layer's size (the files outside the home).
    writable_layer: bool,
    /// Why one is not enforced (`null` when both are).
    #[schema(required = true)]
    note: Option<String>,
}

/// A secret attached to an agent (never its value or placeholder).
#[derive(Debug, Serialize, ToSchema)]
pub struct AttachedSecret {
    /// The environment variable the sandbox sees it under.
    env_name: String,
    /// The secret.
    secret_id: Uuid,
    /// Its name.
    secret_name: String,
    /// Its preset.
    preset: String,
}

impl From<&Attachment> for AttachedSecret {
    fn from(a: &Attachment) -> Self {
        Self {
            env_name: a.env_name.clone(),
            secret_id: a.secret_id,
            secret_name: a.secret_name.clone(),
            preset: a.preset.clone(),
        }
    }
}

/// One agent, with what its running harness advertised and its logins.
#[derive(Debug, Serialize, ToSchema)]
pub struct AgentDetail {
    /// The agent.
    #[serde(flatten)]
    agent: Agent,
    /// How one can sign in inside its sandbox.
    login_methods: Vec<LoginMethod>,
    /// Whose provider logins it uses and their state (`null`: nobody's).
    #[schema(required = true)]
    logins: Option<AgentLogins>,
    /// The running harness's `initialize` answer (capabilities, auth methods, agent info) as it
    /// sent it; `null` while no harness runs.
    #[schema(required = true)]
    advertised: Option<Value>,
}

/// Whose provider logins an agent uses and their state for its harness (docs/logins.md).
#[derive(Debug, Serialize, ToSchema)]
pub struct AgentLogins {
    /// Whose.
    user_id: Uuid,
    /// The kinds delivered to its sandbox.
    delivered: Vec<&'static str>,
    /// Kinds it would use that need connecting again.
    connect_again: Vec<String>,
}

/// An agent with the secrets attached to it and its egress allow-list (`attachments` and
/// `egress` may hold other agents' too).
pub fn agent_view(
    agent: &AgentRow,
    state: &AppState,
    attachments: &[Attachment],
    egress: &[(Uuid, AgentEgress)],
    repos: &[store::repos::RepoRow],
) -> Agent {
    let home_dir = state.driver.home_dir(agent.id);
    let repo = repos.iter().find(|r| r.agent_id == agent.id.0).map(|r| RepoView {
        url: r.url.clone(),
        branch: r.branch.clone(),
        path: format!("{}/{}", home_dir.trim_end_matches('/'), r.dir),
        state: r.state.clone(),
        error: r.error.clone(),
        updated_at: r.updated_at,
    });
    let egress = egress.iter().find(|(id, _)| *id == agent.id.0).map(|(_, e)| e.clone()).unwrap_or_default();
    let secrets = attachments.iter().filter(|a| a.agent_id == agent.id.0).map(AttachedSecret::from).collect();
    // Agents made before credential-looking names were refused may still hold one in clear.
    // ... or someone signed in inside its sandbox (a login method run in its terminal).
    let credentials_inside_sandbox =
        agent.env.iter().any(|(name, _)| validate::looks_like_credential(name)) || agent.sandbox_login_at.is_some();
    let (observed, state_reason) = observed_state(state.supervisors.observed(agent.id));
    let posture = state.postures().of(agent).map(|p| p.as_str()).unwrap_or("forbidden");
    Agent {
        id: agent.id,
        workspace_id: agent.workspace_id,
        created_by: agent.created_by,
        name: agent.name.clone(),
        harness: agent.harness.clone(),
        command: agent.command.clone(),
        auth_method: agent.auth_method.clone(),
        model: agent.model.clone(),
        env: agent.env.iter().cloned().collect(),
        image: agent.image.clone(),
        driver: agent.driver.clone(),
        engine: agent.engine.clone(),
        isolated: agent.driver != "local" && state.driver.isolated(),
        permission_policy: posture,
        posture,
        own_posture: agent.posture.clone(),
        policy: agent.policy.clone(),
        limits: AgentLimits {
            cpus: agent.cpus,
            memory_mib: agent.memory_mib,
            pids: agent.pids_limit,
            disk_mib: agent.disk_mib.unwrap_or_else(|| state.config.default_disk_mib()),
            disk_enforced: state.driver.disk_enforcement(&agent.engine).map(|e| DiskEnforced {
                home: e.home,
                writable_layer: e.writable_layer,
                note: e.note,
            }),
            turn_seconds: agent.turn_timeout_secs,
            auto_sleep_secs: agent.auto_sleep_secs,
        },
        login_user_id: agent.login_user_id,
        sandbox_login_at: agent.sandbox_login_at,
        desired_state: agent.desired_state.clone(),
        state: observed,
        state_reason,
        created_at: agent.created_at,
        secrets,
        credentials_inside_sandbox,
        egress: Egress::from(egress.row),
        egress_inherited: egress.inherited,
        repo,
    }
}

/// One agent in full, reading its attached secrets, its egress allow-list, what its running
/// harness advertised and its logins.
pub async fn agent_detail(state: &AppState, agent: &AgentRow) -> Result<AgentDetail, ApiError> {
    let attachments = store::secrets::attachments(&state.pool, &[agent.id.0]).await?;
    let egress = store::proxy_identities::egress(&state.pool, &[agent.id.0]).await?;
    let repos = store::repos::for_agents(&state.pool, &[agent.id.0]).await?;
    let advertised = store::sandboxes::get(&state.pool, agent.id).await?.and_then(|row| row.harness_init);
    let home_dir = state.driver.home_dir(agent.id);
    let login_methods = crate::harness::login_methods(agent, advertised.as_ref(), &state.driver.tools_dir(), &home_dir);
    Ok(AgentDetail {
        agent: agent_view(agent, state, &attachments, &egress, &repos),
        login_methods,
        logins: logins_view(state, agent).await?,
        advertised,
    })
}

/// Whose provider logins the agent uses and their state for its harness: the kinds delivered,
/// and `connect_again` when one it would use needs connecting again (docs/logins.md).
async fn logins_view(state: &AppState, agent: &AgentRow) -> Result<Option<AgentLogins>, ApiError> {
    let Some(user_id) = agent.login_user_id else { return Ok(None) };
    let takes = crate::harness::account_logins(&agent.harness);
    let delivered = crate::logins::delivered(&state.pool, crate::logins::Recipient::of(agent, takes)).await?;
    let logins = store::provider_logins::list_for_user(&state.pool, user_id).await?;
    let connect_again = logins
        .iter()
        .filter(|l| l.state == "connect_again")
        .filter(|l| crate::logins::kinds::LoginKind::parse(&l.kind).is_some_and(|k| takes.contains(&k)))
        .map(|l| l.kind.clone())
        .collect();
    Ok(Some(AgentLogins {
        user_id,
        delivered: delivered.iter().map(|(kind, _)| kind.as_str()).collect(),
        connect_again,
    }))
}
