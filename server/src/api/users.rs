//! `/api/v1/users`: the server admin creates users (each gets a personal workspace).

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use serde_json::json;
use utoipa::ToSchema;
use uuid::Uuid;

use super::error::{ApiError, ErrorBody};
use super::extract::Body;
use super::openapi::Access;
use crate::auth::{Principal, passwords};
use crate::error_code::ErrorCode;
use crate::state::AppState;
use crate::store;
use crate::store::audit::AuditRecord;
use crate::store::users::{CreateUserError, UserRow};

/// `POST /api/v1/users`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateUser {
    /// 2-64 characters of a-z, 0-9, `-`, `_`, `.`, starting with a letter (stored lower case).
    username: String,
    /// At least as long as the server's password policy asks.
    password: String,
}

/// A new user.
#[derive(Debug, Serialize, ToSchema)]
pub struct CreatedUser {
    /// Its id.
    id: Uuid,
    /// Its name, as stored.
    username: String,
    /// The workspace made for it.
    personal_workspace_id: Uuid,
}

fn valid_username(name: &str) -> bool {
    let ok = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || "-_.".contains(c);
    (2..=64).contains(&name.len())
        && name.chars().all(ok)
        && name.chars().next().is_some_and(|c| c.is_ascii_lowercase())
}

/// Creates a user (server admins only).
#[utoipa::path(
    post,
    path = "/api/v1/users",
    operation_id = "create_user",
    tag = "users",
    request_body = CreateUser,
    responses(
        (status = 201, description = "The user", body = CreatedUser),
        (status = 400, description = "`INVALID_BODY`, `NUL_CHARACTER`, `INVALID_USERNAME`, `WEAK_PASSWORD`",
            body = ErrorBody),
        (status = 409, description = "`USERNAME_TAKEN`", body = ErrorBody),
    ),
    extensions(("x-agenthold-access" = json!(Access::ServerAdmin))),
)]
pub async fn create(
    State(state): State<AppState>,
    principal: Principal,
    Body(body): Body<CreateUser>,
) -> Result<(StatusCode, Json<CreatedUser>), ApiError> {
    let me = principal.user(&state).await?;
    if !me.server_admin {
        return Err(ApiError::Forbidden { needed: store::users::Role::Admin });
    }
    let username = body.username.trim().to_lowercase();
    if !valid_username(&username) {
        return Err(ApiError::bad_request(
            ErrorCode::InvalidUsername,
            "usernames are 2-64 characters of a-z, 0-9, '-', '_', '.', starting with a letter",
        ));
    }
    passwords::check_policy(&body.password).map_err(|m| ApiError::bad_request(ErrorCode::WeakPassword, m))?;
    let user = UserRow {
        id: Uuid::new_v4(),
        username: username.clone(),
        password_hash: passwords::hash(body.password).await?,
        server_admin: false,
    };
    let workspace = match store::users::create(&state.pool, &user).await {
        Ok(workspace) => workspace,
        Err(CreateUserError::Taken) => {
            return Err(ApiError::conflict(ErrorCode::UsernameTaken, "the username is taken"));
        }
        Err(CreateUserError::Db(error)) => return Err(error.into()),
    };
    if let Some(admin_workspace) = store::users::personal_workspace(&state.pool, me.id).await? {
        let record = AuditRecord {
            workspace_id: admin_workspace,
            actor_user_id: Some(me.id),
            action: "user.created",
            resource_type: "user",
            resource_id: user.id.to_string(),
            detail: json!({"username": username}),
        };
        store::audit::append(&state.pool, record).await?;
    }
    Ok((StatusCode::CREATED, Json(CreatedUser { id: user.id, username, personal_workspace_id: workspace })))
}
