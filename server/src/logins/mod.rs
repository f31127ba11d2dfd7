//! Provider logins on the account (seed 003, "Account logins"; docs/logins.md): a user connects a
//! Claude Code or Codex sign-in once; every agent that uses that user's logins gets it when its
//! harness starts — as a placeholder in the variable the harness reads, the real value only in
//! the egress proxy's rules for the provider's hosts. This module owns which login reaches which
//! agent ([`chosen`], pure) and the two views of it the server needs: [`sandbox_env`]
//! (placeholders, for the harness's environment) and [`for_proxy`] (values, for the proxy feed).
//!
//! Rules (seed 003): an agent uses one user's logins (`agents.login_user_id`), delivered only
//! while that user is still a member of the agent's workspace; an API-key secret attached to the
//! agent for the same provider takes precedence; a login marked `connect_again` is not delivered.

pub mod asked;
pub mod chatgpt;
pub mod kinds;
pub mod methods;
pub mod probe;
pub mod refresh;

use sqlx::PgPool;
use uuid::Uuid;

use crate::ids::AgentId;
use crate::secret::Secret;
use crate::secrets::cipher::{self, OpenError, RowIdentity};
use crate::secrets::master_key::MasterKey;
use crate::secrets::{AttachedSecret, ForAgentError};
use crate::store;
use crate::store::agents::AgentRow;
use crate::store::provider_logins::{LoginRow, SealedLogin};
use kinds::LoginKind;

/// The placeholder an agent's sandbox holds for one of its login user's logins: derived from the
/// login's seed, the agent and the kind, so it is stable across harness starts, distinct per
/// sandbox (the proxy requires that) and changes when the login is connected again; shaped as the
/// harness expects the kind's value ([`LoginKind::placeholder_prefix`]: a Claude Code that sees
/// `sk-ant-oat…` treats it as a subscription token).
pub fn placeholder(seed: &str, agent_id: AgentId, kind: LoginKind) -> String {
    use sha2::Digest;
    let digest = sha2::Sha256::new()
        .chain_update(seed.as_bytes())
        .chain_update(agent_id.0.as_bytes())
        .chain_update(kind.as_str().as_bytes())
        .finalize();
    format!("{}agenthold-login-{}", kind.placeholder_prefix(), hex::encode(&digest[..20]))
}

/// Which logins reach a harness (pure): per provider, the first kind the adapter accepts that the
/// user has connected and that works (`ok`) — unless the agent has an API-key secret attached for
/// that provider's variables, which takes precedence.
pub fn chosen(accepted: &[LoginKind], connected: &[(LoginKind, bool)], attached_env: &[String]) -> Vec<LoginKind> {
    let mut providers_done: Vec<&str> = Vec::new();
    let mut picked = Vec::new();
    for kind in accepted {
        if providers_done.contains(&kind.provider()) {
            continue;
        }
        let secret_wins = accepted
            .iter()
            .filter(|k| k.provider() == kind.provider())
            .any(|k| attached_env.iter().any(|env| env == k.env_name()));
        if secret_wins {
            providers_done.push(kind.provider());
            continue;
        }
        if connected.iter().any(|(k, ok)| k == kind && *ok) {
            providers_done.push(kind.provider());
            picked.push(*kind);
        }
    }
    picked
}

/// The agent a delivery is for.
#[derive(Debug, Clone, Copy)]
pub struct Recipient {
    /// The agent.
    pub id: AgentId,
    /// Its workspace.
    pub workspace_id: Uuid,
    /// The login kinds its harness takes (`crate::harness::account_logins`).
    pub accepts: &'static [LoginKind],
    /// Whose logins it uses.
    pub login_user_id: Option<Uuid>,
}

impl Recipient {
    /// The agent, whose harness takes `accepts`.
    pub fn of(agent: &AgentRow, accepts: &'static [LoginKind]) -> Self {
        Self { id: agent.id, workspace_id: agent.workspace_id, accepts, login_user_id: agent.login_user_id }
    }
}

