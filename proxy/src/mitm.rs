//! Intercepted tunnels (hosts that carry secrets): the client's TLS is terminated with a leaf
//! for the CONNECT host (the SNI must name it), HTTP/1.1 is served inside, and each request is
//! re-checked (authority = CONNECT target, still allowed, no nested CONNECT, no TRACE/TRACK,
//! only WebSocket upgrades, a path that is canonical per [`crate::path`]), has its placeholder
//! swapped per [`crate::inject`] (matched on the canonical path, which is also what is sent),
//! and is sent to the pinned upstream over verified TLS. Responses stream back with their
//! headers scrubbed, watched for being cut short ([`crate::cut`]).

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use hyper::body::Incoming;
use hyper::client::conn::http1::SendRequest;
use hyper::header::{HOST, HeaderValue};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::upgrade::Upgraded;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio_rustls::LazyConfigAcceptor;

use crate::headers::{is_websocket, strip_hop_by_hop};
use crate::host::{Host, Target, parse_authority, parse_host};
use crate::inject;
use crate::net::Pinned;
use crate::policy::{Decision, Rule};
use crate::respond::{self, Body};
use crate::server::{ConnCtx, Credentials, HEADER_READ_TIMEOUT, MAX_HEAD_BYTES, Owned};

const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long an upstream may take to send response headers (non-streaming completions can be slow).
const RESPONSE_TIMEOUT: Duration = Duration::from_secs(600);

/// One intercepted tunnel.
pub struct Session {
    ctx: ConnCtx,
    credentials: Credentials,
    sandbox_id: String,
    target: Target,
    host: String,
    pinned: Pinned,
    upstream: tokio::sync::Mutex<Option<SendRequest<Body>>>,
    owned: Owned,
    next: parking_lot::Mutex<Option<crate::server::Next>>,
}

impl Session {
    /// A session for `target` (a DNS name, checked by the caller) dialling `pinned`.
    pub fn new(ctx: ConnCtx, credentials: Credentials, sandbox_id: String, target: Target, pinned: Pinned) -> Self {
        let host = target.host.name().unwrap_or_default().to_owned();
        Self {
            ctx,
            credentials,
            sandbox_id,
            target,
            host,
            pinned,
            upstream: tokio::sync::Mutex::new(None),
            owned: Owned::default(),
            next: parking_lot::Mutex::new(None),
        }
    }
}

/// Terminates TLS on `client` and serves the session until the client goes away.
pub async fn intercept(client: Upgraded, session: Arc<Session>) {
    let acceptor = LazyConfigAcceptor::new(rustls::server::Acceptor::default(), TokioIo::new(client));
    let Ok(Ok(start)) = tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor).await else { return };
    let sni = start.client_hello().server_name().map(parse_host);
    if sni != Some(Ok(Host::Name(session.host.clone()))) {
        tracing::info!(sandbox = %session.sandbox_id, target = %session.target, decision = "sni-mismatch", "TLS aborted: SNI does not name the CONNECT host");
        return;
    }
    let state = session.ctx.shared.policy.borrow().clone();
    let Some(policy) = state.policy() else { return };
    let config = match policy.ca.server_config(&session.host) {
        Ok(config) => config,
        Err(error) => {
            tracing::error!(host = %session.host, %error, "cannot mint a certificate");
            return;
        }
    };
    let Ok(Ok(tls)) = tokio::time::timeout(HANDSHAKE_TIMEOUT, start.into_stream(config)).await else { return };
    let service_session = session.clone();
    let service = service_fn(move |req| {
        let session = service_session.clone();
        async move { Ok::<_, Infallible>(handle(req, &session).await) }
    });
    let result = http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT)
        .max_buf_size(MAX_HEAD_BYTES)
        .serve_connection(TokioIo::new(tls), service)
        .with_upgrades()
        .await;
    let next = session.next.lock().take();
    if result.is_ok()
        && let Some(next) = next
    {
        next.await;
    }
    session.owned.abort_all();
}

