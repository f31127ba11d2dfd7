//! What can be connected as a provider login (seed 003's table), and how each reaches a harness:
//! the variable that holds a placeholder in the sandbox, and where the egress proxy puts the real
//! value. Pure data; which harness takes which kind is its adapter's (`Profile::account_logins`).

use serde::{Deserialize, Serialize};

use crate::secrets::presets::InjectionRule;

/// A kind of provider login.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LoginKind {
    /// The token `claude setup-token` prints (Claude Pro/Max, valid for a year).
    ClaudeSubscription,
    /// An Anthropic API key.
    AnthropicApiKey,
    /// A ChatGPT login: the `auth.json` `codex login` writes (tokens the server refreshes).
    ChatgptLogin,
    /// A ChatGPT access token (`at-…`), for Codex.
    ChatgptAccessToken,
    /// An OpenAI API key, for Codex.
    OpenaiApiKey,
}

/// Every kind, in the order the API lists them.
pub const ALL: &[LoginKind] = &[
    LoginKind::ClaudeSubscription,
    LoginKind::AnthropicApiKey,
    LoginKind::ChatgptLogin,
    LoginKind::ChatgptAccessToken,
    LoginKind::OpenaiApiKey,
];

/// The longest value accepted (an `auth.json` holds three JWTs).
pub const MAX_VALUE_BYTES: usize = 64 * 1024;

/// The longest key or token accepted.
pub const MAX_TOKEN_BYTES: usize = 4096;

impl LoginKind {
    /// As stored and in the API.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ClaudeSubscription => "claude_subscription",
            Self::AnthropicApiKey => "anthropic_api_key",
            Self::ChatgptLogin => "chatgpt_login",
            Self::ChatgptAccessToken => "chatgpt_access_token",
            Self::OpenaiApiKey => "openai_api_key",
        }
    }

    /// From its name.
    pub fn parse(name: &str) -> Option<Self> {
        ALL.iter().copied().find(|kind| kind.as_str() == name)
    }

    /// Whose API it opens.
    pub fn provider(self) -> &'static str {
        match self {
            Self::ClaudeSubscription | Self::AnthropicApiKey => "anthropic",
            Self::ChatgptLogin | Self::ChatgptAccessToken | Self::OpenaiApiKey => "openai",
        }
    }

    /// The variable the harness reads it from (it holds a placeholder in the sandbox); a ChatGPT
    /// login reaches Codex as `~/.codex/auth.json` instead (`logins::chatgpt`), written from this
    /// variable at the harness's start.
    pub fn env_name(self) -> &'static str {
        match self {
            Self::ClaudeSubscription => "CLAUDE_CODE_OAUTH_TOKEN",
            Self::AnthropicApiKey => "ANTHROPIC_API_KEY",
            Self::ChatgptLogin => "AGENTHOLD_CODEX_AUTH_JSON",
            Self::ChatgptAccessToken => "CODEX_ACCESS_TOKEN",
            Self::OpenaiApiKey => "OPENAI_API_KEY",
        }
    }

    /// What a placeholder of this kind starts with, so a harness that checks the shape of its
    /// credential takes it for what it stands for (the value's own prefix, [`Self::check_shape`]).
    /// A ChatGPT login's placeholders are tokens inside an `auth.json`; an access token has no
    /// fixed prefix.
    pub fn placeholder_prefix(self) -> &'static str {
        match self {
            Self::ClaudeSubscription => "sk-ant-oat01-",
            Self::AnthropicApiKey => "sk-ant-api03-",
            Self::OpenaiApiKey => "sk-",
            Self::ChatgptLogin | Self::ChatgptAccessToken => "",
        }
    }

    /// Where the proxy puts the value: these hosts, paths and headers only (each path prefix as
    /// narrow as the harness's calls allow).
    pub fn rules(self) -> Vec<InjectionRule> {
        let rule = |host: &str, path_prefix: &str, header: &str, format: &str| InjectionRule {
            host: host.to_owned(),
            port: 443,
            path_prefix: path_prefix.to_owned(),
            header: header.to_owned(),
            format: format.to_owned(),
        };
        match self {
            // Claude Code signed in with a subscription also reads its account's settings and
            // policy limits (`/api/claude_code/…`) with the token.
            Self::ClaudeSubscription => vec![
                rule("api.anthropic.com", "/v1/", "authorization", "Bearer {secret}"),
                rule("api.anthropic.com", "/api/claude_code/", "authorization", "Bearer {secret}"),
            ],
            Self::AnthropicApiKey => vec![rule("api.anthropic.com", "/v1/", "x-api-key", "{secret}")],
            Self::ChatgptLogin => vec![rule("chatgpt.com", "/backend-api/", "authorization", "Bearer {secret}")],
            Self::ChatgptAccessToken => vec![
                rule("chatgpt.com", "/backend-api/", "authorization", "Bearer {secret}"),
                // The one identity-provider call Codex makes with an `at-` token: what account
                // it belongs to (codex-rs/login, `personal_access_token.rs`). Never the rest of
                // auth.openai.com (token minting, device and OAuth flows).
                rule("auth.openai.com", CHATGPT_WHOAMI_PATH, "authorization", "Bearer {secret}"),
            ],
            Self::OpenaiApiKey => vec![rule("api.openai.com", "/v1/", "authorization", "Bearer {secret}")],
        }
    }

    /// Checks a value's shape before anything is sent anywhere: one line of visible ASCII, the
    /// provider's prefix, a sane length. The error never repeats the value.
    pub fn check_shape(self, value: &str) -> Result<(), String> {
        let (prefix, what) = match self {
            Self::ClaudeSubscription => {
                ("sk-ant-oat", "a Claude subscription token (from `claude setup-token`) starts with sk-ant-oat")
            }
            Self::AnthropicApiKey => ("sk-ant-", "an Anthropic API key starts with sk-ant-"),
            // JSON: `logins::chatgpt::parse_auth_json` checks it.
            Self::ChatgptLogin => return Ok(()),
            Self::ChatgptAccessToken => ("", "a ChatGPT access token"),
            Self::OpenaiApiKey => ("sk-", "an OpenAI API key starts with sk-"),
        };
        if value.len() < 20 || value.len() > MAX_TOKEN_BYTES {
            return Err(format!("{what}: 20-{MAX_TOKEN_BYTES} characters expected"));
        }
        if !value.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(format!("{what}: one line of visible ASCII characters, no spaces"));
        }
        if !value.starts_with(prefix) {
            return Err(what.to_owned());
        }
        if self == Self::AnthropicApiKey && value.starts_with("sk-ant-oat") {
            return Err("this is a subscription token: connect it as claude_subscription".to_owned());
        }
        Ok(())
    }
}

