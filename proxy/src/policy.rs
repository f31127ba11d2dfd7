//! The checked, compiled configuration (a [`Policy`]): who each sandbox is, which destinations
//! it may reach, which requests get which value. Built from a [`ConfigFile`] by [`Policy::compile`],
//! which refuses anything inconsistent; every decision the proxy makes is a method here.

use std::collections::{HashMap, HashSet};
use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use agenthold_plumbing::tls::{self, ClientTls};
use hyper::header::{HeaderName, HeaderValue};
use rustls::ClientConfig;

use crate::addr::canonical;
use crate::admission::Allowance;
use crate::ca::{Ca, CaError};
use crate::config::{ConfigFile, Format, SandboxConfig};
use crate::host::{Host, Target, parse_authority, parse_host};
use crate::limits::{ConnectionLimits, HOST_ADDRS_REFRESH_SECS, TUNNEL_IDLE_SECS};
use crate::secret::Secret;

/// Why a configuration was refused. Messages name sandboxes, hosts and fields, never values.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The CA could not be loaded or does not cover an intercepted host.
    #[error(transparent)]
    Ca(#[from] CaError),
    /// A field is wrong.
    #[error("sandbox {sandbox}: {problem}")]
    Sandbox {
        /// The sandbox id.
        sandbox: String,
        /// What is wrong.
        problem: String,
    },
    /// A global field is wrong.
    #[error("{0}")]
    Global(String),
}

/// A compiled allow-list entry.
#[derive(Clone, Debug, PartialEq, Eq)]
enum HostPattern {
    /// Exactly this host.
    Exact(Host),
    /// Any strict subdomain of this name (`*.example.com`; not `example.com` itself).
    Subdomains(String),
}

/// `host[:port]`; without a port, 443 for CONNECT and 80 for plain HTTP.
#[derive(Clone, Debug)]
struct AllowPattern {
    host: HostPattern,
    port: Option<u16>,
}

impl AllowPattern {
    fn parse(raw: &str) -> Option<Self> {
        let (host_part, port) = match raw.strip_prefix("*.") {
            Some(rest) => {
                let target = parse_authority(rest, Some(0)).ok()?;
                let name = target.host.name()?.to_owned();
                (HostPattern::Subdomains(name), target.port)
            }
            None => {
                let target = parse_authority(raw, Some(0)).ok()?;
                (HostPattern::Exact(target.host), target.port)
            }
        };
        Some(Self { host: host_part, port: (port != 0).then_some(port) })
    }

    fn matches(&self, target: &Target, default_port: u16) -> bool {
        if self.port.unwrap_or(default_port) != target.port {
            return false;
        }
        match (&self.host, &target.host) {
            (HostPattern::Exact(host), _) => host == &target.host,
            (HostPattern::Subdomains(suffix), Host::Name(name)) => {
                name.len() > suffix.len() + 1
                    && name.ends_with(suffix.as_str())
                    && name.as_bytes()[name.len() - suffix.len() - 1] == b'.'
            }
            (HostPattern::Subdomains(_), Host::Ip(_)) => false,
        }
    }
}

/// One injection rule, compiled.
#[derive(Debug)]
pub struct Rule {
    /// The intercepted host.
    pub host: String,
    /// Its port.
    pub port: u16,
    /// Requests whose path starts with this get the value.
    pub path_prefix: String,
    /// The header.
    pub header: HeaderName,
    /// The placeholder as the sandbox holds it.
    pub placeholder: String,
    /// The whole header value expected from the sandbox (`<placeholder>` or `Bearer <placeholder>`).
    pub expected: HeaderValue,
    /// The whole header value sent upstream (marked sensitive).
    pub replacement: HeaderValue,
    /// The bare value, for scrubbing response headers.
    pub value: Secret,
}

