//! `POST /api/v1/mcp`: agenthold's MCP server for harnesses (agents prompting agents,
//! [`crate::mcp`]). The streamable HTTP transport, answered with JSON (no SSE stream: every
//! tool answers within one request). The caller is an agent, proven by its MCP credential in
//! `Authorization: Bearer` (which the egress proxy puts in for proxied sandboxes), not a user:
//! the route needs no user credentials. The body is bounded ([`crate::mcp::MAX_BODY_BYTES`]).
//! What each tool does is [`calls`].

pub mod calls;

use axum::Json;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::error::ApiError;
use super::openapi::Access;
use crate::mcp::rpc::{self, Incoming, RpcError, code};
use crate::mcp::tools::{self, Call};
use crate::mcp::{MAX_BODY_BYTES, credential};
use crate::state::AppState;
use crate::store;

/// Answers one MCP JSON-RPC message of an agent's harness: `initialize`, `ping`, `tools/list`,
/// `tools/call` (`list_agents`, `prompt_agent`, `wait_turn`, `read_events`). A tool's refusal
/// (an agent not on the caller's list, a chain too deep) is a result with `isError`; bad
/// arguments are JSON-RPC `-32602`; a message that is not JSON-RPC gets a JSON-RPC error too
/// (`-32700`, `-32600`; every JSON-RPC answer is a 200); a notification is 202. The credential of
/// a pooled harness's sandbox no agent has claimed yet lists the tools but calls none (`-32600`).
#[utoipa::path(
    post,
    path = "/api/v1/mcp",
    operation_id = "mcp",
    tag = "triggers",
    request_body(content = Object, description = "One JSON-RPC 2.0 request or notification (MCP)"),
    params(
        ("Authorization" = String, Header, description = "`Bearer` and the calling agent's MCP credential \
            (the egress proxy puts it in for the sandbox, which holds a placeholder)"),
    ),
    responses(
        (status = 200, description = "The JSON-RPC response (a result, or a JSON-RPC error: `-32700` not JSON, \
            `-32600` not a request or a batch, `-32601` no such method, `-32602` bad arguments)", body = Object),
        (status = 202, description = "A notification, accepted"),
        (status = 401, description = "`UNAUTHORIZED`: no valid agent credential", body = super::error::ErrorBody),
        (status = 413, description = "`PAYLOAD_TOO_LARGE`: over 256 KiB", body = super::error::ErrorBody),
    ),
    extensions(("x-agenthold-access" = json!(Access::Public))),
)]
pub async fn call(State(state): State<AppState>, headers: HeaderMap, body: Body) -> Result<Response, ApiError> {
    let caller = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| credential::verify(&state.master_key, v))
        .ok_or(ApiError::Unauthorized)?;
    // A pooled harness's sandbox (no agent has claimed it yet: the id is the one its agent will
    // get) may connect — `initialize`, `tools/list` —, so the session the pool opens ahead has
    // the tools; a call needs the agent, checked at each call.
    let caller = match store::agents::get(&state.pool, caller).await? {
        Some(agent) => Some(agent),
        None if store::warm_pool::is_pooled(&state.pool, caller).await? => None,
        None => return Err(ApiError::Unauthorized),
    };
    let declared =
        headers.get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > MAX_BODY_BYTES as u64) {
        return Err(ApiError::PayloadTooLarge);
    }
    let bytes = axum::body::to_bytes(body, MAX_BODY_BYTES).await.map_err(|_| ApiError::PayloadTooLarge)?;
    let (id, method, params) = match rpc::parse(&bytes) {
        Ok(Incoming::Request { id, method, params }) => (id, method, params),
        Ok(Incoming::Notification) => return Ok(StatusCode::ACCEPTED.into_response()),
        Err((id, error)) => return Ok(Json(rpc::error(&id, &error)).into_response()),
    };
    let answer: Result<Value, RpcError> = match method.as_str() {
        "initialize" => Ok(rpc::initialize(&params)),
        "ping" => Ok(json!({})),
        "tools/list" => Ok(tools::list()),
        "tools/call" => match (Call::parse(&params), caller.as_ref()) {
            (Err(error), _) => Err(error),
            (Ok(_), None) => {
                Err(RpcError::new(code::INVALID_REQUEST, "no agent has taken this sandbox yet: try again once one has"))
            }
            (Ok(call), Some(caller)) => match calls::run(&state, caller, &call).await {
                Ok(Ok(result)) => Ok(result),
                Ok(Err(refusal)) => Ok(refusal.result()),
                Err(error) => {
                    tracing::error!(agent.id = %caller.id, tool = call.name(), error = %error, "an MCP tool failed");
                    Err(RpcError::new(code::INTERNAL_ERROR, "the server failed; try again"))
                }
            },
        },
        other => Err(RpcError::new(
            code::METHOD_NOT_FOUND,
            format!("no method {:?}", other.chars().take(64).collect::<String>()),
        )),
    };
    let body = match answer {
        Ok(result) => rpc::result(&id, &result),
        Err(error) => rpc::error(&id, &error),
    };
    Ok(Json(body).into_response())
}
