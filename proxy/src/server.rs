//! The listener: accepts connections (at most [`MAX_CONNECTIONS`] at once), serves HTTP/1.1 on
//! each, authenticates the sandbox and routes: CONNECT to [`crate::connect`], absolute-form
//! `http://` to [`crate::forward`], anything else is answered locally.

use std::convert::Infallible;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine;
use hyper::body::Incoming;
use hyper::header::PROXY_AUTHORIZATION;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, watch};
use tokio::task::JoinSet;

use crate::net::{BoxFuture, Network};
use crate::policy::{Policy, Sandbox};
use crate::reload::PolicyState;
use crate::respond::{self, Body};
use crate::secret::Secret;

/// Connections served at once; more are closed at accept.
pub const MAX_CONNECTIONS: usize = 4096;
/// How long a client may take to send a request head.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(30);
/// The largest request head accepted (bytes).
pub const MAX_HEAD_BYTES: usize = 64 * 1024;

/// What every connection shares.
pub struct Shared {
    /// The policy in force.
    pub policy: watch::Receiver<Arc<PolicyState>>,
    /// What follows the configuration file (checked at once when credentials are not known).
    pub follower: Arc<crate::reload::Follower>,
    /// Resolver and sockets.
    pub network: Arc<dyn Network>,
    /// The listener's address (refused as a destination).
    pub listener: SocketAddr,
    /// Open tunnels per sandbox.
    pub limits: Arc<crate::limits::SandboxLimits>,
}

/// Work that continues on a connection after its HTTP exchange upgraded it (a tunnel).
pub type Next = BoxFuture<'static, ()>;

/// Tasks owned by one connection (upstream connection drivers); aborted when it ends.
#[derive(Clone, Default)]
pub struct Owned(Arc<Mutex<JoinSet<()>>>);

impl Owned {
    /// Runs `task` until it ends or the owner is dropped.
    pub fn spawn(&self, task: impl Future<Output = ()> + Send + 'static) {
        if let Ok(mut set) = self.0.lock() {
            while set.try_join_next().is_some() {}
            set.spawn(task);
        }
    }

    /// Aborts every task.
    pub fn abort_all(&self) {
        if let Ok(mut set) = self.0.lock() {
            set.abort_all();
        }
    }
}

/// One client connection.
#[derive(Clone)]
pub struct ConnCtx {
    /// Shared state.
    pub shared: Arc<Shared>,
    /// The client's address.
    pub peer: SocketAddr,
    /// The address the client reached the proxy on.
    pub local: SocketAddr,
    /// What to run once the connection is upgraded.
    pub next: Arc<Mutex<Option<Next>>>,
    /// Tasks of this connection.
    pub owned: Owned,
}

impl ConnCtx {
    /// The proxy's own addresses as seen from this connection.
    pub fn own_addrs(&self) -> Vec<IpAddr> {
        let mut own = vec![self.local.ip()];
        if !self.shared.listener.ip().is_unspecified() {
            own.push(self.shared.listener.ip());
        }
        own
    }

    /// Sets what runs after the upgrade.
    pub fn then(&self, next: Next) {
        if let Ok(mut slot) = self.next.lock() {
            *slot = Some(next);
        }
    }
}

/// Proxy credentials as presented, kept to re-check them against later configurations.
#[derive(Clone, Debug)]
pub struct Credentials {
    /// User name.
    pub username: String,
    /// Password.
    pub password: Secret,
}

impl Credentials {
    /// The sandbox these credentials (from `peer`) belong to under `state`.
    pub fn sandbox(&self, state: &PolicyState, peer: IpAddr) -> Option<(Arc<Policy>, Arc<Sandbox>)> {
        let policy = state.policy()?;
        let sandbox = policy.authenticate(&self.username, self.password.expose().as_bytes(), peer)?;
        Some((policy.clone(), sandbox))
    }
}

/// An authenticated request's context (holding one of the sandbox's connection slots).
pub struct Authenticated {
    /// The slot, released when the request (or its tunnel) ends.
    pub slot: crate::limits::Slot,
    /// The policy it was decided under.
    pub policy: Arc<Policy>,
    /// The sandbox.
    pub sandbox: Arc<Sandbox>,
    /// The credentials.
    pub credentials: Credentials,
}