/// One sandbox, compiled.
#[derive(Debug)]
pub struct Sandbox {
    /// Its id (logged).
    pub id: String,
    username: String,
    password: Secret,
    source_addrs: Vec<IpAddr>,
    any_source: bool,
    allow: Vec<AllowPattern>,
    /// Its injection rules.
    pub rules: Vec<Rule>,
    /// The requests the proxy answers itself.
    pub answers: Vec<Answer>,
}

/// A request the proxy answers itself (compiled [`crate::config::AnswerConfig`]).
#[derive(Debug)]
pub struct Answer {
    /// The host (lower case).
    pub host: String,
    /// The port.
    pub port: u16,
    /// The exact path.
    pub path: String,
    /// The status.
    pub status: hyper::StatusCode,
    /// The content type.
    pub content_type: HeaderValue,
    /// The body.
    pub body: bytes::Bytes,
}

/// What to do with a CONNECT.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Not on the allow-list.
    Refuse,
    /// Allowed, no secrets: a byte tunnel.
    Tunnel,
    /// Carries secrets: terminate TLS and inject.
    Intercept,
}

impl Sandbox {
    /// Whether these credentials (and client address) are this sandbox's. The address must be
    /// one of `source_addrs`; an empty list admits no address unless `any_source` says so.
    fn authenticates(&self, password: &[u8], peer: IpAddr) -> bool {
        let password_ok = self.password.matches(password);
        let source_ok = self.any_source || self.source_addrs.iter().any(|a| canonical(*a) == canonical(peer));
        password_ok && source_ok
    }

    /// The decision for a CONNECT to `target`.
    pub fn decide_connect(&self, target: &Target) -> Decision {
        if self.is_inject_target(target) {
            Decision::Intercept
        } else if self.allow.iter().any(|p| p.matches(target, 443)) {
            Decision::Tunnel
        } else {
            Decision::Refuse
        }
    }

    /// Whether a plain-HTTP request to `target` may be forwarded: allowed, and not a host that
    /// carries secrets (on any port): secrets only travel over TLS.
    pub fn allows_plain(&self, target: &Target) -> Result<(), &'static str> {
        if let Host::Name(name) = &target.host
            && self.rules.iter().any(|r| &r.host == name)
        {
            return Err("carries secrets and is reachable over HTTPS only");
        }
        if self.allow.iter().any(|p| p.matches(target, 80)) {
            Ok(())
        } else {
            Err("is not on this sandbox's egress allow-list")
        }
    }

    /// Whether `target` is an intercepted host:port of this sandbox (it carries a secret, or the
    /// proxy answers some of its requests itself).
    pub fn is_inject_target(&self, target: &Target) -> bool {
        self.rules_for(target).next().is_some() || self.answers_for(target).next().is_some()
    }

    /// The requests the proxy answers itself for `target`.
    pub fn answers_for<'a>(&'a self, target: &'a Target) -> impl Iterator<Item = &'a Answer> + 'a {
        self.answers.iter().filter(move |a| target.port == a.port && target.host.name() == Some(a.host.as_str()))
    }

    /// The rules for `target`.
    pub fn rules_for<'a>(&'a self, target: &'a Target) -> impl Iterator<Item = &'a Rule> + 'a {
        self.rules.iter().filter(move |r| target.port == r.port && target.host.name() == Some(r.host.as_str()))
    }
}

/// agenthold's own service, compiled ([`crate::config::ServerRouteConfig`]).
#[derive(Debug, Clone)]
pub struct ServerRoute {
    /// `host:443`.
    pub target: Target,
    /// The server's address (dialled over plain HTTP, exempt from the private-address refusal:
    /// the configuration names it).
    pub addr: SocketAddr,
    /// Only requests under this path are forwarded.
    pub path_prefix: String,
}

/// A test-only upstream override, compiled.
#[derive(Debug)]
pub struct Override {
    /// The loopback address dialled instead.
    pub addr: SocketAddr,
    /// Public roots plus the override's CA.
    pub tls: Arc<ClientConfig>,
}

