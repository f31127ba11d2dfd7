//! The proxy's configuration file as the server writes it: serde types mirroring
//! `agenthold_proxy::config` (which only deserializes). A test parses what these produce with the
//! proxy's own parser. Values and passwords serialize in clear (the file is 0600) and print
//! redacted.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;

use serde::{Serialize, Serializer};
use zeroize::Zeroizing;

pub use crate::config::UpstreamOverride;
use crate::secret::Secret;

/// The whole file.
#[derive(Debug, Clone, Serialize)]
pub struct ProxyFile {
    /// Logged by the proxy when applied.
    pub version: u64,
    /// The proxy's CA.
    pub ca: CaPaths,
    /// Refuse private and CGNAT destinations (always true here).
    pub deny_private: bool,
    /// More addresses of the proxy itself.
    pub own_addrs: Vec<IpAddr>,
    /// Private or reserved addresses the proxy may dial all the same (an operator's mirror).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub allow_addrs: Vec<IpAddr>,
    /// One entry per agent.
    pub sandboxes: Vec<SandboxEntry>,
    /// TEST ONLY: stand-ins for hosts.
    pub upstream_overrides: BTreeMap<String, UpstreamOverride>,
    /// agenthold's own service (its MCP server), reached through the proxy.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_route: Option<ServerRouteEntry>,
}

/// agenthold's own service for sandboxes: the reserved host, where the server listens, and the
/// one path prefix forwarded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ServerRouteEntry {
    /// The reserved name ([`crate::mcp::HOST`]).
    pub host: String,
    /// The server's API address as the proxy dials it.
    pub addr: SocketAddr,
    /// [`crate::mcp::PATH`].
    pub path_prefix: String,
}

impl ServerRouteEntry {
    /// The MCP route of a server listening on `api` (an unspecified address is dialled on
    /// loopback: the proxy runs on the server's host).
    pub fn mcp(api: SocketAddr) -> Self {
        let ip = if api.ip().is_unspecified() {
            if api.is_ipv4() { IpAddr::from([127, 0, 0, 1]) } else { IpAddr::from(std::net::Ipv6Addr::LOCALHOST) }
        } else {
            api.ip()
        };
        Self {
            host: crate::mcp::HOST.to_owned(),
            addr: SocketAddr::new(ip, api.port()),
            path_prefix: crate::mcp::PATH.to_owned(),
        }
    }
}

/// Where the CA's files are.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CaPaths {
    /// `ca.pem`.
    pub cert: PathBuf,
    /// `ca-key.pem`.
    pub key: PathBuf,
}

/// One sandbox (agent).
#[derive(Debug, Clone, Serialize)]
pub struct SandboxEntry {
    /// The agent's id.
    pub id: String,
    /// Its proxy username.
    pub username: String,
    /// Its proxy password.
    #[serde(serialize_with = "expose")]
    pub password: Secret,
    /// The addresses its credentials are admitted from (empty: from none, unless `any_source`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub source_addrs: Vec<IpAddr>,
    /// Its credentials are admitted from any address: only for an agent that never had an
    /// address where no sandbox holds proxy credentials ([`super::sources`]).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub any_source: bool,
    /// `host[:port]` / `*.domain[:port]`, sorted.
    pub allow: Vec<String>,
    /// Placeholder swaps.
    pub inject: Vec<InjectEntry>,
    /// Requests the proxy answers itself.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub answer: Vec<AnswerEntry>,
}

/// A request the proxy answers itself (any method, exactly this path; the body holds no secret).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AnswerEntry {
    /// The host.
    pub host: String,
    /// The exact path.
    pub path: String,
    /// The JSON body.
    pub body: String,
}

/// One injection rule with its value.
#[derive(Debug, Clone, Serialize)]
pub struct InjectEntry {
    /// The host.
    pub host: String,
    /// The port.
    pub port: u16,
    /// The path prefix.
    pub path_prefix: String,
    /// The header.
    pub header: String,
    /// `raw`, `bearer` or `basic`.
    pub format: InjectFormat,
    /// The HTTP Basic username (`basic` only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub username: Option<String>,
    /// What the sandbox holds.
    pub placeholder: String,
    /// The real value.
    #[serde(serialize_with = "expose")]
    pub value: Secret,
}

/// How the header is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum InjectFormat {
    /// `{secret}`.
    Raw,
    /// `Bearer {secret}`.
    Bearer,
    /// `Basic base64(<username>:{secret})` (a `git_token` secret).
    Basic,
}

fn expose<S: Serializer>(secret: &Secret, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(secret.expose())
}

impl ProxyFile {
    /// The file's bytes (wiped when dropped: they hold every value).
    pub fn to_bytes(&self) -> serde_json::Result<Zeroizing<Vec<u8>>> {
        serde_json::to_vec_pretty(self).map(Zeroizing::new)
    }
}
