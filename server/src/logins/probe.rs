//! Checking a provider login on connect: one authenticated read-only request to the provider
//! (its model list, or for a ChatGPT token its usage endpoint) over TLS verified against the
//! public roots. 2xx: the login works; 401/403: the provider rejected it, and its reason (scrubbed
//! of the value) is what the person sees; anything else: the provider could not be asked.
//!
//! In tests a stand-in answers for the provider: `AGENTHOLD_PROXY_TEST_UPSTREAM_OVERRIDES` (the
//! same loopback overrides the egress proxy gets) maps `host:port` to a loopback address and a CA
//! trusted for that host only; refused in production mode.

use std::sync::Arc;
use std::time::Duration;

use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use rustls_pki_types::{CertificateDer, ServerName, pem::PemObject};

use super::chatgpt::{self, RefreshError, Tokens};
use super::kinds::LoginKind;
use crate::config::UpstreamOverrides;
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
#[derive(Debug, Clone, Default)]
pub struct Probe {
    overrides: Arc<UpstreamOverrides>,
}

impl Probe {
    /// A probe (with the test-only stand-ins, if any).
    pub fn new(overrides: Option<UpstreamOverrides>) -> Self {
        Self { overrides: Arc::new(overrides.unwrap_or_default()) }
    }

    /// The ChatGPT refresh exchange (`logins::chatgpt`): the rotated tokens, or why not.
    pub async fn refresh(&self, tokens: &Tokens) -> Result<Tokens, RefreshError> {
        let body = chatgpt::refresh_body(&tokens.refresh_token).to_string();
        let request = hyper::Request::post(chatgpt::TOKEN_PATH)
            .header("host", chatgpt::TOKEN_HOST)
            .header("content-type", "application/json")
            .header("user-agent", concat!("agenthold/", env!("CARGO_PKG_VERSION")))
            .body(Full::new(Bytes::from(body)))
            .map_err(|_| RefreshError::Transient("the request could not be made".to_owned()))?;
        let answer = tokio::time::timeout(TIMEOUT, self.send(request))
            .await
            .map_err(|_| RefreshError::Transient(format!("{} did not answer in time", chatgpt::TOKEN_HOST)))?
            .map_err(|e| RefreshError::Transient(e.to_string()))?;
        chatgpt::after_refresh(tokens, answer.0, &answer.1)
    }

    /// Checks `value` as a login of `kind` (a ChatGPT login is checked by its refresh instead).
    pub async fn check(&self, kind: LoginKind, value: &Secret) -> Result<(), ProbeError> {
        let request = request_for(kind, value.expose());
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

    async fn send(&self, request: hyper::Request<Full<Bytes>>) -> Result<(u16, Vec<u8>), ProbeError> {
        let host = request.headers().get("host").and_then(|h| h.to_str().ok()).unwrap_or_default().to_owned();
        let unreachable = |what: &str| ProbeError::Unreachable(format!("{host}: {what}"));
        let (addr, extra) = match self.overrides.get(&format!("{host}:443")) {
            Some(stand_in) => {
                let extra = match &stand_in.ca_cert {
                    Some(path) => CertificateDer::pem_file_iter(path)
                        .map_err(|_| unreachable("the stand-in's CA does not read"))?
                        .filter_map(Result::ok)
                        .collect(),
                    None => Vec::new(),
                };
                (stand_in.addr.to_string(), extra)
            }
            None => (format!("{host}:443"), Vec::new()),
        };
        let config = agenthold_plumbing::tls::ClientTls::public_roots()
            .trust("the stand-in's CA", extra)
            .and_then(|client| client.alpn(&[agenthold_plumbing::tls::HTTP_1_1]).build())
            .map_err(|_| unreachable("no TLS configuration"))?;
        let tcp = tokio::net::TcpStream::connect(&addr).await.map_err(|_| unreachable("could not connect"))?;
        let name = ServerName::try_from(host.clone()).map_err(|_| unreachable("not a host name"))?;
        let tls = tokio_rustls::TlsConnector::from(Arc::new(config))
            .connect(name, tcp)
            .await
            .map_err(|_| unreachable("the TLS handshake failed"))?;
        let (mut sender, connection) =
            hyper::client::conn::http1::handshake(TokioIo::new(tls)).await.map_err(|_| unreachable("HTTP failed"))?;
        let driver = tokio::spawn(connection);
        let response = sender.send_request(request).await.map_err(|_| unreachable("the request failed"));
        let result = match response {
            Ok(response) => {
                let status = response.status().as_u16();
                let body = Limited::new(response.into_body(), MAX_BODY).collect().await.map(|b| b.to_bytes().to_vec());
                Ok((status, body.unwrap_or_default()))
            }
            Err(error) => Err(error),
        };
        driver.abort();
        result
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
fn request_for(kind: LoginKind, value: &str) -> hyper::Request<Full<Bytes>> {
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
    // Origin-form on the wire (the connection is to the host already); `send` reads the host
    // from the `host` header.
    let mut builder = hyper::Request::get(path)
        .header("host", host)
        .header("user-agent", concat!("agenthold/", env!("CARGO_PKG_VERSION")));
    for (name, value) in headers {
        builder = builder.header(name, value);
    }
    // Every part is fixed or checked (`LoginKind::check_shape`: visible ASCII): this cannot fail.
    builder.body(Full::new(Bytes::new())).unwrap_or_else(|_| hyper::Request::new(Full::new(Bytes::new())))
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
        let request = request_for(LoginKind::AnthropicApiKey, "sk-ant-api03-x");
        assert_eq!(request.uri().to_string(), "/v1/models");
        assert_eq!(request.headers()["host"], "api.anthropic.com");
        assert_eq!(request.headers()["x-api-key"], "sk-ant-api03-x");
        let request = request_for(LoginKind::ClaudeSubscription, "sk-ant-oat01-x");
        assert_eq!(request.headers()["authorization"], "Bearer sk-ant-oat01-x");
        assert!(request.headers().contains_key("anthropic-beta"));
        let request = request_for(LoginKind::OpenaiApiKey, "sk-x");
        assert_eq!(request.headers()["host"], "api.openai.com");
    }
}
