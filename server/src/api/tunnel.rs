//! The tunnel listener's route, which decides who gets a sandboxd connection: it accepts nothing
//! but sandbox tokens, sends sandboxd to the replica that holds its agent's lease (a redirect),
//! and hands the accepted connection to the agent's supervisor here, or to the warm pool until an
//! agent claims the sandbox.

use std::sync::Arc;

use agenthold_sandboxd::protocol::TUNNEL_PATH;
use axum::Router;
use axum::extract::{State, WebSocketUpgrade};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use crate::dispatch::Dispatch;
use crate::state::AppState;
use crate::store;
use crate::tunnel::link;

/// The tunnel listener's routes.
pub fn router(state: AppState) -> Router {
    // The same limits as the API's (docs/operations.md, "Limits"); sandboxd retries a refusal.
    let limits = super::limits::RequestLimits::new(
        state.config.max_concurrent_requests as usize,
        state.config.max_anonymous_requests as usize,
        super::limits::CallerCaps::of(&state.config),
        std::time::Duration::from_secs(state.config.request_timeout_secs),
        None,
    );
    Router::new()
        .route(TUNNEL_PATH, get(accept))
        .layer(axum::middleware::from_fn_with_state(limits, super::limits::enforce))
        .layer(axum::extract::DefaultBodyLimit::max(64 << 10))
        .with_state(state)
}

async fn accept(State(state): State<AppState>, headers: HeaderMap, upgrade: WebSocketUpgrade) -> Response {
    let Some(token) = bearer(&headers) else {
        return StatusCode::UNAUTHORIZED.into_response();
    };
    let hash = store::tokens::hash_token(token);
    let (agent_id, owner) = match owner_of(&state, &hash).await {
        Ok(Some(found)) => found,
        Ok(None) => return StatusCode::UNAUTHORIZED.into_response(),
        Err(error) => {
            tracing::error!(%error, "looking up a sandbox token");
            return StatusCode::SERVICE_UNAVAILABLE.into_response();
        }
    };
    // The agent's supervisor runs on another replica: sandboxd dials that one (docs/replicas.md).
    if let Owner::Agent(dispatch) = &owner {
        match dispatch.route(agent_id).await {
            crate::replicas::Route::Here => {}
            crate::replicas::Route::NoAgent => return StatusCode::UNAUTHORIZED.into_response(),
            crate::replicas::Route::There(replica) => return redirect(dispatch, agent_id, &replica),
        }
    }
    let silent = std::time::Duration::from_secs(state.config.silent_tunnel_secs.max(1));
    // sandboxd sends stdout in chunks of at most 64 KiB; with the supervisor's inbox depth this
    // bounds what one sandbox can make the server hold (docs/design.md, "Memory bounds").
    upgrade
        .max_message_size(link::MAX_MESSAGE_BYTES)
        .max_frame_size(link::MAX_MESSAGE_BYTES)
        .read_buffer_size(super::ws::READ_BUFFER_BYTES)
        .on_upgrade(move |socket| async move {
            let _open = TunnelGauge::open(agent_id);
            link::serve(socket, agent_id, owner.hand_over(agent_id), silent).await
        })
}

/// Sends sandboxd to the replica that owns its agent: `307` to that replica's own tunnel URL;
/// `503` (sandboxd retries through the shared address) when it names none of its own.
fn redirect(dispatch: &Dispatch, agent_id: crate::ids::AgentId, owner: &store::replicas::ReplicaRow) -> Response {
    if owner.tunnel_url == dispatch.replicas().me().tunnel_url {
        tracing::warn!(agent.id = %agent_id, replica.id = %owner.id, "the agent's replica has this replica's tunnel URL (set AGENTHOLD_REPLICA_TUNNEL_URL on each replica)");
        return StatusCode::SERVICE_UNAVAILABLE.into_response();
    }
    tracing::info!(agent.id = %agent_id, replica.id = %owner.id, "sandboxd sent to the agent's replica");
    (StatusCode::TEMPORARY_REDIRECT, [(header::LOCATION, owner.tunnel_url.clone())]).into_response()
}

/// Whose sandbox token this is: an agent's, or a pooled sandbox's (warm pool).
async fn owner_of(state: &AppState, hash: &[u8]) -> sqlx::Result<Option<(crate::ids::AgentId, Owner)>> {
    if let Some(agent_id) = store::sandboxes::agent_for_token(&state.pool, hash).await? {
        return Ok(Some((agent_id, Owner::Agent(Arc::clone(&state.dispatch)))));
    }
    match &state.warm_pool {
        Some(pool) => Ok(store::warm_pool::agent_for_token(&state.pool, hash)
            .await?
            .map(|agent_id| (agent_id, Owner::Pool(pool.clone())))),
        None => Ok(None),
    }
}

/// An open tunnel in `agenthold_tunnels_open`; counts its connection as first or again (this
/// process saw the sandbox connect before).
struct TunnelGauge;

impl TunnelGauge {
    fn open(agent_id: crate::ids::AgentId) -> Self {
        static SEEN: std::sync::LazyLock<parking_lot::Mutex<std::collections::HashSet<crate::ids::AgentId>>> =
            std::sync::LazyLock::new(Default::default);
        let again = !SEEN.lock().insert(agent_id);
        crate::metrics::tunnel_connected(again);
        Self
    }
}

impl Drop for TunnelGauge {
    fn drop(&mut self) {
        crate::metrics::tunnel_closed();
    }
}

fn bearer(headers: &HeaderMap) -> Option<&str> {
    headers.get(header::AUTHORIZATION)?.to_str().ok()?.strip_prefix("Bearer ")
}

/// Who a new connection is handed to.
enum Owner {
    /// The agent's supervisor (here; a connection for another replica's agent is redirected).
    Agent(Arc<Dispatch>),
    /// The warm pool, until an agent claims the sandbox.
    Pool(crate::fleet::warm_pool::WarmPool),
}

impl Owner {
    /// What the link does once sandboxd said hello.
    fn hand_over(self, agent_id: crate::ids::AgentId) -> link::HandOver {
        Box::new(move |link, hello, inbox| match self {
            Self::Agent(dispatch) => Box::pin(async move { dispatch.attach(agent_id, link, hello, inbox).await }),
            Self::Pool(pool) => {
                let held = pool.hold(agent_id, crate::fleet::warm_pool::Held { link, hello, inbox });
                Box::pin(std::future::ready(held))
            }
        })
    }
}
