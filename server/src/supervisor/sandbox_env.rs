//! The environment a sandbox's processes share, whoever starts them: the attached secrets'
//! placeholders (and git's credential helper for `git_token` hosts), the placeholders of the provider logins the agent uses, the egress proxy's
//! variables (`HTTPS_PROXY` and kin, holding the agent's proxy identity: never logged) and the
//! variables that make clients trust the proxy's CA. The harness's launch
//! ([`super::shell`]) and the web terminal (`api::terminal`) both take it from here, so a
//! person in the terminal reaches exactly what the agent reaches (docs/proxy.md).

use sqlx::PgPool;

use super::ProxyAccess;
use crate::ids::AgentId;
use crate::logins::kinds::LoginKind;
use crate::sandbox::SandboxDriver;
use crate::store::agents::AgentRow;
use crate::store::provider_logins::LoginRow;

/// What [`shared`] found.
pub struct Shared {
    /// The variables, in the order they apply (later wins).
    pub env: Vec<(String, String)>,
    /// The provider logins whose placeholders `env` holds.
    pub logins: Vec<(LoginKind, LoginRow)>,
}

/// Why [`shared`] failed (the message is for the server's log, never for a client: the
/// proxy's address and identity are not theirs to see).
#[derive(Debug, thiserror::Error)]
pub enum EnvError {
    /// Reading the secrets or logins.
    #[error("database: {0}")]
    Db(#[from] sqlx::Error),
    /// The engine's proxy address.
    #[error("the engine's proxy address: {0}")]
    ProxyAddr(String),
    /// The agent's proxy identity.
    #[error("the proxy identity: {0}")]
    Identity(String),
}

/// The shared environment of `agent`'s sandbox processes.
pub async fn shared(
    pool: &PgPool,
    proxy: Option<&ProxyAccess>,
    driver: &dyn SandboxDriver,
    agent: &AgentRow,
) -> Result<Shared, EnvError> {
    // Attached secrets reach the sandbox as placeholders only; the proxy holds the values.
    let mut env = crate::secrets::sandbox_env(pool, agent.id).await?;
    // git answers its hosts' `git_token` secrets with their placeholders (the proxy swaps them).
    env.extend(crate::secrets::git::sandbox_env(pool, agent.id).await?);
    // So do its login user's provider logins (docs/logins.md).
    let logins = crate::logins::delivered(
        pool,
        crate::logins::Recipient::of(agent, crate::harness::account_logins(&agent.harness)),
    )
    .await?;
    env.extend(crate::logins::sandbox_env(agent.id, &logins));
    if let Some(proxy) = proxy {
        env.extend(proxy_env(pool, proxy, driver, agent.id).await?);
    }
    Ok(Shared { env, logins })
}

/// What a harness process of an agent is started with (the channel, folder and user aside).
#[derive(Debug, Clone)]
pub struct HarnessStart {
    /// The adapter's program (before any login wrapper), for the log.
    pub program: Option<String>,
    /// Program and arguments.
    pub argv: Vec<String>,
    /// The environment, in the order it applies (later wins).
    pub env: Vec<(String, String)>,
    /// The provider logins whose placeholders `env` holds.
    pub logins: Vec<(LoginKind, LoginRow)>,
}

/// The harness start of the agent in `context`, given its sandbox's shared environment: the
/// adapter's launch, the agent's own variables, then `shared`. Pure: the warm pool makes a
/// pooled harness's start with it too, so an agent that claims one can tell whether its own
/// start would have been the same (docs/design.md, "Pooled harnesses").
pub fn harness_start(context: &crate::harness::LaunchContext<'_>, shared: Shared) -> Result<HarnessStart, String> {
    let launch = match crate::harness::adapter(&context.agent.harness).map(|a| a.launch(context)) {
        Some(launch) => launch?,
        None => return Err("unknown harness".to_owned()),
    };
    let program = launch.argv.first().cloned();
    let mut env = crate::harness::environment(&launch, context.agent, context.home_dir);
    env.extend(shared.env);
    let argv = crate::logins::wrap_argv(launch.argv, &shared.logins);
    Ok(HarnessStart { program, argv, env, logins: shared.logins })
}

/// The proxy's variables and the CA trust variables (sandboxd installed the CA at start).
async fn proxy_env(
    pool: &PgPool,
    proxy: &ProxyAccess,
    driver: &dyn SandboxDriver,
    agent_id: AgentId,
) -> Result<Vec<(String, String)>, EnvError> {
    // The agent's engine may have a proxy address of its own (a remote engine's).
    let addr = driver.proxy_addr(agent_id).await.map_err(|e| EnvError::ProxyAddr(e.to_string()))?;
    let addr = addr.as_deref().unwrap_or(&proxy.addr);
    let mut env = crate::proxy_feed::sandbox_proxy_env(pool, &proxy.master_key, agent_id, addr)
        .await
        .map_err(|e| EnvError::Identity(e.to_string()))?;
    env.extend(agenthold_sandboxd::daemon::proxy_ca::trust_env());
    Ok(env)
}
