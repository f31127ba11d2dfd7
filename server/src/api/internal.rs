//! Calls between replicas (docs/replicas.md): `POST /internal/v1/agents/{id}/commands` runs a
//! command another replica forwarded to the supervisor of an agent this one owns
//! ([`crate::replicas::forward`]). Served on the replicas' own listener only
//! (`AGENTHOLD_INTERNAL_LISTEN`, never the public API's); each request signed with the replicas'
//! key over its time, a nonce, its path and body, taken once within a short window
//! ([`crate::replicas::signing`]); never forwarded again (an agent this replica does not own
//! answers 421 with its owner). A `destroy` is run only for an agent the database marks as being
//! deleted.

use axum::extract::{OriginalUri, Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use uuid::Uuid;

use crate::ids::AgentId;
use crate::replicas::Route;
use crate::replicas::forward::Forwarded;
use crate::replicas::signing;
use crate::state::AppState;

/// The routes replicas call on each other. Outside `/api/v1` and the OpenAPI document: no
/// person or script calls them, and none of the API's credentials opens them.
pub fn router() -> axum::Router<AppState> {
    axum::Router::new().route(&crate::replicas::forward::path_template(), axum::routing::post(command))
}

/// Runs a forwarded command here.
pub async fn command(
    State(state): State<AppState>,
    Path(id): Path<String>,
    OriginalUri(uri): OriginalUri,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    let text = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let signing_headers = signing::Headers {
        timestamp: text(signing::TIMESTAMP_HEADER),
        nonce: text(signing::NONCE_HEADER),
        signature: text(signing::SIGNATURE_HEADER),
    };
    let checked = state.dispatch.replicas().call_key().verify(
        signing_headers,
        uri.path(),
        &body,
        chrono::Utc::now().timestamp(),
        std::time::Instant::now(),
    );
    if let Err(why) = checked {
        tracing::warn!(why, "a replica call was refused");
        return (StatusCode::UNAUTHORIZED, why).into_response();
    }
    let Ok(agent_id) = id.parse::<Uuid>().map(AgentId) else {
        return (StatusCode::BAD_REQUEST, "not an agent id").into_response();
    };
    let forwarded: Forwarded = match serde_json::from_slice(&body) {
        Ok(forwarded) => forwarded,
        Err(error) => {
            return (StatusCode::UNPROCESSABLE_ENTITY, format!("not a forwarded command: {error}")).into_response();
        }
    };
    if forwarded == Forwarded::Destroy {
        // Only what the database says is being deleted: a signed call cannot destroy a live agent.
        match crate::store::agents::is_deleting(&state.pool, agent_id).await {
            Ok(true) => {}
            Ok(false) => return (StatusCode::CONFLICT, "the agent is not being deleted").into_response(),
            Err(error) => {
                tracing::error!(%error, "reading whether an agent is being deleted");
                return StatusCode::SERVICE_UNAVAILABLE.into_response();
            }
        }
    }
    match state.dispatch.run_forwarded(agent_id, forwarded).await {
        Ok(answer) => axum::Json(answer).into_response(),
        Err(Route::NoAgent) => (StatusCode::NOT_FOUND, "no such agent").into_response(),
        Err(Route::There(owner)) => {
            (StatusCode::MISDIRECTED_REQUEST, format!("replica {} owns this agent", owner.id)).into_response()
        }
        Err(Route::Here) => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
    }
}
