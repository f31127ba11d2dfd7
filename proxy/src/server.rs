//! The listener: admits connections (per client address, [`crate::admission`]), serves HTTP/1.1
//! on each, closes one that has not authenticated within `auth_timeout_secs`, binds an
//! authenticated connection to its sandbox (one of the sandbox's slots, [`crate::limits`], for
//! the connection's whole life) and routes: CONNECT to [`crate::connect`], absolute-form
//! `http://` to [`crate::forward`], anything else is answered locally. It also keeps the host's
//! own addresses ([`crate::hostaddrs`]) fresh.

use std::convert::Infallible;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use hyper::body::Incoming;
use hyper::header::PROXY_AUTHORIZATION;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use parking_lot::Mutex;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::admission::{Admission, Full, Ticket};
use crate::hostaddrs::HostAddrs;
use crate::limits::{ConnectionLimits, HOST_ADDRS_REFRESH_SECS, Slot};
use crate::net::{BoxFuture, Network};
use crate::policy::{Policy, Sandbox};
use crate::reload::PolicyState;
use crate::respond::{self, Body};
use crate::secret::Secret;

/// How long an authenticated client may take to send a request head (and how long a
/// keep-alive connection may idle between requests).
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
    /// Open connections per sandbox.
    pub limits: Arc<crate::limits::SandboxLimits>,
    /// Unauthenticated connections per client address.
    pub admission: Arc<Admission>,
    /// The host's own addresses (refused as destinations).
    pub host_addrs: Arc<HostAddrs>,
    /// Responses cut short: counted, logged, reported beside the configuration file.
    pub cuts: Arc<crate::cut::Reports>,
}

/// Where a connection stands: not authenticated yet (holding its place from accept), or bound
/// to the sandbox it authenticated as (holding one of that sandbox's slots until it closes:
/// tunnels, intercepted sessions and plain-HTTP responses, bodies included, all count).
#[derive(Debug)]
enum Standing {
    /// Holds its place from accept (given back on drop).
    Unauthenticated {
        _place: Ticket,
    },
    Bound(Slot),
    Closed,
}

/// Work that continues on a connection after its HTTP exchange upgraded it (a tunnel).
pub type Next = BoxFuture<'static, ()>;

/// Tasks owned by one connection (upstream connection drivers); aborted when it ends.
#[derive(Clone, Default)]
pub struct Owned(Arc<Mutex<JoinSet<()>>>);

impl Owned {
    /// Runs `task` until it ends or the owner is dropped.
    pub fn spawn(&self, task: impl Future<Output = ()> + Send + 'static) {
        let mut set = self.0.lock();
        while set.try_join_next().is_some() {}
        set.spawn(task);
    }

    /// Aborts every task.
    pub fn abort_all(&self) {
        self.0.lock().abort_all();
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
    standing: Arc<Mutex<Standing>>,
}

impl ConnCtx {
    /// The proxy's own addresses: the one this connection reached it on, the listener's, and
    /// every address of its host.
    pub fn own_addrs(&self) -> Vec<IpAddr> {
        let host = self.shared.host_addrs.get();
        let mut own = Vec::with_capacity(host.len() + 2);
        own.push(self.local.ip());
        if !self.shared.listener.ip().is_unspecified() {
            own.push(self.shared.listener.ip());
        }
        own.extend(host.iter().copied());
        own
    }

    /// Whether the connection has authenticated.
    fn is_bound(&self) -> bool {
        matches!(*self.standing.lock(), Standing::Bound(_))
    }

    /// Binds the connection to `sandbox` on its first authenticated request (giving back its
    /// place from accept and taking one of the sandbox's slots); later requests must be the same
    /// sandbox's.
    #[expect(clippy::result_large_err, reason = "the error is the response to send")]
    fn bind(&self, sandbox: &Sandbox, limits: &ConnectionLimits) -> Result<(), Response<Body>> {
        let mut standing = self.standing.lock();
        match &*standing {
            Standing::Bound(slot) if slot.sandbox() == sandbox.id => Ok(()),
            Standing::Bound(_) | Standing::Closed => {
                tracing::info!(sandbox = %sandbox.id, client = %self.peer, "credentials of another sandbox on a bound connection");
                Err(respond::text(StatusCode::FORBIDDEN, "this connection belongs to another sandbox"))
            }
            Standing::Unauthenticated { .. } => match self.shared.limits.try_acquire(&sandbox.id, limits.per_sandbox) {
                Some(slot) => {
                    *standing = Standing::Bound(slot);
                    Ok(())
                }
                None => {
                    tracing::warn!(sandbox = %sandbox.id, "connection limit of the sandbox reached");
                    Err(respond::text(StatusCode::TOO_MANY_REQUESTS, "too many open connections for this sandbox"))
                }
            },
        }
    }