/// Whether the request's authority (absolute form and `Host`) names exactly the CONNECT target.
#[expect(clippy::result_large_err, reason = "the error is the response to send, built once per refused request")]
fn authority_matches(req: &Request<Incoming>, target: &Target) -> Result<(), Response<Body>> {
    let misdirected = || respond::text(StatusCode::MISDIRECTED_REQUEST, format!("this tunnel is for {target} only"));
    if let Some(authority) = req.uri().authority() {
        if req.uri().scheme_str() != Some("https") {
            return Err(misdirected());
        }
        if parse_authority(authority.as_str(), Some(443)).as_ref() != Ok(target) {
            return Err(misdirected());
        }
    }
    let mut hosts = req.headers().get_all(HOST).iter();
    match (hosts.next(), hosts.next()) {
        (Some(host), None) => {
            let parsed = host.to_str().ok().and_then(|h| parse_authority(h, Some(443)).ok());
            if parsed.as_ref() != Some(target) {
                return Err(misdirected());
            }
        }
        (None, _) if req.uri().authority().is_some() => {}
        _ => return Err(respond::text(StatusCode::BAD_REQUEST, "exactly one Host header is required")),
    }
    Ok(())
}

async fn handle(mut req: Request<Incoming>, session: &Session) -> Response<Body> {
    let target = &session.target;
    let id = &session.sandbox_id;
    if req.method() == Method::CONNECT {
        tracing::info!(sandbox = %id, %target, decision = "nested-connect", "refused");
        return respond::text(StatusCode::FORBIDDEN, "CONNECT inside an intercepted tunnel is refused");
    }
    if crate::server::refused_method(req.method()) {
        tracing::info!(sandbox = %id, %target, method = %req.method(), decision = "method-refused", "refused");
        return crate::server::method_refused();
    }
    if let Err(response) = authority_matches(&req, target) {
        tracing::info!(sandbox = %id, %target, decision = "authority-mismatch", "refused");
        return response;
    }
    let state = session.ctx.shared.policy.borrow().clone();
    let Some((_, sandbox)) = session.credentials.sandbox(&state, session.ctx.peer.ip()) else {
        return respond::forbidden(&target.to_string(), "is no longer allowed for this sandbox");
    };
    if sandbox.decide_connect(target) != Decision::Intercept {
        return respond::forbidden(&target.to_string(), "changed in the proxy configuration; reconnect");
    }
    let websocket = is_websocket(req.headers());
    if req.headers().contains_key(hyper::header::UPGRADE) && !websocket {
        return respond::text(StatusCode::FORBIDDEN, "only WebSocket upgrades are allowed");
    }
    let path = match crate::path::canonical(req.uri().path()) {
        Ok(path) => path,
        Err(refusal) => {
            tracing::info!(sandbox = %id, %target, method = %req.method(), decision = "path-refused", reason = %refusal, "refused");
            return respond::text(StatusCode::BAD_REQUEST, refusal.to_string());
        }
    };
    let method = req.method().clone();
    let route = state.policy().and_then(|p| p.server_route_for(target).cloned());
    // A tunnel to agenthold's service stays one: if the route went (or moved) since the CONNECT,
    // nothing more is sent on it.
    if session.pinned.plain && route.as_ref().is_none_or(|r| session.pinned.addrs != [r.addr]) {
        return respond::forbidden(&target.to_string(), "changed in the proxy configuration; reconnect");
    }
    if let Some(route) = route
        && !path.starts_with(route.path_prefix.as_str())
    {
        tracing::info!(sandbox = %id, %target, %method, %path, decision = "server-path-refused", "refused");
        return respond::forbidden(
            &format!("{target}{path}"),
            "is not a path of agenthold's service sandboxes may use",
        );
    }
    if let Some(answer) = sandbox.answers_for(target).find(|a| a.path == path) {
        tracing::info!(sandbox = %id, %target, %method, %path, status = answer.status.as_u16(), decision = "answered", "request");
        session.ctx.shared.cuts.answered(id, &target.host.to_string(), &path);
        return respond::answer(answer);
    }
    let rules: Vec<&Rule> = sandbox.rules_for(target).collect();
    req.headers_mut().remove(hyper::header::PROXY_AUTHORIZATION);
    let injected = match inject::apply(req.headers_mut(), &rules, &path) {
        Ok(injected) => injected,
        Err(refusal) => {
            tracing::info!(sandbox = %id, %target, %method, %path, decision = "credential-refused", reason = %refusal, "refused");
            return respond::forbidden(&format!("{target}{path}"), &refusal.to_string());
        }
    };
    let client_upgrade = websocket.then(|| hyper::upgrade::on(&mut req));
    let (mut parts, body) = req.into_parts();
    strip_hop_by_hop(&mut parts.headers, websocket);
    let authority = if target.port == 443 { session.host.clone() } else { format!("{}:{}", session.host, target.port) };
    let Ok(host_value) = HeaderValue::from_str(&authority) else {
        return respond::text(StatusCode::BAD_REQUEST, "bad host");
    };
    parts.headers.insert(HOST, host_value);
    // The canonical path (what the rules were matched on), the query as sent.
    let path_and_query = match parts.uri.query() {
        Some(query) => format!("{path}?{query}"),
        None => path.clone(),
    };
    let Ok(uri) = path_and_query.parse() else {
        return respond::text(StatusCode::BAD_REQUEST, "bad request target");
    };
    parts.uri = uri;
    parts.version = hyper::Version::HTTP_11;
    let upstream_req = Request::from_parts(parts, crate::forward::boxed(body));

    let mut sender = match take_sender(session).await {
        Ok(sender) => sender,
        Err(response) => return response,
    };
    let response = match tokio::time::timeout(RESPONSE_TIMEOUT, sender.send_request(upstream_req)).await {
        Ok(Ok(response)) => response,
        _ => {
            tracing::info!(sandbox = %id, %target, %method, %path, "upstream failed");
            return respond::text(StatusCode::BAD_GATEWAY, format!("{target} failed to answer"));
        }
    };
    let status = response.status();
    let upgraded = websocket && status == StatusCode::SWITCHING_PROTOCOLS;
    if !upgraded {
        *session.upstream.lock().await = Some(sender);
    }
    let (mut parts, body) = response.into_parts();
    let all_rules: Vec<&Rule> = sandbox.rules.iter().collect();
    let scrubbed = inject::scrub(&mut parts.headers, &all_rules);
    strip_hop_by_hop(&mut parts.headers, upgraded);
    tracing::info!(
        sandbox = %id, %target, %method, %path, status = status.as_u16(),
        injected = injected.len(), scrubbed_headers = scrubbed, decision = "forwarded", "request"
    );
    let mut response = if upgraded {
        Response::from_parts(parts, crate::forward::boxed(body))
    } else {
        let declared =
            parts.headers.get(hyper::header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse().ok());
        let origin = crate::cut::Origin {
            reports: session.ctx.shared.cuts.clone(),
            sandbox: id.clone(),
            host: session.host.clone(),
            path: path.clone(),
            status: status.as_u16(),
            declared,
        };
        Response::from_parts(parts, http_body_util::BodyExt::boxed(crate::cut::Watched::new(body, origin)))
    };
    if upgraded && let Some(client_upgrade) = client_upgrade {
        let upstream_upgrade = hyper::upgrade::on(&mut response);
        let idle = state.policy().map(|p| p.tunnel_idle).unwrap_or(Duration::from_secs(600));
        let revoked = crate::tunnel::revoked(
            session.ctx.clone(),
            session.credentials.clone(),
            target.clone(),
            Decision::Intercept,
        );
        let next: crate::server::Next = Box::pin(async move {
            if let (Ok(client), Ok(upstream)) = tokio::join!(client_upgrade, upstream_upgrade) {
                crate::tunnel::pipe(TokioIo::new(client), TokioIo::new(upstream), idle, revoked).await;
            }
        });
        *session.next.lock() = Some(next);
    }
    response
}

/// The upstream connection of this tunnel: the kept one if it is still usable, else a new one
/// to the pinned address.
async fn take_sender(session: &Session) -> Result<SendRequest<Body>, Response<Body>> {
    let kept = session.upstream.lock().await.take();
    if let Some(mut sender) = kept
        && !sender.is_closed()
        && tokio::time::timeout(HANDSHAKE_TIMEOUT, sender.ready()).await.is_ok_and(|r| r.is_ok())
    {
        return Ok(sender);
    }
    let network = session.ctx.shared.network.clone();
    let tls_host = (!session.pinned.plain).then_some(session.host.as_str());
    crate::upstream::open(network.as_ref(), &session.pinned, tls_host, &session.owned).await.map_err(|error| {
        tracing::info!(sandbox = %session.sandbox_id, target = %session.target, %error, "upstream unreachable");
        respond::text(StatusCode::BAD_GATEWAY, format!("{} {error}", session.target))
    })
}
