//! The configuration file as written by the server (or an operator): serde types only. What the
//! fields mean and how they are checked lives in [`crate::policy`]; the format is documented in
//! `docs/proxy.md`.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;

use serde::Deserialize;

use crate::secret::Secret;

/// The whole file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigFile {
    /// An opaque version number, logged when the configuration is applied.
    #[serde(default)]
    pub version: Option<u64>,
    /// The proxy's CA (made by `agenthold-proxy ca init`).
    pub ca: CaPaths,
    /// Refuse private (10/8, 172.16/12, 192.168/16, fc00::/7) and CGNAT destinations. Default true.
    #[serde(default = "default_true")]
    pub deny_private: bool,
    /// More addresses of the proxy itself, refused as destinations (the listener's and each
    /// connection's local address are refused anyway).
    #[serde(default)]
    pub own_addrs: Vec<IpAddr>,
    /// Private or reserved addresses the proxy may dial all the same, for an allowed host only:
    /// where the host's DNS points a registry's name at a mirror (a package mirror inside the
    /// network). Loopback, link-local, unspecified, multicast and the proxy's own addresses are
    /// refused whatever this says.
    #[serde(default)]
    pub allow_addrs: Vec<IpAddr>,
    /// Seconds a pass-through tunnel may stay idle before it is closed. Default 600.
    #[serde(default)]
    pub tunnel_idle_timeout_secs: Option<u64>,
    /// Client connections one sandbox may hold open at once once they have authenticated
    /// (tunnels, and plain-HTTP connections until their last response body ends). Default 256.
    #[serde(default)]
    pub max_connections_per_sandbox: Option<usize>,
    /// Connections from one client address that have not authenticated yet (per sandbox bound to
    /// the address, when several share it). Default 64.
    #[serde(default)]
    pub max_unauthenticated_per_source: Option<usize>,
    /// Unauthenticated connections from addresses no sandbox is bound to, all together. Default
    /// 1024. Sandboxes' own addresses do not draw from it.
    #[serde(default)]
    pub max_unauthenticated: Option<usize>,
    /// Seconds a connection has to send a complete, authenticated request head. Default 5.
    #[serde(default)]
    pub auth_timeout_secs: Option<u64>,
    /// Seconds between two readings of the host's interface addresses (refused as
    /// destinations). Default 30.
    #[serde(default)]
    pub host_addrs_refresh_secs: Option<u64>,
    /// One entry per sandbox.
    #[serde(default)]
    pub sandboxes: Vec<SandboxConfig>,
    /// agenthold's own service for sandboxes (its MCP server): requests to this host are sent
    /// to the server over plain HTTP, and only with a sandbox's injection rule for the host.
    #[serde(default)]
    pub server_route: Option<ServerRouteConfig>,
    /// TEST ONLY: `host:port` → a loopback stand-in (and a CA to trust for it).
    #[serde(default)]
    pub upstream_overrides: BTreeMap<String, UpstreamOverride>,
}

fn default_true() -> bool {
    true
}

/// Where the CA certificate and key are.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CaPaths {
    /// PEM certificate (what sandboxes trust).
    pub cert: PathBuf,
    /// PEM PKCS#8 private key.
    pub key: PathBuf,
}

/// One sandbox's identity and what it may reach.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SandboxConfig {
    /// The sandbox id (for logs).
    pub id: String,
    /// Proxy user name (`http://username:password@proxy:port`).
    pub username: String,
    /// Proxy password.
    pub password: Secret,
    /// The client address must be one of these too. Empty: no address is admitted, unless
    /// `any_source` says so.
    #[serde(default)]
    pub source_addrs: Vec<IpAddr>,
    /// Admit these credentials from any client address (credentials alone identify the
    /// sandbox). Only with an empty `source_addrs`; never implied by one.
    #[serde(default)]
    pub any_source: bool,
    /// `host`, `host:port`, `*.domain`, `*.domain:port`, or an address literal.
    #[serde(default)]
    pub allow: Vec<String>,
    /// Placeholder swaps.
    #[serde(default)]
    pub inject: Vec<InjectConfig>,
    /// Requests the proxy answers itself, never sending them on (e.g. a token refresh whose
    /// real counterpart only the server may make).
    #[serde(default)]
    pub answer: Vec<AnswerConfig>,
}

/// A request the proxy answers itself: any method to exactly `path` on `host:port`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AnswerConfig {
    /// The host (a DNS name the CA covers): the proxy terminates TLS for it.
    pub host: String,
    /// The port. Default 443.
    #[serde(default = "default_https_port")]
    pub port: u16,
    /// The exact path (no query).
    pub path: String,
    /// The status. Default 200.
    #[serde(default = "default_ok")]
    pub status: u16,
    /// The content type. Default `application/json`.
    #[serde(default = "default_json")]
    pub content_type: String,
    /// The body (it must hold no secret: sandboxes read it).
    pub body: String,
}

fn default_ok() -> u16 {
    200
}

fn default_json() -> String {
    "application/json".to_owned()
}

/// One injection rule.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InjectConfig {
    /// The host (a DNS name the CA covers).
    pub host: String,
    /// The port. Default 443.
    #[serde(default = "default_https_port")]
    pub port: u16,
    /// Requests whose path starts with this get the value.
    pub path_prefix: String,
    /// The one header the value goes into.
    pub header: String,
    /// `raw`, `bearer` or `basic`.
    pub format: Format,
    /// The HTTP Basic username (`basic` only: required there, refused elsewhere).
    #[serde(default)]
    pub username: Option<String>,
    /// What the sandbox sends instead of the value.
    pub placeholder: String,
    /// The real value.
    pub value: Secret,
}

fn default_https_port() -> u16 {
    443
}

/// How the header value is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    /// The value itself.
    Raw,
    /// `Bearer <value>`.
    Bearer,
    /// `Basic base64(<username>:<value>)`: HTTP Basic with the value as password (what git sends
    /// a host's token as). The sandbox sends `Basic base64(<username>:<placeholder>)`.
    Basic,
}

/// agenthold's own service, reached through the proxy (docs/proxy.md, "agenthold's MCP server").
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerRouteConfig {
    /// The reserved name sandboxes use (port 443; a name the CA covers).
    pub host: String,
    /// Where the server listens (the proxy dials it over plain HTTP: same host or network).
    pub addr: SocketAddr,
    /// Only requests under this path are forwarded.
    pub path_prefix: String,
}

/// TEST ONLY: where a host:port is really dialled.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpstreamOverride {
    /// A loopback address.
    pub addr: SocketAddr,
    /// A PEM CA trusted (in addition to the public roots) for this host only.
    #[serde(default)]
    pub ca_cert: Option<PathBuf>,
}