/// A whole configuration, checked.
#[derive(Debug)]
pub struct Policy {
    /// The file's `version`.
    pub version: Option<u64>,
    /// Refuse private destinations.
    pub deny_private: bool,
    /// The proxy's own addresses (beyond the listener's).
    pub own_addrs: Vec<IpAddr>,
    /// Private or reserved addresses it may dial all the same (`allow_addrs`).
    pub allow_addrs: Vec<IpAddr>,
    /// Idle timeout of pass-through tunnels.
    pub tunnel_idle: Duration,
    /// How many connections may be held, and how long one has to authenticate.
    pub limits: ConnectionLimits,
    /// How often the host's interface addresses are read again.
    pub host_addrs_refresh: Duration,
    /// The CA.
    pub ca: Arc<Ca>,
    /// Upstream TLS for everything not overridden.
    pub public_tls: Arc<ClientConfig>,
    /// TEST ONLY overrides.
    pub overrides: HashMap<Target, Override>,
    /// agenthold's own service.
    pub server_route: Option<ServerRoute>,
    by_username: HashMap<String, Arc<Sandbox>>,
    /// How many sandboxes are bound to each source address (canonical form).
    bound_sources: HashMap<IpAddr, usize>,
}

impl Policy {
    /// Checks and compiles `file`. `previous_ca` is reused when the CA files did not change, so
    /// cached leaves survive a reload.
    pub fn compile(file: ConfigFile, previous_ca: Option<&Arc<Ca>>) -> Result<Self, ConfigError> {
        let ca = load_ca(&file.ca.cert, &file.ca.key, previous_ca)?;
        let mut by_username = HashMap::new();
        let mut ids = HashSet::new();
        let mut placeholder_owner: HashMap<String, String> = HashMap::new();
        let mut inject_hosts = HashSet::new();
        let mut bound_sources: HashMap<IpAddr, usize> = HashMap::new();
        for sandbox in file.sandboxes {
            let compiled = compile_sandbox(sandbox)?;
            let fail =
                |problem: &str| ConfigError::Sandbox { sandbox: compiled.id.clone(), problem: problem.to_owned() };
            if !ids.insert(compiled.id.clone()) {
                return Err(fail("duplicate sandbox id"));
            }
            for answer in &compiled.answers {
                inject_hosts.insert(answer.host.clone());
            }
            for rule in &compiled.rules {
                if let Some(owner) = placeholder_owner.insert(rule.placeholder.clone(), compiled.id.clone())
                    && owner != compiled.id
                {
                    return Err(fail(
                        "a placeholder is shared with another sandbox (placeholders must be per sandbox)",
                    ));
                }
                inject_hosts.insert(rule.host.clone());
            }
            if by_username.contains_key(&compiled.username) {
                return Err(fail("duplicate proxy username"));
            }
            let sources: HashSet<IpAddr> = compiled.source_addrs.iter().map(|a| canonical(*a)).collect();
            for source in sources {
                *bound_sources.entry(source).or_insert(0) += 1;
            }
            by_username.insert(compiled.username.clone(), Arc::new(compiled));
        }
        let server_route = match file.server_route {
            Some(route) => {
                let bad = |what: &str| ConfigError::Global(format!("server_route: {what}"));
                let host = match parse_host(&route.host) {
                    Ok(Host::Name(name)) => name,
                    _ => return Err(bad("host must be a DNS name")),
                };
                if !route.path_prefix.starts_with('/')
                    || route.path_prefix.bytes().any(|b| b.is_ascii_control() || b == b' ')
                {
                    return Err(bad("path_prefix must start with '/'"));
                }
                ca.check_covers(&host)?;
                inject_hosts.insert(host.clone());
                Some(ServerRoute {
                    target: Target { host: Host::Name(host), port: 443 },
                    addr: route.addr,
                    path_prefix: route.path_prefix,
                })
            }
            None => None,
        };
        for host in &inject_hosts {
            ca.check_covers(host)?;
        }
        ca.retain(&|host| inject_hosts.contains(host));
        let mut overrides = HashMap::new();
        for (key, value) in file.upstream_overrides {
            let target = parse_authority(&key, Some(443))
                .map_err(|e| ConfigError::Global(format!("upstream_overrides key {key:?}: {e}")))?;
            if !value.addr.ip().is_loopback() {
                return Err(ConfigError::Global(format!(
                    "upstream_overrides {key}: only loopback stand-ins are allowed (test only)"
                )));
            }
            let tls = upstream_tls(value.ca_cert.as_deref())
                .map_err(|e| ConfigError::Global(format!("upstream_overrides {key}: ca_cert {e}")))?;
            overrides.insert(target, Override { addr: value.addr, tls: Arc::new(tls) });
        }
        let public_tls = upstream_tls(None).map_err(|e| ConfigError::Global(e.to_string()))?;
        Ok(Self {
            version: file.version,
            deny_private: file.deny_private,
            own_addrs: file.own_addrs,
            allow_addrs: file.allow_addrs,
            tunnel_idle: Duration::from_secs(TUNNEL_IDLE_SECS.take(file.tunnel_idle_timeout_secs)),
            limits: ConnectionLimits::from_file(
                file.max_connections_per_sandbox,
                file.max_unauthenticated_per_source,
                file.max_unauthenticated,
                file.auth_timeout_secs,
            ),
            host_addrs_refresh: Duration::from_secs(HOST_ADDRS_REFRESH_SECS.take(file.host_addrs_refresh_secs)),
            ca,
            public_tls: Arc::new(public_tls),
            overrides,
            server_route,
            by_username,
            bound_sources,
        })
    }

