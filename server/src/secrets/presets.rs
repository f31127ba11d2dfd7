//! Secret presets and the injection rule each fills in: which host, port and path prefix the
//! proxy may put the value into, the one header it goes in and its format. A `custom` secret
//! names its own host, header and format, checked here. Also the placeholders a sandbox sees in
//! place of a value, shaped like the provider's keys.

use serde::{Deserialize, Serialize};

/// Where a secret's value belongs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Preset {
    /// Anthropic API key (`x-api-key` on `api.anthropic.com`).
    Anthropic,
    /// OpenAI API key (`Authorization: Bearer` on `api.openai.com`).
    Openai,
    /// OpenRouter API key (`Authorization: Bearer` on `openrouter.ai/api/`).
    Openrouter,
    /// A git host's access token (GitHub, GitLab, Gitea personal access tokens), sent as the
    /// password of HTTP Basic (`Authorization: Basic base64(<username>:<token>)`) on the host
    /// the creator names; the sandbox's git credential helper answers with the placeholder
    /// ([`crate::secrets::git`]).
    #[serde(rename = "git_token")]
    GitToken,
    /// Host, header and format given by the admin.
    Custom,
}

impl Preset {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Anthropic => "anthropic",
            Self::Openai => "openai",
            Self::Openrouter => "openrouter",
            Self::GitToken => "git_token",
            Self::Custom => "custom",
        }
    }

    /// Parses a stored name.
    pub fn parse(raw: &str) -> Option<Self> {
        [Self::Anthropic, Self::Openai, Self::Openrouter, Self::GitToken, Self::Custom]
            .into_iter()
            .find(|p| p.as_str() == raw)
    }

    /// The preset's rule (`None` for `custom` and `git_token`, whose host the creator names:
    /// [`git_rule`]).
    pub fn rule(self) -> Option<InjectionRule> {
        let rule = |host: &str, path_prefix: &str, header: &str, format: &str| InjectionRule {
            host: host.to_owned(),
            port: 443,
            path_prefix: path_prefix.to_owned(),
            header: header.to_owned(),
            format: format.to_owned(),
        };
        match self {
            Self::Anthropic => Some(rule("api.anthropic.com", "/v1/", "x-api-key", SECRET)),
            Self::Openai => Some(rule("api.openai.com", "/v1/", "authorization", "Bearer {secret}")),
            Self::Openrouter => Some(rule("openrouter.ai", "/api/", "authorization", "Bearer {secret}")),
            Self::Custom | Self::GitToken => None,
        }
    }

    /// A fresh random placeholder, shaped like the provider's keys (clients that check a key's
    /// prefix accept it). 128 random bits, hex.
    pub fn placeholder(self) -> String {
        let prefix = match self {
            Self::Anthropic => "sk-ant-agenthold-",
            Self::Openai => "sk-agenthold-",
            Self::Openrouter => "sk-or-v1-agenthold-",
            Self::GitToken => "agenthold-git-",
            Self::Custom => "agenthold-",
        };
        format!("{prefix}{}", hex::encode(rand::random::<[u8; 16]>()))
    }
}

/// The marker of the value in a format, and the rule a value goes in by (the store's shapes).
pub use crate::store::secrets::{InjectionRule, SECRET};

/// The username a `git_token` secret is sent with when its creator names none. GitHub ignores
/// the username of a token, Gitea takes the token's own user, GitLab takes any non-empty name
/// for personal, project and group access tokens (`oauth2` for OAuth tokens).
pub const GIT_DEFAULT_USERNAME: &str = "x-access-token";

/// The format of a `git_token` secret's header: `Basic <username>:{secret}`, meaning HTTP Basic
/// with the username and the value as password, base64-encoded by the proxy.
pub fn git_format(username: &str) -> String {
    format!("{BASIC_PREFIX}{username}:{SECRET}")
}

/// What starts a Basic format.
pub const BASIC_PREFIX: &str = "Basic ";

/// The username of a Basic format (`Basic <username>:{secret}`), `None` for any other format.
pub fn basic_username(format: &str) -> Option<&str> {
    format.strip_prefix(BASIC_PREFIX)?.strip_suffix(SECRET)?.strip_suffix(':').filter(|u| valid_git_username(u))
}

