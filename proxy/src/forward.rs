//! Plain-HTTP absolute-form requests (`GET http://host/path`): forwarded only to allowed hosts
//! that carry no secrets, never with anything injected, with `Host` rebuilt from the vetted
//! target. Upgrades over plain HTTP are refused.

use hyper::body::Incoming;
use hyper::header::{HOST, HeaderValue, UPGRADE};
use hyper::{Request, Response, StatusCode};

use crate::headers::strip_hop_by_hop;
use crate::host::parse_authority;
use crate::net::{DialError, resolve_checked};
use crate::respond::{self, Body};
use crate::server::{ConnCtx, authenticate, authenticate_afresh};

/// Forwards one plain-HTTP request.
pub async fn plain(req: Request<Incoming>, ctx: ConnCtx) -> Response<Body> {
    let mut auth = match authenticate(&req, &ctx).await {
        Ok(auth) => auth,
        Err(response) => return response,
    };
    let sandbox_id = auth.sandbox.id.clone();
    let Some(target) = req.uri().authority().and_then(|a| parse_authority(a.as_str(), Some(80)).ok()) else {
        return respond::text(StatusCode::BAD_REQUEST, "the request names no valid host");
    };
    if auth.policy.server_route.as_ref().is_some_and(|r| target.host == r.target.host) {
        return respond::forbidden(
            &format!("http://{target}"),
            "is agenthold's own service, reachable over HTTPS only",
        );
    }
    if auth.sandbox.allows_plain(&target).is_err() {
        // Decided again on the file as it is now: the server may have just widened the sandbox.
        auth = match authenticate_afresh(&req, &ctx).await {
            Ok(auth) => auth,
            Err(response) => return response,
        };
    }
    if let Err(why) = auth.sandbox.allows_plain(&target) {
        tracing::info!(sandbox = %sandbox_id, %target, decision = "not-allowed", "plain HTTP refused");
        ctx.shared.cuts.refused(ctx.peer.ip());
        return respond::forbidden(&format!("http://{target}"), why);
    }
    if req.headers().contains_key(UPGRADE) {
        return respond::text(StatusCode::FORBIDDEN, "upgrades over plain HTTP are refused");
    }
    let network = ctx.shared.network.clone();
    let pinned = match resolve_checked(&auth.policy, network.as_ref(), &target, &ctx.own_addrs()).await {
        Ok(pinned) => pinned,
        Err(DialError::Refused(refusal)) => {
            tracing::info!(sandbox = %sandbox_id, %target, reason = refusal.as_str(), "plain HTTP refused");
            return respond::forbidden(&format!("http://{target}"), &format!("resolves to {}", refusal.as_str()));
        }
        Err(error) => return respond::text(StatusCode::BAD_GATEWAY, format!("{target} {error}")),
    };
    let mut sender = match crate::upstream::open(network.as_ref(), &pinned, None, &ctx.owned).await {
        Ok(sender) => sender,
        Err(error) => return respond::text(StatusCode::BAD_GATEWAY, format!("{target} {error}")),
    };
    let (mut parts, body) = req.into_parts();
    strip_hop_by_hop(&mut parts.headers, false);
    let authority = if target.port == 80 { target.host.to_string() } else { target.to_string() };
    let Ok(host) = HeaderValue::from_str(&authority) else {
        return respond::text(StatusCode::BAD_REQUEST, "the request names no valid host");
    };
    parts.headers.insert(HOST, host);
    let path = parts.uri.path_and_query().map(|p| p.as_str().to_owned()).unwrap_or_else(|| "/".to_owned());
    let Ok(uri) = path.parse() else {
        return respond::text(StatusCode::BAD_REQUEST, "bad request target");
    };
    parts.uri = uri;
    parts.version = hyper::Version::HTTP_11;
    let method = parts.method.clone();
    let upstream = Request::from_parts(parts, http_body_util::BodyExt::boxed(body));
    match sender.send_request(upstream).await {
        Ok(response) => {
            tracing::info!(sandbox = %sandbox_id, %target, %method, status = response.status().as_u16(), "plain HTTP forwarded");
            let (mut parts, body) = response.into_parts();
            strip_hop_by_hop(&mut parts.headers, false);
            Response::from_parts(parts, http_body_util::BodyExt::boxed(body))
        }
        Err(_) => respond::text(StatusCode::BAD_GATEWAY, format!("{target} failed to answer")),
    }
}

/// Adapts a hyper `Incoming` into the proxy's body type.
pub fn boxed(body: Incoming) -> Body {
    http_body_util::BodyExt::boxed(body)
}
