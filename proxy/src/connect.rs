//! CONNECT: authenticate, normalise the target, decide (refuse, byte tunnel, or intercept),
//! resolve and check the destination before answering 200, then hand the upgraded connection to
//! [`crate::tunnel`] (after [`crate::passthrough`] has checked the client's first bytes) or
//! [`crate::mitm`].

use std::sync::Arc;

use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;

use crate::host::parse_authority;
use crate::net::{DialError, connect_pinned, resolve_checked};
use crate::policy::Decision;
use crate::respond::{self, Body};
use crate::server::{ConnCtx, authenticate, authenticate_afresh};

/// Answers a CONNECT request.
pub async fn handle(mut req: Request<Incoming>, ctx: ConnCtx) -> Response<Body> {
    let mut auth = match authenticate(&req, &ctx).await {
        Ok(auth) => auth,
        Err(response) => return response,
    };
    let sandbox_id = auth.sandbox.id.clone();
    let Some(target) = req.uri().authority().and_then(|a| parse_authority(a.as_str(), None).ok()) else {
        tracing::info!(sandbox = %sandbox_id, decision = "bad-target", "CONNECT refused");
        return respond::text(StatusCode::BAD_REQUEST, "CONNECT needs a valid host:port");
    };
    let mut decision = auth.sandbox.decide_connect(&target);
    if decision == Decision::Refuse {
        // Decided again on the file as it is now: the server may have just widened the sandbox.
        auth = match authenticate_afresh(&req, &ctx).await {
            Ok(auth) => auth,
            Err(response) => return response,
        };
        decision = auth.sandbox.decide_connect(&target);
    }
    let sandbox_id = auth.sandbox.id.clone();
    if decision == Decision::Refuse {
        tracing::info!(sandbox = %sandbox_id, %target, decision = "not-allowed", "CONNECT refused");
        ctx.shared.cuts.refused(ctx.peer.ip());
        return respond::forbidden(&target.to_string(), "is not on this sandbox's egress allow-list");
    }
    let network = ctx.shared.network.clone();
    // agenthold's own service: only intercepted (with the sandbox's placeholder swapped), never
    // a byte tunnel to the server.
    if let Some(route) = auth.policy.server_route_for(&target) {
        if decision != Decision::Intercept {
            tracing::info!(sandbox = %sandbox_id, %target, decision = "server-route-not-granted", "CONNECT refused");
            return respond::forbidden(&target.to_string(), "is agenthold's own service, not granted to this sandbox");
        }
        let pinned = crate::net::Pinned::server(route, &auth.policy);
        tracing::info!(sandbox = %sandbox_id, %target, decision = "intercept", "CONNECT");
        let on_upgrade = hyper::upgrade::on(&mut req);
        let session = Arc::new(crate::mitm::Session::new(ctx.clone(), auth.credentials, sandbox_id, target, pinned));
        ctx.then(Box::pin(async move {
            if let Ok(client) = on_upgrade.await {
                crate::mitm::intercept(client, session).await;
            }
        }));
        return Response::new(respond::empty());
    }
    let pinned = match resolve_checked(&auth.policy, network.as_ref(), &target, &ctx.own_addrs()).await {
        Ok(pinned) => pinned,
        Err(DialError::Refused(refusal)) => {
            tracing::info!(sandbox = %sandbox_id, %target, decision = "address-refused", reason = refusal.as_str(), "CONNECT refused");
            return respond::forbidden(&target.to_string(), &format!("resolves to {}", refusal.as_str()));
        }
        Err(error) => {
            tracing::info!(sandbox = %sandbox_id, %target, %error, "CONNECT failed");
            return respond::text(StatusCode::BAD_GATEWAY, format!("{target} {error}"));
        }
    };
    let on_upgrade = hyper::upgrade::on(&mut req);
    match decision {
        Decision::Tunnel => {
            let upstream = match connect_pinned(network.as_ref(), &pinned).await {
                Ok(stream) => stream,
                Err(error) => {
                    tracing::info!(sandbox = %sandbox_id, %target, %error, "CONNECT failed");
                    return respond::text(StatusCode::BAD_GATEWAY, format!("{target} {error}"));
                }
            };
            tracing::info!(sandbox = %sandbox_id, %target, decision = "tunnel", "CONNECT");
            let idle = auth.policy.tunnel_idle;
            let revoked = crate::tunnel::revoked(ctx.clone(), auth.credentials, target.clone(), Decision::Tunnel);
            ctx.then(Box::pin(async move {
                if let Ok(client) = on_upgrade.await {
                    let check = move |mut client_read| async move {
                        match crate::passthrough::inspect(&mut client_read, &target).await {
                            Ok(first) => Some((client_read, first)),
                            Err(refusal) => {
                                tracing::info!(sandbox = %sandbox_id, %target, decision = refusal.as_str(), "tunnel closed before any byte was forwarded");
                                None
                            }
                        }
                    };
                    crate::tunnel::pipe_after(TokioIo::new(client), upstream, idle, revoked, check).await;
                }
            }));
        }
        Decision::Intercept => {
            tracing::info!(sandbox = %sandbox_id, %target, decision = "intercept", "CONNECT");
            let session =
                Arc::new(crate::mitm::Session::new(ctx.clone(), auth.credentials, sandbox_id, target, pinned));
            ctx.then(Box::pin(async move {
                if let Ok(client) = on_upgrade.await {
                    crate::mitm::intercept(client, session).await;
                }
            }));
        }
        Decision::Refuse => {}
    }
    Response::new(respond::empty())
}