/// The logins that reach the agent's harness, with their sealed values (empty when it uses
/// nobody's, or its login user left its workspace).
async fn plan(pool: &PgPool, agent: Recipient) -> sqlx::Result<Vec<(LoginKind, SealedLogin)>> {
    let Some(user_id) = agent.login_user_id else { return Ok(Vec::new()) };
    if agent.accepts.is_empty() {
        return Ok(Vec::new());
    }
    let member = store::users::role_in(pool, user_id, agent.workspace_id).await?.is_some();
    if !member {
        return Ok(Vec::new());
    }
    let sealed = store::provider_logins::sealed_for_user(pool, user_id).await?;
    let attached: Vec<String> =
        crate::secrets::sandbox_env(pool, agent.id).await?.into_iter().map(|(env, _)| env).collect();
    Ok(plan_from(agent, member, sealed, &attached))
}

/// [`plan`] from what was read (pure): whether the login user is a member of the agent's
/// workspace, that user's sealed logins and the variables of the agent's attached secrets.
pub fn plan_from(
    agent: Recipient,
    member: bool,
    sealed: Vec<SealedLogin>,
    attached_env: &[String],
) -> Vec<(LoginKind, SealedLogin)> {
    if agent.login_user_id.is_none() || !member || agent.accepts.is_empty() {
        return Vec::new();
    }
    let sealed: Vec<SealedLogin> = sealed.into_iter().filter(|s| Some(s.row.user_id) == agent.login_user_id).collect();
    let connected: Vec<(LoginKind, bool)> =
        sealed.iter().filter_map(|s| LoginKind::parse(&s.row.kind).map(|k| (k, s.row.state == "ok"))).collect();
    let picked = chosen(agent.accepts, &connected, attached_env);
    sealed
        .into_iter()
        .filter_map(|s| LoginKind::parse(&s.row.kind).filter(|k| picked.contains(k)).map(|k| (k, s)))
        .collect()
}

/// The agent's login placeholders: (variable, placeholder) pairs; for a ChatGPT login the
/// placeholder `auth.json` ([`wrap_argv`] writes it). Never a value.
pub fn sandbox_env(agent_id: AgentId, delivered: &[(LoginKind, LoginRow)]) -> Vec<(String, String)> {
    delivered
        .iter()
        .map(|(kind, login)| {
            let value = match kind {
                LoginKind::ChatgptLogin => {
                    let marker = chatgpt::marker(&login.placeholder_seed, agent_id);
                    chatgpt::placeholder_auth_json(&login.public, &marker, chrono::Utc::now())
                }
                _ => placeholder(&login.placeholder_seed, agent_id, *kind),
            };
            (kind.env_name().to_owned(), value)
        })
        .collect()
}

/// Writes `~/.codex/auth.json` from the placeholder file in its variable (a ChatGPT login), keeping
/// a file that is not agenthold's as `auth.json.agenthold-backup`, then runs the harness.
const WRITE_CODEX_AUTH: &str = r#"f="$HOME/.codex/auth.json"; mkdir -p "$HOME/.codex" && chmod 700 "$HOME/.codex" || exit 1
if [ -f "$f" ] && ! grep -q agenthold-login "$f"; then cp -p "$f" "$f.agenthold-backup"; fi
rm -f "$f"; (umask 077; printf '%s' "$AGENTHOLD_CODEX_AUTH_JSON" > "$f") || exit 1
unset AGENTHOLD_CODEX_AUTH_JSON; exec "$@""#;

/// The harness's argv, wrapped to put the delivered logins' files in place first.
pub fn wrap_argv(argv: Vec<String>, delivered: &[(LoginKind, LoginRow)]) -> Vec<String> {
    if !delivered.iter().any(|(kind, _)| *kind == LoginKind::ChatgptLogin) {
        return argv;
    }
    let mut wrapped =
        vec!["/bin/sh".to_owned(), "-c".to_owned(), WRITE_CODEX_AUTH.to_owned(), "agenthold-login".to_owned()];
    wrapped.extend(argv);
    wrapped
}

