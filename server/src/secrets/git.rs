//! git in a sandbox, configured at run time for the agent's `git_token` secrets: for each, a
//! credential helper scoped to `https://<host>` answers git with the secret's username and its
//! **placeholder** as password. git sends them as HTTP Basic; the egress proxy, which holds the
//! value, decodes nothing: it compares the whole `Authorization` header with the Basic encoding
//! of `<username>:<placeholder>` and puts the Basic encoding of `<username>:<value>` in its place
//! (docs/proxy.md, "git tokens"). The configuration travels in the environment of the harness,
//! the terminal and the repository's clone (`GIT_CONFIG_COUNT`, `GIT_CONFIG_KEY_<n>`,
//! `GIT_CONFIG_VALUE_<n>`: git 2.31 and later), so no file in the image or the home is written and
//! the agent's own `~/.gitconfig` stays its own.

use sqlx::PgPool;

use super::presets::{self, InjectionRule};
use crate::ids::AgentId;
use crate::store;

/// What git in the sandbox answers for one host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GitCredential {
    /// The git server (a DNS name).
    pub host: String,
    /// The HTTP Basic username.
    pub username: String,
    /// The placeholder git sends as password.
    pub placeholder: String,
}

impl GitCredential {
    /// The credential of an attached secret whose rule is a `git_token` one (Basic on port 443,
    /// every path), `None` for any other secret.
    pub fn of(rule: &InjectionRule, placeholder: &str) -> Option<Self> {
        let username = presets::basic_username(&rule.format)?;
        let placeholder_ok =
            !placeholder.is_empty() && placeholder.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-');
        (rule.port == 443 && rule.path_prefix == "/" && rule.header == "authorization" && placeholder_ok).then(|| {
            Self { host: rule.host.clone(), username: username.to_owned(), placeholder: placeholder.to_owned() }
        })
    }
}

/// The environment that configures git for `credentials` (empty for none). For each host, the
/// helper list is emptied first (a helper the image configured never sees the host), then one
/// shell helper prints the username and the placeholder on `get` (and nothing on `store` or
/// `erase`). Usernames and placeholders hold no quote, `$` or `\` (checked where they are made),
/// so the single-quoted words are literal.
pub fn env(credentials: &[GitCredential]) -> Vec<(String, String)> {
    let mut pairs: Vec<(String, String)> = Vec::new();
    for credential in credentials {
        let key = format!("credential.https://{}.helper", credential.host);
        pairs.push((key.clone(), String::new()));
        pairs.push((
            key,
            format!(
                "!f() {{ test \"$1\" = get && printf 'username=%s\\npassword=%s\\n' '{}' '{}'; }}; f",
                credential.username, credential.placeholder
            ),
        ));
    }
    if pairs.is_empty() {
        return Vec::new();
    }
    let mut env = vec![("GIT_CONFIG_COUNT".to_owned(), pairs.len().to_string())];
    for (index, (key, value)) in pairs.into_iter().enumerate() {
        env.push((format!("GIT_CONFIG_KEY_{index}"), key));
        env.push((format!("GIT_CONFIG_VALUE_{index}"), value));
    }
    env
}

/// The git credentials of the agent's attached `git_token` secrets (placeholders only), by host;
/// one per host (the first variable's, when two secrets name the same host).
pub async fn credentials(pool: &PgPool, agent_id: AgentId) -> sqlx::Result<Vec<GitCredential>> {
    let rows = store::secrets::sealed_for_agent(pool, agent_id).await?;
    let mut credentials: Vec<GitCredential> = Vec::new();
    for row in rows {
        if let Some(credential) = GitCredential::of(&row.rule, &row.placeholder)
            && !credentials.iter().any(|c| c.host == credential.host)
        {
            credentials.push(credential);
        }
    }
    Ok(credentials)
}

/// [`env`] for the agent's attached `git_token` secrets.
pub async fn sandbox_env(pool: &PgPool, agent_id: AgentId) -> sqlx::Result<Vec<(String, String)>> {
    Ok(env(&credentials(pool, agent_id).await?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_git_host_gets_a_reset_and_a_helper_that_answers_the_placeholder() {
        let rule = presets::git_rule("git.example.com", None).expect("rule");
        let credential = GitCredential::of(&rule, "agenthold-git-00ff").expect("a git rule");
        assert_eq!(credential.username, "x-access-token");
        let env = env(&[credential]);
        let get = |name: &str| env.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str());
        assert_eq!(get("GIT_CONFIG_COUNT"), Some("2"));
        assert_eq!(get("GIT_CONFIG_KEY_0"), Some("credential.https://git.example.com.helper"));
        assert_eq!(get("GIT_CONFIG_VALUE_0"), Some(""));
        assert_eq!(get("GIT_CONFIG_KEY_1"), Some("credential.https://git.example.com.helper"));
        let helper = get("GIT_CONFIG_VALUE_1").expect("helper");
        assert!(helper.starts_with('!') && helper.contains("'x-access-token' 'agenthold-git-00ff'"), "{helper}");
        assert!(super::env(&[]).is_empty());
    }

    #[test]
    fn other_secrets_configure_nothing() {
        let anthropic = presets::Preset::Anthropic.rule().expect("rule");
        assert!(GitCredential::of(&anthropic, "sk-ant-agenthold-00").is_none());
        let rule = presets::git_rule("git.example.com", None).expect("rule");
        assert!(GitCredential::of(&rule, "it's").is_none(), "a placeholder that is not a plain word");
    }

    /// The helper really answers git as documented (needs `git` and `sh`; skipped without git).
    #[test]
    fn git_runs_the_helper() {
        if std::process::Command::new("git").arg("--version").output().is_err() {
            return;
        }
        let rule = presets::git_rule("git.example.com", Some("oauth2")).expect("rule");
        let credential = GitCredential::of(&rule, "agenthold-git-abc123").expect("git");
        let mut child = std::process::Command::new("git")
            .args(["credential", "fill"])
            .envs(env(&[credential]))
            .env("GIT_TERMINAL_PROMPT", "0")
            .env("HOME", std::env::temp_dir())
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("git");
        {
            use std::io::Write as _;
            let mut stdin = child.stdin.take().expect("stdin");
            stdin.write_all(b"protocol=https\nhost=git.example.com\npath=org/repo.git\n\n").expect("write");
        }
        let out = child.wait_with_output().expect("git credential fill");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("username=oauth2\n") && text.contains("password=agenthold-git-abc123\n"), "{text}");
    }
}