    /// What a new connection from `peer` may take before it authenticates: its address's share
    /// (one share per sandbox bound to it), and the shared pool only when no sandbox is.
    pub fn allowance(&self, peer: IpAddr) -> Allowance {
        allowance(&self.limits, self.bound_sources.get(&canonical(peer)).copied().unwrap_or(0))
    }

    /// The sandbox these proxy credentials (from this client address) belong to.
    pub fn authenticate(&self, username: &str, password: &[u8], peer: IpAddr) -> Option<Arc<Sandbox>> {
        let sandbox = self.by_username.get(username)?;
        sandbox.authenticates(password, peer).then(|| sandbox.clone())
    }

    /// agenthold's own service, if `target` is it.
    pub fn server_route_for(&self, target: &Target) -> Option<&ServerRoute> {
        self.server_route.as_ref().filter(|route| &route.target == target)
    }

    /// How many sandboxes are configured.
    pub fn sandbox_count(&self) -> usize {
        self.by_username.len()
    }
}

fn load_ca(cert: &Path, key: &Path, previous: Option<&Arc<Ca>>) -> Result<Arc<Ca>, ConfigError> {
    let read = |path: &Path| {
        std::fs::read(path).map_err(|source| CaError::Io { what: format!("reading {}", path.display()), source })
    };
    let cert_pem = read(cert)?;
    let key_pem = read(key)?;
    if let Some(previous) = previous
        && previous.same_files(&cert_pem, &key_pem)
    {
        return Ok(previous.clone());
    }
    Ok(Arc::new(Ca::from_pem(cert_pem, key_pem)?))
}

/// The upstream client configuration: the public web roots, never the proxy's own CA, ALPN
/// `http/1.1`; plus the CAs of `ca_cert` only for a test-only upstream override.
fn upstream_tls(ca_cert: Option<&Path>) -> Result<ClientConfig, tls::TlsError> {
    let mut client = ClientTls::public_roots();
    if let Some(path) = ca_cert {
        client = client.trust_pem_file(path)?;
    }
    client.alpn(&[tls::HTTP_1_1]).build()
}

/// The allowance of an address `bound` sandboxes are bound to, under `limits` (also used, with
/// the defaults and no bound address, while no valid configuration is loaded).
pub fn allowance(limits: &ConnectionLimits, bound: usize) -> Allowance {
    Allowance {
        per_source: limits.unauthenticated_per_source.saturating_mul(bound.max(1)),
        bound: bound > 0,
        shared: limits.unauthenticated,
    }
}