/// The requests the proxy answers itself for the agent's sandbox: a ChatGPT login's token
/// refresh (`POST auth.openai.com/oauth/token`) gets the same placeholders back — only the server
/// refreshes, so however many sandboxes ask, none reaches the provider.
pub fn local_answers(agent_id: AgentId, delivered: &[(LoginKind, LoginRow)]) -> Vec<(String, String, String)> {
    delivered
        .iter()
        .filter(|(kind, _)| *kind == LoginKind::ChatgptLogin)
        .map(|(_, login)| {
            let marker = chatgpt::marker(&login.placeholder_seed, agent_id);
            let body = chatgpt::placeholder_token_answer(&login.public, &marker);
            (chatgpt::TOKEN_HOST.to_owned(), chatgpt::TOKEN_PATH.to_owned(), body)
        })
        .collect()
}

/// The logins the agent's harness gets (their placeholders: [`sandbox_env`]).
pub async fn delivered(pool: &PgPool, agent: Recipient) -> sqlx::Result<Vec<(LoginKind, LoginRow)>> {
    Ok(plan(pool, agent).await?.into_iter().map(|(kind, login)| (kind, login.row)).collect())
}

/// What the proxy needs of an agent's logins.
#[derive(Debug, Default)]
pub struct ForProxy {
    /// One injection per rule, with the value.
    pub secrets: Vec<AttachedSecret>,
    /// The requests the proxy answers itself: (host, path, body) ([`local_answers`]).
    pub answers: Vec<(String, String, String)>,
}

/// The agent's logins as the proxy needs them, from one read. A value that does not open fails
/// the call (the caller injects nothing for the agent).
pub async fn for_proxy(pool: &PgPool, key: &MasterKey, agent: Recipient) -> Result<ForProxy, ForAgentError> {
    for_proxy_from(key, agent.id, plan(pool, agent).await?)
}

/// [`for_proxy`] from the logins [`plan_from`] picked: their values opened, one injection per
/// rule, and the requests the proxy answers itself.
pub fn for_proxy_from(
    key: &MasterKey,
    agent_id: AgentId,
    planned: Vec<(LoginKind, SealedLogin)>,
) -> Result<ForProxy, ForAgentError> {
    let rows: Vec<(LoginKind, LoginRow)> = planned.iter().map(|(kind, login)| (*kind, login.row.clone())).collect();
    let answers = local_answers(agent_id, &rows);
    let mut out = Vec::new();
    for (kind, login) in planned {
        let mut value: Secret =
            cipher::open(key, RowIdentity::provider_login(login.row.user_id, login.row.id), &login.sealed)
                .map_err(|source: OpenError| ForAgentError::Open { secret_id: login.row.id, source })?;
        let placeholder = match kind {
            // The sealed value is the tokens; the proxy puts the access token in.
            LoginKind::ChatgptLogin => {
                let tokens: chatgpt::Tokens = serde_json::from_str(value.expose())
                    .map_err(|_| ForAgentError::Open { secret_id: login.row.id, source: OpenError::NotText })?;
                value = Secret::new(tokens.access_token);
                chatgpt::access_placeholder(&chatgpt::marker(&login.row.placeholder_seed, agent_id))
            }
            _ => placeholder(&login.row.placeholder_seed, agent_id, kind),
        };
        for rule in kind.rules() {
            out.push(AttachedSecret {
                secret_id: login.row.id,
                env_name: kind.env_name().to_owned(),
                placeholder: placeholder.clone(),
                rule,
                value: value.clone(),
            });
        }
    }
    Ok(ForProxy { secrets: out, answers })
}

#[cfg(test)]
mod tests {
    use super::*;
    use LoginKind::*;

    #[test]
    fn per_provider_the_first_working_kind_the_harness_takes() {
        let claude = [ClaudeSubscription, AnthropicApiKey];
        assert_eq!(chosen(&claude, &[(AnthropicApiKey, true), (ClaudeSubscription, true)], &[]), [ClaudeSubscription]);
        assert_eq!(chosen(&claude, &[(AnthropicApiKey, true), (ClaudeSubscription, false)], &[]), [AnthropicApiKey]);
        assert!(chosen(&claude, &[(OpenaiApiKey, true)], &[]).is_empty(), "not a kind the harness takes");
        let both = [ClaudeSubscription, AnthropicApiKey, ChatgptAccessToken, OpenaiApiKey];
        let connected = [(AnthropicApiKey, true), (OpenaiApiKey, true)];
        assert_eq!(chosen(&both, &connected, &[]), [AnthropicApiKey, OpenaiApiKey]);
    }

