//! `/api/v1/me` and `/api/v1/tokens`: the caller, its workspaces, and its API tokens (shown once
//! at creation, stored hashed, named, revocable, with a last-used time).

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use serde_json::json;
use utoipa::ToSchema;
use uuid::Uuid;

use super::error::{ApiError, ErrorBody};
use super::extract::{Body, Id};
use super::openapi::Access;
use crate::auth::Principal;
use crate::error_code::ErrorCode;
use crate::state::AppState;
use crate::store;
use crate::store::audit::AuditRecord;
use crate::store::tokens::TokenView;
use crate::store::users::MembershipView;

/// The caller.
#[derive(Debug, Serialize, ToSchema)]
pub struct Me {
    /// Its user id.
    id: Uuid,
    /// Its name.
    username: String,
    /// Whether it administers the server (creates users).
    server_admin: bool,
    /// The workspaces it belongs to, with its role in each.
    workspaces: Vec<MembershipView>,
    /// For a browser session only: its CSRF token (the page keeps it in memory, so after a
    /// reload it asks here instead of signing in again). Never for a bearer token.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(required = false)]
    csrf_token: Option<String>,
}

/// The caller and its workspaces (and, for a browser session, its CSRF token).
#[utoipa::path(
    get,
    path = "/api/v1/me",
    operation_id = "me",
    tag = "me",
    responses((status = 200, description = "The caller", body = Me)),
    extensions(("x-agenthold-access" = json!(Access::SignedIn))),
)]
pub async fn show(State(state): State<AppState>, principal: Principal) -> Result<Json<Me>, ApiError> {
    let user = principal.user(&state).await?;
    let workspaces = store::users::memberships(&state.pool, user.id).await?;
    let csrf_token = principal.csrf_token.clone();
    Ok(Json(Me { id: user.id, username: user.username, server_admin: user.server_admin, workspaces, csrf_token }))
}

/// A new token: its value is here and nowhere else, ever.
#[derive(Debug, Serialize, ToSchema)]
pub struct CreatedToken {
    /// Its id.
    id: Uuid,
    /// Its name.
    name: String,
    /// The token (`ah_…`), for `Authorization: Bearer`.
    token: String,
}

/// The caller's tokens.
#[derive(Debug, Serialize, ToSchema)]
pub struct TokenList {
    /// Oldest first; never their values.
    tokens: Vec<TokenView>,
}

/// `POST /api/v1/tokens`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateToken {
    name: String,
}

async fn audit_token(
    state: &AppState,
    principal: &Principal,
    action: &'static str,
    token_id: Uuid,
) -> Result<(), ApiError> {
    if let Some(workspace_id) = store::users::personal_workspace(&state.pool, principal.user_id).await? {
        let record = AuditRecord {
            workspace_id,
            actor_user_id: Some(principal.user_id),
            action,
            resource_type: "token",
            resource_id: token_id.to_string(),
            detail: json!({}),
        };
        store::audit::append(&state.pool, record).await?;
    }
    Ok(())
}

/// Creates a token for the caller; its value is in this answer and nowhere else, ever.
#[utoipa::path(
    post,
    path = "/api/v1/tokens",
    operation_id = "create_token",
    tag = "me",
    request_body = CreateToken,
    responses(
        (status = 201, description = "The token", body = CreatedToken),
        (status = 400, description = "`INVALID_BODY`, `NUL_CHARACTER`, `INVALID_NAME`", body = ErrorBody),
        (status = 409, description = "`QUOTA_EXCEEDED` (tokens per user)", body = ErrorBody),
    ),
    extensions(("x-agenthold-access" = json!(Access::SignedIn))),
)]
pub async fn create_token(
    State(state): State<AppState>,
    principal: Principal,
    Body(body): Body<CreateToken>,
) -> Result<(StatusCode, Json<CreatedToken>), ApiError> {
    let name = body.name.trim();
    if name.is_empty() || name.len() > 100 {
        return Err(ApiError::bad_request(ErrorCode::InvalidName, "a token's name is 1-100 characters"));
    }
    let token = format!("ah_{}", hex::encode(rand::random::<[u8; 24]>()));
    let id =
        store::tokens::create(&state.pool, principal.user_id, name, &token, state.config.max_tokens_per_user).await?;
    audit_token(&state, &principal, "token.created", id).await?;
    Ok((StatusCode::CREATED, Json(CreatedToken { id, name: name.to_owned(), token })))
}

/// The caller's tokens (never their values).
#[utoipa::path(
    get,
    path = "/api/v1/tokens",
    operation_id = "list_tokens",
    tag = "me",
    responses((status = 200, description = "The tokens", body = TokenList)),
    extensions(("x-agenthold-access" = json!(Access::SignedIn))),
)]
pub async fn list_tokens(State(state): State<AppState>, principal: Principal) -> Result<Json<TokenList>, ApiError> {
    let tokens = store::tokens::list(&state.pool, principal.user_id).await?;
    Ok(Json(TokenList { tokens }))
}

/// Revokes one of the caller's tokens; it stops working at once.
#[utoipa::path(
    delete,
    path = "/api/v1/tokens/{id}",
    operation_id = "revoke_token",
    tag = "me",
    responses(
        (status = 204, description = "Revoked"),
        (status = 404, description = "`NOT_FOUND`: no such token of the caller's", body = ErrorBody),
    ),
    extensions(("x-agenthold-access" = json!(Access::SignedIn))),
)]
pub async fn revoke_token(
    State(state): State<AppState>,
    principal: Principal,
    Id(id): Id<Uuid>,
) -> Result<StatusCode, ApiError> {
    if !store::tokens::revoke(&state.pool, principal.user_id, id).await? {
        return Err(ApiError::NotFound("token"));
    }
    // This server's open sockets of the token learn it at their next check, not a shared answer later.
    crate::auth::recheck::record(crate::auth::Credential::Token(id), false, std::time::Instant::now());
    audit_token(&state, &principal, "token.revoked", id).await?;
    Ok(StatusCode::NO_CONTENT)
}