/// Where Codex asks, with a ChatGPT access token (`at-…`), which account the token belongs to.
pub const CHATGPT_WHOAMI_PATH: &str = "/api/accounts/v1/user-auth-credential/whoami";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_rule_covers_a_whole_host() {
        for kind in ALL {
            for rule in kind.rules() {
                assert!(rule.path_prefix.len() > 1, "{kind:?} injects into every path of {}", rule.host);
            }
        }
        let token_rules = LoginKind::ChatgptAccessToken.rules();
        let auth: Vec<_> = token_rules.iter().filter(|r| r.host == "auth.openai.com").collect();
        assert_eq!(auth.len(), 1);
        assert_eq!(auth[0].path_prefix, CHATGPT_WHOAMI_PATH);
        assert!(!crate::logins::chatgpt::TOKEN_PATH.starts_with(&auth[0].path_prefix), "never the token endpoint");
    }

    #[test]
    fn names_round_trip_and_unknown_is_none() {
        for kind in ALL {
            assert_eq!(LoginKind::parse(kind.as_str()), Some(*kind));
            assert_eq!(serde_json::to_value(kind).expect("serializes"), kind.as_str());
        }
        assert_eq!(LoginKind::parse("chatgpt"), None);
    }

    #[test]
    fn shapes_are_checked_without_echoing_the_value() {
        let oat = "sk-ant-oat01-abcdefghijklmnopqrstuvwxyz";
        assert!(LoginKind::ClaudeSubscription.check_shape(oat).is_ok());
        let error = LoginKind::AnthropicApiKey.check_shape(oat).expect_err("a subscription token");
        assert!(error.contains("claude_subscription") && !error.contains(oat));
        assert!(LoginKind::AnthropicApiKey.check_shape("sk-ant-api03-abcdefghijklmnop").is_ok());
        assert!(LoginKind::OpenaiApiKey.check_shape("sk-proj-abcdefghijklmnopqrst").is_ok());
        for bad in ["short", "sk-ant-api03-has a space in it", "sk-ant-api03-line\nbreak-xxxxxxxx"] {
            let error = LoginKind::AnthropicApiKey.check_shape(bad).expect_err(bad);
            assert!(!error.contains(bad), "{error}");
        }
        assert!(LoginKind::OpenaiApiKey.check_shape("pk-abcdefghijklmnopqrstuvw").is_err());
        assert!(LoginKind::OpenaiApiKey.check_shape(&"sk-".repeat(2000)).is_err());
    }

    #[test]
    fn rules_name_the_provider_hosts_only() {
        for kind in ALL {
            for rule in kind.rules() {
                assert!(agenthold_proxy::ca::PRESET_HOSTS.contains(&rule.host.as_str()), "{rule:?}");
            }
        }
    }
}
