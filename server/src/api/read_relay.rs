//! A read answered by the replica that owns the agent (docs/replicas.md), for what only that
//! replica holds in memory (the harness log): this replica sends the same `GET` to the owner's
//! address (`AGENTHOLD_REPLICA_URL`) with the caller's own credentials and `Origin`/`Host` — the
//! owner checks them again — and answers what the owner answered, status and JSON body. Marked
//! as relayed ([`super::terminal_relay::RELAYED`]) and never relayed again. Bounded: the owner's
//! answer is read up to [`MAX_ANSWER_BYTES`], within [`READ_TIMEOUT`]. Nothing is woken or
//! moved: the lease is only read.

use std::time::Duration;

use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::error::ApiError;
use crate::error_code::ErrorCode;
use crate::store::replicas::ReplicaRow;

/// Largest answer read from the owner (a 64 KiB log is at most six times that as JSON).
pub const MAX_ANSWER_BYTES: usize = 1 << 20;
/// How long the owner may take.
const READ_TIMEOUT: Duration = Duration::from_secs(15);

/// `GET path_and_query` on the owner, as the caller asked it here.
pub async fn get(
    http: &reqwest::Client,
    owner: &ReplicaRow,
    path_and_query: &str,
    headers: &HeaderMap,
) -> Result<Response, ApiError> {
    let unavailable = |message: String| ApiError::Unavailable { code: ErrorCode::ReplicaUnavailable, message };
    let authority =
        owner.internal_url.strip_prefix("http://").map(|rest| rest.trim_end_matches('/')).ok_or_else(|| {
            unavailable(format!("the agent's replica has no http:// address ({})", owner.internal_url))
        })?;
    let mut request = http.get(format!("http://{authority}{path_and_query}")).timeout(READ_TIMEOUT);
    for name in [header::AUTHORIZATION, header::COOKIE, header::ORIGIN, header::HOST, header::USER_AGENT] {
        if let Some(value) = headers.get(&name) {
            request = request.header(name.as_str(), value.as_bytes());
        }
    }
    let response = request
        .header(super::terminal_relay::RELAYED, "1")
        .send()
        .await
        .map_err(|e| unavailable(format!("the agent's replica ({}): {e}", owner.id)))?;
    let status = StatusCode::from_u16(response.status().as_u16()).unwrap_or(StatusCode::BAD_GATEWAY);
    let body = crate::outbound::read_body(response, MAX_ANSWER_BYTES)
        .await
        .map_err(|e| unavailable(format!("the answer of the agent's replica ({}): {e}", owner.id)))?;
    Ok((status, [(header::CONTENT_TYPE, "application/json")], body).into_response())
}
