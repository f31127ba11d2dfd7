//! Reaching a destination: resolve once, check every address (see [`crate::addr`]), and connect
//! to exactly an address that was checked (pinned; no second lookup). The resolver, the socket
//! and the host's own addresses are behind [`Network`] so tests can see every dial, never leave
//! loopback, and give the proxy addresses of their own.

use std::future::Future;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use rustls::ClientConfig;
use tokio::net::TcpStream;

use crate::addr::{Refusal, check_allowing};
use crate::host::{Host, Target};
use crate::policy::Policy;

/// A boxed future, for the object-safe [`Network`].
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Name resolution and TCP connections.
pub trait Network: Send + Sync + 'static {
    /// The addresses of `host`.
    fn resolve<'a>(&'a self, host: &'a str, port: u16) -> BoxFuture<'a, io::Result<Vec<IpAddr>>>;
    /// A TCP connection to `addr`.
    fn connect(&self, addr: SocketAddr) -> BoxFuture<'_, io::Result<TcpStream>>;
    /// Every address of the proxy's own host (refused as destinations): by default its
    /// interfaces' addresses ([`crate::hostaddrs::read`]).
    fn host_addrs(&self) -> BoxFuture<'_, io::Result<Vec<IpAddr>>> {
        Box::pin(async { tokio::task::spawn_blocking(crate::hostaddrs::read).await.map_err(io::Error::other)? })
    }
}

/// The system resolver and real sockets.
#[derive(Debug, Default)]
pub struct SystemNetwork;

impl Network for SystemNetwork {
    fn resolve<'a>(&'a self, host: &'a str, port: u16) -> BoxFuture<'a, io::Result<Vec<IpAddr>>> {
        Box::pin(async move { Ok(tokio::net::lookup_host((host, port)).await?.map(|a| a.ip()).collect()) })
    }

    fn connect(&self, addr: SocketAddr) -> BoxFuture<'_, io::Result<TcpStream>> {
        Box::pin(async move {
            let stream = TcpStream::connect(addr).await?;
            stream.set_nodelay(true)?;
            Ok(stream)
        })
    }
}

const RESOLVE_TIMEOUT: Duration = Duration::from_secs(5);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Why a destination cannot be reached.
#[derive(Debug, thiserror::Error)]
pub enum DialError {
    /// An address it resolves to is refused.
    #[error("resolves to {}; refused", .0.as_str())]
    Refused(Refusal),
    /// The name does not resolve.
    #[error("does not resolve")]
    Resolve,
    /// No connection could be made.
    #[error("cannot be reached")]
    Connect,
}

/// Where a checked destination is dialled, and how its TLS is verified.
#[derive(Clone, Debug)]
pub struct Pinned {
    /// The checked addresses, in order.
    pub addrs: Vec<SocketAddr>,
    /// Upstream TLS (public roots, or an override's).
    pub tls: Arc<ClientConfig>,
    /// Plain HTTP upstream (agenthold's own service, [`crate::policy::ServerRoute`]).
    pub plain: bool,
}

impl Pinned {
    /// agenthold's own service.
    pub fn server(route: &crate::policy::ServerRoute, policy: &Policy) -> Self {
        Self { addrs: vec![route.addr], tls: policy.public_tls.clone(), plain: true }
    }
}

/// Resolves `target` and checks every address. `local` is the address the client reached the
/// proxy on (refused as a destination, like the listener's and the configured own addresses).
pub async fn resolve_checked(
    policy: &Policy,
    network: &dyn Network,
    target: &Target,
    own: &[IpAddr],
) -> Result<Pinned, DialError> {
    if let Some(over) = policy.overrides.get(target) {
        return Ok(Pinned { addrs: vec![over.addr], tls: over.tls.clone(), plain: false });
    }
    let ips = match &target.host {
        Host::Ip(ip) => vec![*ip],
        Host::Name(name) => tokio::time::timeout(RESOLVE_TIMEOUT, network.resolve(name, target.port))
            .await
            .map_err(|_| DialError::Resolve)?
            .map_err(|_| DialError::Resolve)?,
    };
    if ips.is_empty() {
        return Err(DialError::Resolve);
    }
    let mut refused_by = policy.own_addrs.clone();
    refused_by.extend_from_slice(own);
    for ip in &ips {
        check_allowing(*ip, policy.deny_private, &refused_by, &policy.allow_addrs).map_err(DialError::Refused)?;
    }
    Ok(Pinned {
        addrs: ips.into_iter().map(|ip| SocketAddr::new(ip, target.port)).collect(),
        tls: policy.public_tls.clone(),
        plain: false,
    })
}

/// Connects to the first pinned address that answers.
pub async fn connect_pinned(network: &dyn Network, pinned: &Pinned) -> Result<TcpStream, DialError> {
    for addr in &pinned.addrs {
        if let Ok(Ok(stream)) = tokio::time::timeout(CONNECT_TIMEOUT, network.connect(*addr)).await {
            return Ok(stream);
        }
    }
    Err(DialError::Connect)
}