    /// Sets what runs after the upgrade.
    pub fn then(&self, next: Next) {
        *self.next.lock() = Some(next);
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

/// An authenticated request's context (its connection holds one of the sandbox's slots).
pub struct Authenticated {
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
        check_file(ctx).await;
        state = ctx.shared.policy.borrow().clone();
    }
    if state.policy().is_none() {
        return Err(respond::text(StatusCode::FORBIDDEN, "no valid configuration is loaded; all access is denied"));
    }
    let Some((policy, sandbox)) = known(&state) else {
        // The target's authority only (never a path or query of a plain-HTTP request).
        let target = req.uri().authority().map(ToString::to_string).unwrap_or_default();
        tracing::info!(client = %ctx.peer, %target, "proxy authentication failed");
        ctx.shared.cuts.refused(ctx.peer.ip());
        return Err(respond::auth_required());
    };
    let credentials = credentials.ok_or_else(respond::auth_required)?;
    ctx.bind(&sandbox, &policy.limits)?;
    Ok(Authenticated { policy, sandbox, credentials })
}

/// Applies the configuration file if it changed since it was last seen (a `stat`; a parse and
/// compile when changed), off the reactor.
async fn check_file(ctx: &ConnCtx) {
    let follower = Arc::clone(&ctx.shared.follower);
    let _ = tokio::task::spawn_blocking(move || follower.check()).await;
}

/// [`authenticate`] again after checking the file for a change: for a request its sandbox's
/// entry in force refuses, which the server may have just widened (an agent that took a harness
/// the warm pool started: the pool's entry reached agenthold's MCP route only, the agent's
/// reaches its providers) — the harness's first request must not wait for the next poll.
pub async fn authenticate_afresh(req: &Request<Incoming>, ctx: &ConnCtx) -> Result<Authenticated, Response<Body>> {
    check_file(ctx).await;
    authenticate(req, ctx).await
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

/// Whether `method` is refused everywhere: `TRACE` and `TRACK` echo the request (headers
/// included) back to whoever can read the response.
pub fn refused_method(method: &Method) -> bool {
    method.as_str().eq_ignore_ascii_case("TRACE") || method.as_str().eq_ignore_ascii_case("TRACK")
}

/// The answer to a refused method.
pub fn method_refused() -> Response<Body> {
    respond::text(StatusCode::METHOD_NOT_ALLOWED, "TRACE and TRACK are refused")
}

async fn route(req: Request<Incoming>, ctx: ConnCtx) -> Response<Body> {
    if refused_method(req.method()) {
        tracing::info!(client = %ctx.peer, method = %req.method(), decision = "method-refused", "request refused");
        return method_refused();
    }
    if req.method() == Method::CONNECT {
        return crate::connect::handle(req, ctx).await;
    }
    match req.uri().scheme_str() {
        Some("http") => crate::forward::plain(req, ctx).await,
        Some(_) => respond::text(StatusCode::BAD_REQUEST, "send HTTPS requests through CONNECT"),
        None if req.uri().path() == "/healthz" => respond::text(StatusCode::OK, "ok"),
        None if req.uri().path() == "/metrics" => respond::metrics(ctx.shared.cuts.metrics()),
        None => respond::text(
            StatusCode::BAD_REQUEST,
            "this is an egress proxy: use CONNECT or absolute-form http:// requests",
        ),
    }
}

/// Resolves `timeout` after it starts if the connection has not authenticated by then; never
/// otherwise.
async fn unauthenticated_after(ctx: &ConnCtx, timeout: Duration) {
    tokio::time::sleep(timeout).await;
    if ctx.is_bound() {
        std::future::pending::<()>().await;
    }
}

async fn serve_connection(stream: TcpStream, peer: SocketAddr, shared: Arc<Shared>, ticket: Ticket) {
    let Ok(local) = stream.local_addr() else { return };
    let _ = stream.set_nodelay(true);
    let auth_timeout = shared.policy.borrow().policy().map(|p| p.limits).unwrap_or_default().auth_timeout;
    let ctx = ConnCtx {
        shared,
        peer,
        local,
        next: Arc::new(Mutex::new(None)),
        owned: Owned::default(),
        standing: Arc::new(Mutex::new(Standing::Unauthenticated { _place: ticket })),
    };
    let service_ctx = ctx.clone();
    let service = service_fn(move |req| {
        let ctx = service_ctx.clone();
        async move { Ok::<_, Infallible>(route(req, ctx).await) }
    });
    let served = http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT)
        .max_buf_size(MAX_HEAD_BYTES)
        .serve_connection(TokioIo::new(stream), service)
        .with_upgrades();
    let result = tokio::select! {
        result = served => Some(result),
        () = unauthenticated_after(&ctx, auth_timeout) => None,
    };
    match result {
        None => tracing::info!(client = %peer, "closed: no authenticated request within {} s", auth_timeout.as_secs()),
        Some(result) => {
            let next = ctx.next.lock().take();
            if result.is_ok()
                && let Some(next) = next
            {
                next.await;
            }
        }
    }
    ctx.owned.abort_all();
    // Give the place (or the sandbox's slot) back now, not when the last clone goes.
    *ctx.standing.lock() = Standing::Closed;
}

/// Reads the host's addresses every `host_addrs_refresh_secs` (of the policy in force); a
/// failed reading keeps the last one.
async fn refresh_host_addrs(
    network: Arc<dyn Network>,
    addrs: Arc<HostAddrs>,
    policy: watch::Receiver<Arc<PolicyState>>,
) {
    loop {
        let every = policy
            .borrow()
            .policy()
            .map(|p| p.host_addrs_refresh)
            .unwrap_or(Duration::from_secs(HOST_ADDRS_REFRESH_SECS.default));
        tokio::time::sleep(every).await;
        read_host_addrs(network.as_ref(), &addrs).await;
    }
}

async fn read_host_addrs(network: &dyn Network, addrs: &HostAddrs) {
    match network.host_addrs().await {
        Ok(found) => {
            let count = found.len();
            if addrs.set(found) {
                tracing::info!(count, "the host's own addresses (refused as destinations) changed");
                tracing::debug!(addrs = ?addrs.get(), "the host's own addresses");
            }
        }
        Err(error) => {
            tracing::error!(%error, "cannot read the host's own addresses; the last reading stays refused")
        }
    }
}

/// Counts connections refused at accept and logs them at most every few seconds (a flood must
/// not flood the log).
#[derive(Default)]
struct RefusedAtAccept {
    source: u64,
    shared: u64,
    last: Option<std::time::Instant>,
}

impl RefusedAtAccept {
    const EVERY: Duration = Duration::from_secs(10);

