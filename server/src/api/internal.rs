//! Calls between replicas (docs/replicas.md): `POST /internal/v1/agents/{id}/commands` runs a
//! command another replica forwarded to the supervisor of an agent this one owns
//! ([`crate::replicas::forward`]). Authenticated by the replicas' shared credential (derived from
//! the master key), compared in constant time; never forwarded again (an agent this replica does
//! not own answers 421 with its owner).

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use uuid::Uuid;

use crate::app::AppState;
use crate::ids::AgentId;
use crate::replicas::Route;
use crate::replicas::forward::Forwarded;

/// The routes replicas call on each other. Outside `/api/v1` and the OpenAPI document: no
/// person or script calls them, and none of the API's credentials opens them.
pub fn router() -> axum::Router<AppState> {
    axum::Router::new().route(&crate::replicas::forward::path_template(), axum::routing::post(command))
}

/// Runs a forwarded command here.
pub async fn command(
    State(state): State<AppState>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    let presented = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or("");
    if !same(presented.as_bytes(), state.supervisors.replicas().call_token().as_bytes()) {
        return (StatusCode::UNAUTHORIZED, "a replica credential is required").into_response();
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
    match state.supervisors.run_forwarded(agent_id, forwarded).await {
        Ok(answer) => axum::Json(answer).into_response(),
        Err(Route::NoAgent) => (StatusCode::NOT_FOUND, "no such agent").into_response(),
        Err(Route::There(owner)) => {
            (StatusCode::MISDIRECTED_REQUEST, format!("replica {} owns this agent", owner.id)).into_response()
        }
        Err(Route::Here) => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
    }
}

/// Whether two byte strings are equal, in time that depends on their length only.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && std::hint::black_box(a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y))) == 0
}

#[cfg(test)]
mod tests {
    #[test]
    fn compares_whole_strings() {
        assert!(super::same(b"abc", b"abc"));
        assert!(!super::same(b"abc", b"abd"));
        assert!(!super::same(b"abc", b"ab"));
        assert!(!super::same(b"", b"a"));
    }
}