/// Header names that carry credentials. On an intercepted host, each may only appear as the
/// header of a matching rule, with exactly the placeholder.
pub const CREDENTIAL_HEADERS: &[&str] = &[
    "authorization",
    "x-api-key",
    "api-key",
    "x-goog-api-key",
    "openai-api-key",
    "cookie",
    "x-auth-token",
    "x-access-token",
];

/// Headers a rule may not target besides the hop-by-hop ones ([`crate::headers::HOP_BY_HOP`]).
const FORBIDDEN_RULE_HEADERS: &[&str] = &["host", "content-length"];

fn compile_sandbox(config: SandboxConfig) -> Result<Sandbox, ConfigError> {
    let id = config.id;
    let fail = |problem: String| ConfigError::Sandbox { sandbox: id.clone(), problem };
    if id.is_empty() || id.len() > 200 || id.chars().any(|c| c.is_control()) {
        return Err(ConfigError::Global("a sandbox id is empty, too long or has control characters".into()));
    }
    if config.username.is_empty() || config.username.contains(':') || config.username.chars().any(|c| c.is_control()) {
        return Err(fail("the username must be non-empty, without ':' or control characters".into()));
    }
    if config.password.expose().is_empty() {
        return Err(fail("the password is empty".into()));
    }
    if config.any_source && !config.source_addrs.is_empty() {
        return Err(fail("any_source and source_addrs exclude each other".into()));
    }
    let mut allow = Vec::new();
    for raw in &config.allow {
        allow.push(
            AllowPattern::parse(raw)
                .ok_or_else(|| fail(format!("allow entry {raw:?} is not host[:port] or *.domain[:port]")))?,
        );
    }
    let mut rules = Vec::new();
    for (index, rule) in config.inject.into_iter().enumerate() {
        let bad = |what: &str| fail(format!("inject rule {index}: {what}"));
        let host = match parse_host(&rule.host) {
            Ok(Host::Name(name)) => name,
            _ => return Err(bad("host must be a DNS name")),
        };
        if rule.port == 0 {
            return Err(bad("port must not be 0"));
        }
        if !rule.path_prefix.starts_with('/') || rule.path_prefix.bytes().any(|b| b.is_ascii_control() || b == b' ') {
            return Err(bad("path_prefix must start with '/'"));
        }
        let header = HeaderName::from_bytes(rule.header.as_bytes()).map_err(|_| bad("header is not a header name"))?;
        if FORBIDDEN_RULE_HEADERS.contains(&header.as_str()) || crate::headers::HOP_BY_HOP.contains(&header.as_str()) {
            return Err(bad("header cannot carry a credential"));
        }
        if rule.placeholder.len() < 8 || !rule.placeholder.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(bad("placeholder must be at least 8 visible ASCII characters"));
        }
        let value = rule.value.expose();
        if value.is_empty() || !value.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(bad("value must be non-empty visible ASCII (no spaces, CR or LF)"));
        }
        if value.contains(rule.placeholder.as_str()) || rule.placeholder.contains(value) {
            return Err(bad("placeholder and value overlap"));
        }
        if rule.username.is_some() != (rule.format == Format::Basic) {
            return Err(bad("username goes with format basic, and only there"));
        }
        let (expected, replacement) = match (rule.format, rule.username.as_deref()) {
            (Format::Basic, Some(username)) => {
                if username.is_empty()
                    || username.len() > 64
                    || !username.bytes().all(|b| b.is_ascii_graphic() && b != b':')
                {
                    return Err(bad("username must be 1-64 visible ASCII characters without ':'"));
                }
                (basic(username, &rule.placeholder), basic(username, value))
            }
            (Format::Bearer, _) => (format!("Bearer {}", rule.placeholder), format!("Bearer {value}")),
            (Format::Raw | Format::Basic, _) => (rule.placeholder.clone(), value.to_owned()),
        };
        let expected = HeaderValue::from_str(&expected).map_err(|_| bad("placeholder is not a header value"))?;
        let mut replacement = HeaderValue::from_str(&replacement).map_err(|_| bad("value is not a header value"))?;
        replacement.set_sensitive(true);
        rules.push(Rule {
            host,
            port: rule.port,
            path_prefix: rule.path_prefix,
            header,
            placeholder: rule.placeholder,
            expected,
            replacement,
            value: rule.value,
        });
    }
    let mut answers = Vec::new();
    for (index, answer) in config.answer.into_iter().enumerate() {
        let bad = |what: &str| fail(format!("answer {index}: {what}"));
        let host = match parse_host(&answer.host) {
            Ok(Host::Name(name)) => name,
            _ => return Err(bad("host must be a DNS name")),
        };
        if answer.port == 0 {
            return Err(bad("port must not be 0"));
        }
        if !answer.path.starts_with('/') || answer.path.bytes().any(|b| b.is_ascii_control() || b == b' ' || b == b'?')
        {
            return Err(bad("path must start with '/', without a query"));
        }
        let status = hyper::StatusCode::from_u16(answer.status).map_err(|_| bad("status is not an HTTP status"))?;
        let content_type =
            HeaderValue::from_str(&answer.content_type).map_err(|_| bad("content_type is not a header value"))?;
        if answer.body.len() > 64 * 1024 {
            return Err(bad("body is over 64 KiB"));
        }
        answers.push(Answer {
            host,
            port: answer.port,
            path: answer.path,
            status,
            content_type,
            body: answer.body.into(),
        });
    }
    Ok(Sandbox {
        id: id.clone(),
        username: config.username,
        password: config.password,
        source_addrs: config.source_addrs,
        any_source: config.any_source,
        allow,
        rules,
        answers,
    })
}