/// A git username: 1-64 visible ASCII characters without `:` (Basic's separator) or quotes.
pub fn valid_git_username(username: &str) -> bool {
    !username.is_empty()
        && username.len() <= 64
        && username.bytes().all(|b| b.is_ascii_graphic() && !b":'\"\\`$".contains(&b))
}

/// The rule of a `git_token` secret: HTTP Basic on every path of `host` (port 443), with
/// `username` (default [`GIT_DEFAULT_USERNAME`]). The error says what is wrong.
pub fn git_rule(host: &str, username: Option<&str>) -> Result<InjectionRule, String> {
    let host_lower = host.to_ascii_lowercase();
    if !valid_host(&host_lower) {
        return Err(format!(
            "host {host:?} must be a DNS name like github.com (letters, digits, '-', at least two labels, \
             no IP address, no trailing dot)"
        ));
    }
    let username = username.unwrap_or(GIT_DEFAULT_USERNAME);
    if !valid_git_username(username) {
        return Err(format!(
            "username {username:?} must be 1-64 visible ASCII characters without ':', quotes, '\\', '`' or '$'"
        ));
    }
    Ok(InjectionRule {
        host: host_lower,
        port: 443,
        path_prefix: "/".to_owned(),
        header: "authorization".to_owned(),
        format: git_format(username),
    })
}

/// What a `custom` secret's creator gives.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CustomRule {
    /// The host.
    pub host: String,
    /// The header.
    pub header: String,
    /// The format (default `{secret}`).
    pub format: Option<String>,
    /// The port (default 443).
    pub port: Option<u16>,
    /// The path prefix (default `/`).
    pub path_prefix: Option<String>,
}

/// Headers a secret may not go into: framing, routing, hop-by-hop and proxy headers, cookies.
const FORBIDDEN_HEADERS: &[&str] = &[
    "host",
    "content-length",
    "content-type",
    "transfer-encoding",
    "connection",
    "upgrade",
    "te",
    "trailer",
    "keep-alive",
    "proxy-authorization",
    "proxy-authenticate",
    "proxy-connection",
    "cookie",
    "set-cookie",
    "forwarded",
    "via",
];

impl CustomRule {
    /// Checks and normalises the rule; the error says what is wrong.
    pub fn validate(self) -> Result<InjectionRule, String> {
        let host = self.host.to_ascii_lowercase();
        if !valid_host(&host) {
            return Err(format!(
                "host {:?} must be a DNS name like api.example.com (letters, digits, '-', at least two labels, \
                 no IP address, no trailing dot)",
                self.host
            ));
        }
        let header = self.header.to_ascii_lowercase();
        let token = |c: char| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c);
        if header.is_empty() || header.len() > 64 || !header.chars().all(token) {
            return Err(format!("header {:?} must be an HTTP header name (1-64 token characters)", self.header));
        }
        if FORBIDDEN_HEADERS.contains(&header.as_str()) || header.starts_with("proxy-") {
            return Err(format!("a secret cannot go into the {header} header"));
        }
        let format = self.format.unwrap_or_else(|| SECRET.to_owned());
        let prefix = format.strip_suffix(SECRET).unwrap_or("{");
        let prefix_char = |c: char| c.is_ascii_alphanumeric() || " -_.".contains(c);
        if prefix.len() > 32 || !prefix.chars().all(prefix_char) {
            return Err(format!(
                "format {format:?} must be {{secret}} or a short prefix of letters, digits, spaces, '-', '_', '.' \
                 followed by {{secret}} (like \"Bearer {{secret}}\")"
            ));
        }
        let port = self.port.unwrap_or(443);
        if port == 0 {
            return Err("port must be 1-65535".to_owned());
        }
        let path_prefix = self.path_prefix.unwrap_or_else(|| "/".to_owned());
        let path_char = |c: char| c.is_ascii_graphic() && !"?#%\\".contains(c);
        if !path_prefix.starts_with('/') || path_prefix.len() > 256 || !path_prefix.chars().all(path_char) {
            return Err(format!(
                "path_prefix {path_prefix:?} must start with '/' and have at most 256 visible characters without ?, #, %, \\"
            ));
        }
        Ok(InjectionRule { host, port, path_prefix, header, format })
    }
}

