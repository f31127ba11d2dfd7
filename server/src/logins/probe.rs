//! Checking a provider login on connect: one authenticated read-only request to the provider
//! (its model list, or for a ChatGPT token its usage endpoint) with the server's outbound client
//! ([`crate::outbound`]: TLS verified against the public roots). 2xx: the login works; 401/403: the provider rejected it, and its reason (scrubbed
//! of the value) is what the person sees; anything else: the provider could not be asked.
//!
//! In tests a stand-in answers for the provider: `AGENTHOLD_PROXY_TEST_UPSTREAM_OVERRIDES` (the
//! same loopback overrides the egress proxy gets) maps `host:port` to a loopback address and a CA
//! the probe's own client trusts; refused in production mode.

use std::time::Duration;

use reqwest::header::{CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};

use super::chatgpt::{self, RefreshError, Tokens};
use super::kinds::LoginKind;
use crate::config::UpstreamOverrides;
use crate::outbound;
use crate::secret::Secret;

/// How long a check may take, all in all.
const TIMEOUT: Duration = Duration::from_secs(15);

/// The most of an answer's body read (for the provider's reason).
const MAX_BODY: usize = 64 * 1024;

/// The longest reason passed on.
const MAX_REASON_CHARS: usize = 300;

/// Why a login did not check out.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProbeError {
    /// The provider refused it (401/403), with its reason.
    #[error("{0}")]
    Rejected(String),
    /// The provider could not be asked, or answered something else.
    #[error("{0}")]
    Unreachable(String),
}

/// Asks providers whether a login works.
#[derive(Debug, Clone)]
pub struct Probe {
    /// The server's outbound client (a test's own, with stand-ins); why not, if it could not
    /// be made (every check then says so).
    http: Result<reqwest::Client, String>,
}

impl Probe {
    /// A probe (with the test-only stand-ins, if any).
    pub fn new(overrides: Option<UpstreamOverrides>) -> Self {
        let http = outbound::with_stand_ins(&overrides.unwrap_or_default()).map_err(|e| e.to_string());
        if let Err(error) = &http {
            tracing::error!(%error, "no HTTP client: provider logins cannot be checked");
        }
        Self { http }
    }

    /// The ChatGPT refresh exchange (`logins::chatgpt`): the rotated tokens, or why not.
    pub async fn refresh(&self, tokens: &Tokens) -> Result<Tokens, RefreshError> {
        let unmade = |_| RefreshError::Transient("the request could not be made".to_owned());
        let url = reqwest::Url::parse(&format!("https://{}{}", chatgpt::TOKEN_HOST, chatgpt::TOKEN_PATH));
        let mut request = reqwest::Request::new(reqwest::Method::POST, url.map_err(unmade)?);
        request.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        *request.body_mut() = Some(chatgpt::refresh_body(&tokens.refresh_token).to_string().into());
        let answer = tokio::time::timeout(TIMEOUT, self.send(request))
            .await
            .map_err(|_| RefreshError::Transient(format!("{} did not answer in time", chatgpt::TOKEN_HOST)))?
            .map_err(|e| RefreshError::Transient(e.to_string()))?;
        chatgpt::after_refresh(tokens, answer.0, &answer.1)
    }

    /// Checks `value` as a login of `kind` (a ChatGPT login is checked by its refresh instead).
    pub async fn check(&self, kind: LoginKind, value: &Secret) -> Result<(), ProbeError> {
        let request = request_for(kind, value.expose())?;
        let answer = tokio::time::timeout(TIMEOUT, self.send(request))
            .await
            .map_err(|_| ProbeError::Unreachable(format!("{} did not answer in time", host_of(kind))))??;
        let (status, body) = answer;
        let reason = || scrub(&provider_reason(&body), value.expose());
        match status {
            200..=299 => Ok(()),
            401 | 403 => {
                Err(ProbeError::Rejected(format!("{} refused the login ({status}): {}", host_of(kind), reason())))
            }
            _ => Err(ProbeError::Unreachable(format!("{} answered {status}: {}", host_of(kind), reason()))),
        }
    }

    /// The status and (up to [`MAX_BODY`] of) the body of the answer.
    async fn send(&self, request: reqwest::Request) -> Result<(u16, Vec<u8>), ProbeError> {
        let host = request.url().host_str().unwrap_or_default().to_owned();
        let unreachable = |what: &str| ProbeError::Unreachable(format!("{host}: {what}"));
        let http = self.http.as_ref().map_err(|_| unreachable("no HTTP client"))?;
        let response = http.execute(request).await.map_err(|e| {
            // Fixed words: reqwest's own message may carry the URL and more than a person needs.
            unreachable(if e.is_connect() { "could not connect" } else { "the request failed" })
        })?;
        let status = response.status().as_u16();
        Ok((status, outbound::read_body(response, MAX_BODY).await.unwrap_or_default()))
    }
}

fn host_of(kind: LoginKind) -> &'static str {
    match kind {
        LoginKind::ClaudeSubscription | LoginKind::AnthropicApiKey => "api.anthropic.com",
        LoginKind::ChatgptAccessToken => "chatgpt.com",
        LoginKind::ChatgptLogin => chatgpt::TOKEN_HOST,
        LoginKind::OpenaiApiKey => "api.openai.com",
    }
}

