//! `GET /api/v1/agents/{id}/harness-log`: what the agent's harness wrote on stderr lately (the
//! supervisor's ring, `supervisor::harness_log`), for the agent's admins only — a harness can
//! print anything there, secrets included. Read while the harness runs; the web UI's "Harness
//! log" panel polls it. Never written to the server's own log. With several replicas the log is
//! in the memory of the one running the agent: a read elsewhere is relayed there
//! ([`super::read_relay`]), without waking or moving the agent.

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, Uri};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use utoipa::ToSchema;

use super::agents::visible_agent;
use super::error::{ApiError, ErrorBody};
use super::extract::Id;
use super::openapi::Access;
use crate::auth::Principal;
use crate::ids::AgentId;
use crate::state::AppState;
use crate::store::users::Role;
use crate::supervisor::harness_log::RING_BYTES;

/// The newest stderr of an agent's harness.
#[derive(Debug, Serialize, ToSchema)]
pub struct HarnessLog {
    /// The newest stderr bytes (at most `ring_bytes`), decoded as UTF-8 with invalid bytes
    /// replaced (U+FFFD); a cut at the start may split a character.
    pub text: String,
    /// The harness process they are from (its generation: a new harness starts an empty log);
    /// `null` when none wrote anything since the agent's supervisor started on this server.
    pub generation: Option<i64>,
    /// stderr bytes sandboxd did not send: over its rate limit (32 KiB a second after a 64 KiB
    /// burst), or written while the sandbox's tunnel was down.
    pub dropped_bytes: u64,
    /// Older bytes no longer kept (the log holds the newest `ring_bytes`).
    pub rotated_bytes: u64,
    /// How many bytes the log keeps.
    pub ring_bytes: u64,
    /// Whether the agent's supervisor runs on the replica that answered; with several replicas
    /// the log is kept by the one holding the agent, and a read on another is answered by it.
    pub live: bool,
}

/// What the agent's harness wrote on stderr lately (agent admins): the newest 64 KiB, with how
/// many bytes were dropped on the way. It may hold whatever the harness prints, secrets included.
#[utoipa::path(
    get,
    path = "/api/v1/agents/{id}/harness-log",
    operation_id = "show_harness_log",
    tag = "agents",
    responses(
        (status = 200, description = "The harness's newest stderr", body = HarnessLog),
        (status = 503, description = "`REPLICA_UNAVAILABLE`: the replica that runs the agent cannot be reached", body = ErrorBody),
    ),
    extensions(("x-agenthold-access" = json!(Access::Admin))),
)]
pub async fn show(
    State(state): State<AppState>,
    principal: Principal,
    Id(id): Id<AgentId>,
    headers: HeaderMap,
    uri: Uri,
) -> Result<Response, ApiError> {
    visible_agent(&state, &principal, id, Role::Admin).await?;
    let live = state.supervisors.is_running(id);
    // The log is kept by the replica running the agent's supervisor: read there when another
    // one holds the agent (asked once: a relayed read is answered here, whatever it holds).
    if !live && !headers.contains_key(super::terminal_relay::RELAYED) {
        let replicas = state.dispatch.replicas();
        if let Some(owner) = replicas.other_holder(id).await? {
            let path_and_query = uri.path_and_query().map_or(uri.path(), |p| p.as_str());
            return super::read_relay::get(replicas.http(), &owner, path_and_query, &headers).await;
        }
    }
    let ring_bytes = RING_BYTES as u64;
    let log = match state.supervisors.harness_log(id) {
        Some(snapshot) => HarnessLog {
            text: String::from_utf8_lossy(&snapshot.bytes).into_owned(),
            generation: Some(snapshot.generation),
            dropped_bytes: snapshot.dropped,
            rotated_bytes: snapshot.rotated,
            ring_bytes,
            live,
        },
        None => {
            HarnessLog { text: String::new(), generation: None, dropped_bytes: 0, rotated_bytes: 0, ring_bytes, live }
        }
    };
    Ok(Json(log).into_response())
}