/// `Basic base64(<username>:<password>)`, as git and curl send HTTP Basic.
fn basic(username: &str, password: &str) -> String {
    use base64::Engine as _;
    format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(format!("{username}:{password}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(s: &str) -> Target {
        parse_authority(s, None).expect("test target")
    }

    fn compile_json(
        dir: &std::path::Path,
        sandboxes: serde_json::Value,
        extra: serde_json::Value,
    ) -> Result<Policy, ConfigError> {
        let mut config = serde_json::json!({
            "ca": { "cert": dir.join("ca.pem"), "key": dir.join("ca-key.pem") },
            "sandboxes": sandboxes,
        });
        if let (Some(config), Some(extra)) = (config.as_object_mut(), extra.as_object()) {
            config.extend(extra.clone());
        }
        Policy::compile(serde_json::from_value(config).expect("shape"), None)
    }

    fn rule(placeholder: &str, value: &str) -> serde_json::Value {
        serde_json::json!({ "host": "api.anthropic.com", "path_prefix": "/v1/", "header": "x-api-key",
                            "format": "raw", "placeholder": placeholder, "value": value })
    }

    #[test]
    fn inconsistent_configurations_are_refused_without_quoting_values() {
        let dir = std::env::temp_dir().join(format!("agenthold-proxy-policy-{}", rand::random::<u64>()));
        crate::ca::init(&dir, &["api.anthropic.com".to_owned()]).expect("ca");
        let sandbox = |id: &str, user: &str, rules: Vec<serde_json::Value>| serde_json::json!({ "id": id, "username": user, "password": "pw-secret", "inject": rules });
        let ok = compile_json(
            &dir,
            serde_json::json!([sandbox("a", "a", vec![rule("placeholder-a", "sk-real")])]),
            serde_json::json!({}),
        );
        assert!(ok.is_ok(), "{ok:?}");
        let cases = vec![
            (
                "CR/LF in a value",
                serde_json::json!([sandbox("a", "a", vec![rule("placeholder-a", "sk-real\r\nx-evil: 1")])]),
                serde_json::json!({}),
            ),
            (
                "a space in a value",
                serde_json::json!([sandbox("a", "a", vec![rule("placeholder-a", "sk real")])]),
                serde_json::json!({}),
            ),
            (
                "a placeholder shared by two sandboxes",
                serde_json::json!([
                    sandbox("a", "a", vec![rule("placeholder-x", "sk-1")]),
                    sandbox("b", "b", vec![rule("placeholder-x", "sk-2")])
                ]),
                serde_json::json!({}),
            ),
            (
                "duplicate usernames",
                serde_json::json!([sandbox("a", "u", vec![]), sandbox("b", "u", vec![])]),
                serde_json::json!({}),
            ),
            (
                "duplicate ids",
                serde_json::json!([sandbox("a", "u", vec![]), sandbox("a", "v", vec![])]),
                serde_json::json!({}),
            ),
            (
                "a host outside the CA",
                serde_json::json!([sandbox(
                    "a",
                    "a",
                    vec![{
                        let mut r = rule("placeholder-a", "sk-real");
                        r["host"] = serde_json::json!("api.openai.com");
                        r
                    }]
                )]),
                serde_json::json!({}),
            ),
            (
                "a non-loopback override",
                serde_json::json!([]),
                serde_json::json!({ "upstream_overrides": { "api.anthropic.com:443": { "addr": "10.0.0.1:443" } } }),
            ),
            (
                "a server route on an address",
                serde_json::json!([]),
                serde_json::json!({ "server_route": { "host": "10.0.0.1", "addr": "127.0.0.1:8080", "path_prefix": "/api/v1/mcp" } }),
            ),
            (
                "a server route without a path",
                serde_json::json!([]),
                serde_json::json!({ "server_route": { "host": "api.anthropic.com", "addr": "127.0.0.1:8080", "path_prefix": "api" } }),
            ),
            (
                "a server route outside the CA",
                serde_json::json!([]),
                serde_json::json!({ "server_route": { "host": "mcp.agenthold.internal", "addr": "127.0.0.1:8080", "path_prefix": "/api/v1/mcp" } }),
            ),
            (
                "a bad allow entry",
                serde_json::json!([{ "id": "a", "username": "a", "password": "pw", "allow": ["*"] }]),
                serde_json::json!({}),
            ),
        ];
        for (what, sandboxes, extra) in cases {
            let error = compile_json(&dir, sandboxes, extra).expect_err(what).to_string();
            for value in ["sk-real", "sk-1", "sk-2", "pw-secret", "x-evil"] {
                assert!(!error.contains(value), "{what}: {error}");
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn an_empty_source_list_admits_no_address_unless_any_source_says_so() {
        let dir = std::env::temp_dir().join(format!("agenthold-proxy-policy-{}", rand::random::<u64>()));
        crate::ca::init(&dir, &["api.anthropic.com".to_owned()]).expect("ca");
        let policy = compile_json(
            &dir,
            serde_json::json!([
                { "id": "cleared", "username": "cleared", "password": "pw-1" },
                { "id": "any", "username": "any", "password": "pw-2", "any_source": true },
                { "id": "bound", "username": "bound", "password": "pw-3", "source_addrs": ["172.30.0.2"] },
                { "id": "shares", "username": "shares", "password": "pw-4", "source_addrs": ["::ffff:172.30.0.2"] }
            ]),
            serde_json::json!({}),
        )
        .expect("compiles");
        let peer: IpAddr = "172.30.0.2".parse().expect("addr");
        let other: IpAddr = "172.30.0.9".parse().expect("addr");
        assert!(policy.authenticate("cleared", b"pw-1", peer).is_none(), "no address, no any_source: nobody");
        assert!(policy.authenticate("any", b"pw-2", other).is_some());
        assert!(policy.authenticate("bound", b"pw-3", peer).is_some());
        assert!(policy.authenticate("bound", b"pw-3", other).is_none());
        assert!(policy.authenticate("bound", b"pw-x", peer).is_none());
        assert_eq!(policy.allowance(peer), allowance(&policy.limits, 2), "two sandboxes share the address");
        assert!(policy.allowance(peer).bound && !policy.allowance(other).bound);
        let both = compile_json(
            &dir,
            serde_json::json!([{ "id": "both", "username": "both", "password": "pw",
                                 "any_source": true, "source_addrs": ["172.30.0.2"] }]),
            serde_json::json!({}),
        );
        assert!(both.expect_err("exclusive").to_string().contains("any_source"));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn allow_patterns() {
        let exact = AllowPattern::parse("Registry.npmjs.org.").expect("pattern");
        assert!(exact.matches(&target("registry.npmjs.org:443"), 443));
        assert!(!exact.matches(&target("registry.npmjs.org:80"), 443));
        assert!(exact.matches(&target("registry.npmjs.org:80"), 80));
        assert!(!exact.matches(&target("evil.registry.npmjs.org:443"), 443));
        let sub = AllowPattern::parse("*.github.com:443").expect("pattern");
        assert!(sub.matches(&target("api.github.com:443"), 80));
        assert!(!sub.matches(&target("github.com:443"), 443));
        assert!(!sub.matches(&target("evilgithub.com:443"), 443));
        let ip = AllowPattern::parse("2130706433:8080").expect("pattern");
        assert!(ip.matches(&target("127.0.0.1:8080"), 443));
        assert!(AllowPattern::parse("*").is_none());
        assert!(AllowPattern::parse("exa mple.com").is_none());
    }

    #[test]
    fn basic_rules_swap_the_password_inside_the_encoding() {
        use base64::Engine as _;
        let dir = std::env::temp_dir().join(format!("agenthold-proxy-policy-{}", rand::random::<u64>()));
        crate::ca::init(&dir, &["git.example.com".to_owned()]).expect("ca");
        let basic = |username: Option<&str>, format: &str| {
            let mut r = serde_json::json!({ "host": "git.example.com", "path_prefix": "/", "header": "authorization",
                                            "format": format, "placeholder": "agenthold-git-ph", "value": "ghp_real" });
            if let Some(username) = username {
                r["username"] = serde_json::json!(username);
            }
            serde_json::json!([{ "id": "a", "username": "a", "password": "pw", "any_source": true, "inject": [r] }])
        };
        let policy =
            compile_json(&dir, basic(Some("x-access-token"), "basic"), serde_json::json!({})).expect("compiles");
        let sandbox = policy.authenticate("a", b"pw", "127.0.0.1".parse().expect("addr")).expect("sandbox");
        let encoded = |pair: &str| format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(pair));
        let rule = &sandbox.rules[0];
        assert_eq!(rule.expected, encoded("x-access-token:agenthold-git-ph").as_str());
        assert_eq!(rule.replacement, encoded("x-access-token:ghp_real").as_str());
        // What git sends after its credential helper answered: swapped, on any path of the host.
        let mut headers = hyper::HeaderMap::new();
        headers.insert(
            "authorization",
            HeaderValue::from_str(&encoded("x-access-token:agenthold-git-ph")).expect("value"),
        );
        let rules: Vec<&Rule> = sandbox.rules.iter().collect();
        assert_eq!(crate::inject::apply(&mut headers, &rules, "/org/repo.git/git-receive-pack"), Ok(vec![0]));
        assert_eq!(headers["authorization"], encoded("x-access-token:ghp_real").as_str());
        // Another username, or the real token sent from inside: refused.
        for sent in ["someone:agenthold-git-ph", "x-access-token:ghp_other"] {
            let mut headers = hyper::HeaderMap::new();
            headers.insert("authorization", HeaderValue::from_str(&encoded(sent)).expect("value"));
            assert!(crate::inject::apply(&mut headers, &rules, "/r.git/info/refs").is_err(), "{sent}");
        }
        for (username, format) in [(None, "basic"), (Some("u"), "raw"), (Some("a:b"), "basic"), (Some(""), "basic")] {
            let error = compile_json(&dir, basic(username, format), serde_json::json!({})).expect_err("refused");
            assert!(!error.to_string().contains("ghp_real"), "{error}");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
