//! `/api/v1/users`: the server admin creates users (each gets a personal workspace).

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::Deserialize;
use serde_json::{Value, json};
use uuid::Uuid;

use super::error::ApiError;
use super::extract::Body;
use crate::app::AppState;
use crate::auth::{Principal, passwords};
use crate::store;
use crate::store::audit::AuditRecord;
use crate::store::users::{CreateUserError, UserRow};

/// `POST /api/v1/users`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateUser {
    username: String,
    password: String,
}

fn valid_username(name: &str) -> bool {
    let ok = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || "-_.".contains(c);
    (2..=64).contains(&name.len())
        && name.chars().all(ok)
        && name.chars().next().is_some_and(|c| c.is_ascii_lowercase())
}

/// Creates a user (server admins only; anyone else is told the route does not exist for them).
pub async fn create(
    State(state): State<AppState>,
    principal: Principal,
    Body(body): Body<CreateUser>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let me = principal.user(&state).await?;
    if !me.server_admin {
        return Err(ApiError::Forbidden { needed: store::users::Role::Admin });
    }
    let username = body.username.trim().to_lowercase();
    if !valid_username(&username) {
        return Err(ApiError::bad_request(
            "INVALID_USERNAME",
            "usernames are 2-64 characters of a-z, 0-9, '-', '_', '.', starting with a letter",
        ));
    }
    passwords::check_policy(&body.password).map_err(|m| ApiError::bad_request("WEAK_PASSWORD", m))?;
    let user = UserRow {
        id: Uuid::new_v4(),
        username: username.clone(),
        password_hash: passwords::hash(body.password).await?,
        server_admin: false,
    };
    let workspace = match store::users::create(&state.pool, &user).await {
        Ok(workspace) => workspace,
        Err(CreateUserError::Taken) => return Err(ApiError::conflict("USERNAME_TAKEN", "the username is taken")),
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
    Ok((StatusCode::CREATED, Json(json!({"id": user.id, "username": username, "personal_workspace_id": workspace}))))
}