/// Checks `Proxy-Authorization` (and the client address): 407 when missing or wrong, 403 when
/// no valid configuration is loaded. Credentials the policy in force does not know make the
/// configuration file be checked for a change first (the server writes a sandbox in just before
/// its harness starts); the answer then comes from the file as it is now.
pub async fn authenticate(req: &Request<Incoming>, ctx: &ConnCtx) -> Result<Authenticated, Response<Body>> {
    let credentials = parse_basic(req);
    let mut state = ctx.shared.policy.borrow().clone();
    let known = |state: &PolicyState| credentials.as_ref().and_then(|c| c.sandbox(state, ctx.peer.ip()));
    if known(&state).is_none() {
        // Whether this check applied the file or waited for the poller applying it, the policy
        // in force may have changed: read it again either way.
        let follower = Arc::clone(&ctx.shared.follower);
        let _ = tokio::task::spawn_blocking(move || follower.check()).await;
        state = ctx.shared.policy.borrow().clone();
    }
    if state.policy().is_none() {
        return Err(respond::text(StatusCode::FORBIDDEN, "no valid configuration is loaded; all access is denied"));
    }
    let Some((policy, sandbox)) = known(&state) else {
        tracing::info!(client = %ctx.peer, "proxy authentication failed");
        return Err(respond::auth_required());
    };
    let credentials = credentials.ok_or_else(respond::auth_required)?;
    let Some(slot) = ctx.shared.limits.try_acquire(&sandbox.id, policy.max_per_sandbox) else {
        tracing::warn!(sandbox = %sandbox.id, "connection limit of the sandbox reached");
        return Err(respond::text(StatusCode::TOO_MANY_REQUESTS, "too many open connections for this sandbox"));
    };
    Ok(Authenticated { slot, policy, sandbox, credentials })
}

fn parse_basic(req: &Request<Incoming>) -> Option<Credentials> {
    let mut values = req.headers().get_all(PROXY_AUTHORIZATION).iter();
    let value = values.next()?;
    if values.next().is_some() {
        return None;
    }
    let value = value.to_str().ok()?;
    let (scheme, encoded) = value.trim().split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let decoded = base64::engine::general_purpose::STANDARD.decode(encoded.trim()).ok()?;
    let decoded = String::from_utf8(decoded).ok()?;
    let (username, password) = decoded.split_once(':')?;
    Some(Credentials { username: username.to_owned(), password: Secret::new(password) })
}

async fn route(req: Request<Incoming>, ctx: ConnCtx) -> Response<Body> {
    if req.method() == Method::CONNECT {
        return crate::connect::handle(req, ctx).await;
    }
    match req.uri().scheme_str() {
        Some("http") => crate::forward::plain(req, ctx).await,
        Some(_) => respond::text(StatusCode::BAD_REQUEST, "send HTTPS requests through CONNECT"),
        None if req.uri().path() == "/healthz" => respond::text(StatusCode::OK, "ok"),
        None => respond::text(
            StatusCode::BAD_REQUEST,
            "this is an egress proxy: use CONNECT or absolute-form http:// requests",
        ),
    }
}

async fn serve_connection(stream: TcpStream, peer: SocketAddr, shared: Arc<Shared>) {
    let Ok(local) = stream.local_addr() else { return };
    let _ = stream.set_nodelay(true);
    let ctx = ConnCtx { shared, peer, local, next: Arc::new(Mutex::new(None)), owned: Owned::default() };
    let service_ctx = ctx.clone();
    let service = service_fn(move |req| {
        let ctx = service_ctx.clone();
        async move { Ok::<_, Infallible>(route(req, ctx).await) }
    });
    let result = http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT)
        .max_buf_size(MAX_HEAD_BYTES)
        .serve_connection(TokioIo::new(stream), service)
        .with_upgrades()
        .await;
    let next = ctx.next.lock().ok().and_then(|mut slot| slot.take());
    if result.is_ok()
        && let Some(next) = next
    {
        next.await;
    }
    ctx.owned.abort_all();
}

/// Serves the proxy on `listener` with the configuration at `config` (followed for changes)
/// until `shutdown` resolves; then closes every connection.
pub async fn run_with(
    listener: TcpListener,
    config: std::path::PathBuf,
    network: Arc<dyn Network>,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    let listener_addr = listener.local_addr()?;
    let (policy, follower, poller) =
        tokio::task::spawn_blocking(move || crate::reload::follow(config)).await.map_err(std::io::Error::other)?;
    let shared = Arc::new(Shared { policy, follower, network, listener: listener_addr, limits: Arc::default() });
    let limit = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let mut tasks = JoinSet::new();
    tasks.spawn(poller);
    tracing::info!(listen = %listener_addr, "agenthold-proxy listening");
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            () = &mut shutdown => break,
            Some(_) = tasks.join_next() => {}
            accepted = listener.accept() => {
                let (stream, peer) = match accepted {
                    Ok(accepted) => accepted,
                    Err(error) => {
                        tracing::warn!(%error, "accept failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                let Ok(permit) = limit.clone().try_acquire_owned() else {
                    tracing::warn!(client = %peer, "connection limit reached; closing");
                    continue;
                };
                let shared = shared.clone();
                tasks.spawn(async move {
                    serve_connection(stream, peer, shared).await;
                    drop(permit);
                });
            }
        }
    }
    tracing::info!("agenthold-proxy shutting down");
    tasks.abort_all();
    while tasks.join_next().await.is_some() {}
    Ok(())
}