    #[test]
    fn an_attached_api_key_secret_takes_precedence_for_its_provider() {
        let both = [ClaudeSubscription, AnthropicApiKey, ChatgptAccessToken, OpenaiApiKey];
        let connected = [(ClaudeSubscription, true), (OpenaiApiKey, true)];
        assert_eq!(chosen(&both, &connected, &["ANTHROPIC_API_KEY".to_owned()]), [OpenaiApiKey]);
        assert_eq!(chosen(&both, &connected, &["OTHER".to_owned()]), [ClaudeSubscription, OpenaiApiKey]);
    }

    fn login(user_id: Uuid, kind: LoginKind, state: &str) -> SealedLogin {
        SealedLogin {
            row: LoginRow {
                id: Uuid::new_v4(),
                user_id,
                kind: kind.as_str().to_owned(),
                provider: kind.provider().to_owned(),
                state: state.to_owned(),
                placeholder_seed: "seed".to_owned(),
                connected_at: chrono::Utc::now(),
                refreshed_at: None,
                expires_at: None,
                failure: None,
                public: serde_json::Value::Null,
            },
            sealed: crate::store::sealed::Sealed { key_id: "k".to_owned(), nonce: Vec::new(), ciphertext: Vec::new() },
        }
    }

    #[test]
    fn a_plan_from_a_batch_read_takes_only_its_members_own_working_logins() {
        let (user, other) = (Uuid::new_v4(), Uuid::new_v4());
        let agent = Recipient {
            id: AgentId(Uuid::new_v4()),
            workspace_id: Uuid::new_v4(),
            accepts: &[ClaudeSubscription, AnthropicApiKey],
            login_user_id: Some(user),
        };
        let read = || {
            vec![
                login(other, ClaudeSubscription, "ok"),
                login(user, ClaudeSubscription, "connect_again"),
                login(user, AnthropicApiKey, "ok"),
            ]
        };
        let kinds = |planned: Vec<(LoginKind, SealedLogin)>| -> Vec<(LoginKind, Uuid)> {
            planned.into_iter().map(|(kind, login)| (kind, login.row.user_id)).collect()
        };
        assert_eq!(kinds(plan_from(agent, true, read(), &[])), [(AnthropicApiKey, user)], "its user's, working");
        assert!(plan_from(agent, false, read(), &[]).is_empty(), "not a member of the agent's workspace");
        assert!(plan_from(agent, true, read(), &["ANTHROPIC_API_KEY".to_owned()]).is_empty(), "a secret wins");
        let nobody = Recipient { login_user_id: None, ..agent };
        assert!(plan_from(nobody, true, read(), &[]).is_empty(), "uses nobody's logins");
    }

    #[test]
    fn placeholders_are_stable_per_agent_and_kind_and_change_with_the_seed() {
        let (a, b) = (AgentId(Uuid::new_v4()), AgentId(Uuid::new_v4()));
        let p = placeholder("seed", a, AnthropicApiKey);
        assert_eq!(p, placeholder("seed", a, AnthropicApiKey));
        assert_ne!(p, placeholder("seed", b, AnthropicApiKey));
        assert_ne!(p, placeholder("seed", a, ClaudeSubscription));
        assert_ne!(p, placeholder("other", a, AnthropicApiKey));
        assert!(
            p.starts_with("sk-ant-api03-agenthold-login-") && p.len() == "sk-ant-api03-agenthold-login-".len() + 40
        );
        assert!(placeholder("seed", a, ClaudeSubscription).starts_with("sk-ant-oat01-agenthold-login-"));
        assert!(placeholder("seed", a, OpenaiApiKey).starts_with("sk-agenthold-login-"));
        for kind in [ChatgptLogin, ChatgptAccessToken] {
            assert!(placeholder("seed", a, kind).starts_with("agenthold-login-"), "{kind:?}");
        }
    }
}
