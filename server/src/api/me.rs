//! `/api/v1/me` and `/api/v1/tokens`: the caller, its workspaces, and its API tokens (shown once
//! at creation, stored hashed, named, revocable, with a last-used time).

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use rand::RngCore;
use serde::Deserialize;
use serde_json::{Value, json};
use uuid::Uuid;

use super::error::ApiError;
use super::extract::{Body, Id};
use crate::app::AppState;
use crate::auth::Principal;
use crate::store;
use crate::store::audit::AuditRecord;

/// The caller and its workspaces; for a browser session also its CSRF token (the page keeps
/// it in memory, so after a reload it asks here instead of signing in again).
pub async fn show(State(state): State<AppState>, principal: Principal) -> Result<Json<Value>, ApiError> {
    let user = principal.user(&state).await?;
    let workspaces = store::users::memberships(&state.pool, user.id).await?;
    let mut answer = json!({
        "id": user.id,
        "username": user.username,
        "server_admin": user.server_admin,
        "workspaces": workspaces,
    });
    if let Some(csrf_token) = &principal.csrf_token {
        answer["csrf_token"] = json!(csrf_token);
    }
    Ok(Json(answer))
}

/// `POST /api/v1/tokens`.
#[derive(Debug, Deserialize)]
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
pub async fn create_token(
    State(state): State<AppState>,
    principal: Principal,
    Body(body): Body<CreateToken>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let name = body.name.trim();
    if name.is_empty() || name.len() > 100 {
        return Err(ApiError::bad_request("INVALID_NAME", "a token's name is 1-100 characters"));
    }
    let mut bytes = [0u8; 24];
    rand::rng().fill_bytes(&mut bytes);
    let token = format!("ah_{}", bytes.iter().map(|b| format!("{b:02x}")).collect::<String>());
    let id = store::tokens::create(&state.pool, principal.user_id, name, &token).await?;
    audit_token(&state, &principal, "token.created", id).await?;
    Ok((StatusCode::CREATED, Json(json!({"id": id, "name": name, "token": token}))))
}

/// The caller's tokens (never their values).
pub async fn list_tokens(State(state): State<AppState>, principal: Principal) -> Result<Json<Value>, ApiError> {
    let tokens = store::tokens::list(&state.pool, principal.user_id).await?;
    Ok(Json(json!({"tokens": tokens})))
}

/// Revokes one of the caller's tokens; it stops working at once.
pub async fn revoke_token(
    State(state): State<AppState>,
    principal: Principal,
    Id(id): Id<Uuid>,
) -> Result<StatusCode, ApiError> {
    if !store::tokens::revoke(&state.pool, principal.user_id, id).await? {
        return Err(ApiError::NotFound("token"));
    }
    audit_token(&state, &principal, "token.revoked", id).await?;
    Ok(StatusCode::NO_CONTENT)
}