/// The request that checks a login: read-only, authenticated as the harness would be.
fn request_for(kind: LoginKind, value: &str) -> Result<reqwest::Request, ProbeError> {
    let (path, headers): (&str, Vec<(&str, String)>) = match kind {
        LoginKind::ClaudeSubscription => (
            "/v1/models",
            vec![
                ("authorization", format!("Bearer {value}")),
                ("anthropic-version", "2023-06-01".to_owned()),
                ("anthropic-beta", "oauth-2025-04-20".to_owned()),
            ],
        ),
        LoginKind::AnthropicApiKey => {
            ("/v1/models", vec![("x-api-key", value.to_owned()), ("anthropic-version", "2023-06-01".to_owned())])
        }
        LoginKind::ChatgptAccessToken | LoginKind::ChatgptLogin => {
            ("/backend-api/wham/usage", vec![("authorization", format!("Bearer {value}"))])
        }
        LoginKind::OpenaiApiKey => ("/v1/models", vec![("authorization", format!("Bearer {value}"))]),
    };
    let host = host_of(kind);
    // Every part is fixed or checked (`LoginKind::check_shape`: visible ASCII).
    let unmade = || ProbeError::Unreachable(format!("{host}: the request could not be made"));
    let url = reqwest::Url::parse(&format!("https://{host}{path}")).map_err(|_| unmade())?;
    let mut map = HeaderMap::new();
    for (name, value) in headers {
        let mut value = HeaderValue::from_str(&value).map_err(|_| unmade())?;
        value.set_sensitive(matches!(name, "authorization" | "x-api-key"));
        map.insert(HeaderName::from_static(name), value);
    }
    let mut request = reqwest::Request::new(reqwest::Method::GET, url);
    *request.headers_mut() = map;
    Ok(request)
}

/// The provider's reason from an error body (`{"error": {"message"}}`, `{"error": "…",
/// "error_description"}`, `{"detail"}`), else its first characters.
fn provider_reason(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let json: serde_json::Value = serde_json::from_str(&text).unwrap_or(serde_json::Value::Null);
    let found = [
        json.pointer("/error/message"),
        json.get("error_description"),
        json.pointer("/detail/message"),
        json.get("detail"),
        json.get("message"),
        json.get("error"),
    ]
    .into_iter()
    .flatten()
    .find_map(serde_json::Value::as_str)
    .map(str::to_owned);
    found.unwrap_or_else(|| text.into_owned())
}

/// A reason fit to show: one line, short, and never containing the value (or a long part of it).
fn scrub(reason: &str, value: &str) -> String {
    let mut text: String = reason.chars().map(|c| if c.is_control() { ' ' } else { c }).collect();
    if value.len() >= 8 {
        text = text.replace(value, "[the login]");
        // Providers echo a key's start or end; drop any 8-character run of it.
        let bytes = value.as_bytes();
        for window in bytes.windows(8).filter_map(|w| std::str::from_utf8(w).ok()) {
            if text.contains(window) {
                text = text.replace(window, "…");
            }
        }
    }
    let short: String = text.trim().chars().take(MAX_REASON_CHARS).collect();
    if short.is_empty() { "no reason given".to_owned() } else { short }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reason_is_read_and_never_holds_the_value() {
        let value = "sk-ant-api03-SECRETSECRETSECRET";
        let body = format!(
            r#"{{"type":"error","error":{{"type":"authentication_error","message":"invalid x-api-key {value}"}}}}"#
        );
        let reason = scrub(&provider_reason(body.as_bytes()), value);
        assert!(reason.starts_with("invalid x-api-key"), "{reason}");
        assert!(!reason.contains("SECRETSEC"), "{reason}");
        let partial = scrub("key ending in ...ETSECRET was revoked", value);
        assert!(!partial.contains("ETSECRET"), "{partial}");
        assert_eq!(
            scrub(&provider_reason(br#"{"error":"invalid_token","error_description":"expired"}"#), value),
            "expired"
        );
        assert_eq!(scrub(&provider_reason(b"<html>\n\n</html>"), value), "<html>  </html>");
        assert_eq!(scrub("", value), "no reason given");
        assert!(scrub(&"x".repeat(5000), value).chars().count() <= MAX_REASON_CHARS);
    }

    #[test]
    fn requests_authenticate_as_the_harness_would() {
        let request = request_for(LoginKind::AnthropicApiKey, "sk-ant-api03-x").expect("made");
        assert_eq!(request.url().as_str(), "https://api.anthropic.com/v1/models");
        assert_eq!(request.headers()["x-api-key"], "sk-ant-api03-x");
        assert!(request.headers()["x-api-key"].is_sensitive());
        let request = request_for(LoginKind::ClaudeSubscription, "sk-ant-oat01-x").expect("made");
        assert_eq!(request.headers()["authorization"], "Bearer sk-ant-oat01-x");
        assert!(request.headers().contains_key("anthropic-beta"));
        let request = request_for(LoginKind::OpenaiApiKey, "sk-x").expect("made");
        assert_eq!(request.url().host_str(), Some("api.openai.com"));
        assert!(request_for(LoginKind::OpenaiApiKey, "sk-\nx").is_err(), "no header from a line break");
    }
}