    fn note(&mut self, full: Full, peer: SocketAddr) {
        match full {
            Full::Source => self.source += 1,
            Full::Shared => self.shared += 1,
        }
        if self.last.is_some_and(|last| last.elapsed() < Self::EVERY) {
            return;
        }
        tracing::warn!(
            client = %peer,
            per_address = self.source,
            shared_pool = self.shared,
            "connections closed at accept: too many unauthenticated connections (max_unauthenticated_per_source, max_unauthenticated)"
        );
        *self = Self { last: Some(std::time::Instant::now()), ..Self::default() };
    }
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
    let cuts = Arc::new(crate::cut::Reports::beside(&config));
    let (policy, follower, poller) =
        tokio::task::spawn_blocking(move || crate::reload::follow(config)).await.map_err(std::io::Error::other)?;
    let host_addrs = Arc::new(HostAddrs::default());
    read_host_addrs(network.as_ref(), &host_addrs).await;
    let shared = Arc::new(Shared {
        policy,
        follower,
        network: network.clone(),
        listener: listener_addr,
        limits: Arc::default(),
        admission: Arc::default(),
        host_addrs: host_addrs.clone(),
        cuts,
    });
    let mut tasks = JoinSet::new();
    tasks.spawn(poller);
    tasks.spawn(refresh_host_addrs(network, host_addrs, shared.policy.clone()));
    let mut refused = RefusedAtAccept::default();
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
                let allowance = match shared.policy.borrow().policy() {
                    Some(policy) => policy.allowance(peer.ip()),
                    None => crate::policy::allowance(&ConnectionLimits::default(), 0),
                };
                let ticket = match shared.admission.admit(peer.ip(), allowance) {
                    Ok(ticket) => ticket,
                    Err(full) => {
                        refused.note(full, peer);
                        continue;
                    }
                };
                tasks.spawn(serve_connection(stream, peer, shared.clone(), ticket));
            }
        }
    }
    tracing::info!("agenthold-proxy shutting down");
    tasks.abort_all();
    while tasks.join_next().await.is_some() {}
    Ok(())
}