fn valid_host(host: &str) -> bool {
    let labels: Vec<&str> = host.split('.').collect();
    let label_ok = |l: &&str| {
        !l.is_empty()
            && l.len() <= 63
            && !l.starts_with('-')
            && !l.ends_with('-')
            && l.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
    };
    host.len() <= 253
        && labels.len() >= 2
        && labels.iter().all(label_ok)
        && labels.last().is_some_and(|tld| !tld.chars().all(|c| c.is_ascii_digit()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn custom(host: &str, header: &str, format: Option<&str>) -> Result<InjectionRule, String> {
        CustomRule {
            host: host.to_owned(),
            header: header.to_owned(),
            format: format.map(str::to_owned),
            port: None,
            path_prefix: None,
        }
        .validate()
    }

    #[test]
    fn presets_fill_in_their_provider_rules() {
        let anthropic = Preset::Anthropic.rule().expect("rule");
        assert_eq!((anthropic.host.as_str(), anthropic.header.as_str()), ("api.anthropic.com", "x-api-key"));
        assert_eq!(anthropic.render("P"), "P");
        let openai = Preset::Openai.rule().expect("rule");
        assert_eq!(openai.render("P"), "Bearer P");
        assert!(Preset::Custom.rule().is_none());
        assert!(Preset::GitToken.rule().is_none());
        for preset in [Preset::Anthropic, Preset::Openai, Preset::Openrouter, Preset::GitToken, Preset::Custom] {
            assert_eq!(Preset::parse(preset.as_str()), Some(preset));
            let (a, b) = (preset.placeholder(), preset.placeholder());
            assert_ne!(a, b);
            assert!(a.contains("agenthold-") && a.is_ascii() && !a.contains(' '), "{a}");
        }
        assert!(Preset::Anthropic.placeholder().starts_with("sk-ant-"));
    }

    #[test]
    fn git_rules_are_basic_on_the_named_host() {
        let rule = git_rule("Git.Example.com", None).expect("valid");
        assert_eq!((rule.host.as_str(), rule.port, rule.path_prefix.as_str()), ("git.example.com", 443, "/"));
        assert_eq!((rule.header.as_str(), rule.format.as_str()), ("authorization", "Basic x-access-token:{secret}"));
        assert_eq!(basic_username(&rule.format), Some("x-access-token"));
        assert_eq!(basic_username(&git_rule("gitlab.com", Some("oauth2")).expect("valid").format), Some("oauth2"));
        for bad_host in ["localhost", "10.0.0.1", "github.com.", "a b.com"] {
            assert!(git_rule(bad_host, None).is_err(), "{bad_host}");
        }
        for bad_user in ["", "a:b", "a b", "it's", "x\n", &"u".repeat(65)] {
            assert!(git_rule("github.com", Some(bad_user)).is_err(), "{bad_user:?}");
        }
        assert_eq!(basic_username("Bearer {secret}"), None);
        assert_eq!(basic_username("Basic {secret}"), None);
        assert_eq!(basic_username("Basic a:b:{secret}"), None);
    }

    #[test]
    fn custom_rules_are_checked_and_normalised() {
        let rule = custom("API.Example.com", "X-Token", Some("Token {secret}")).expect("valid");
        assert_eq!((rule.host.as_str(), rule.header.as_str(), rule.port), ("api.example.com", "x-token", 443));
        assert_eq!(rule.render("v"), "Token v");
        assert_eq!(custom("a.example", "authorization", None).expect("valid").format, "{secret}");
        for (host, header, format) in [
            ("localhost", "x-key", None),
            ("10.0.0.1", "x-key", None),
            ("example.com.", "x-key", None),
            ("-a.example.com", "x-key", None),
            ("a_b.example.com", "x-key", None),
            ("example.com", "host", None),
            ("example.com", "Proxy-Authorization", None),
            ("example.com", "cookie", None),
            ("example.com", "x key", None),
            ("example.com", "x-key\r\nx", None),
            ("example.com", "x-key", Some("{secret} trailing")),
            ("example.com", "x-key", Some("Bearer")),
            ("example.com", "x-key", Some("a\r\n{secret}")),
            ("example.com", "x-key", Some("{secret}{secret}")),
        ] {
            assert!(custom(host, header, format).is_err(), "{host} {header} {format:?}");
        }
        let bad_path = CustomRule {
            host: "example.com".into(),
            header: "x".into(),
            format: None,
            port: Some(8443),
            path_prefix: Some("v1/".into()),
        };
        assert!(bad_path.validate().is_err());
    }
}
