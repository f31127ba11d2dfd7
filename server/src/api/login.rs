//! `/api/v1/auth/login` and `/api/v1/auth/logout`: browser sessions. A wrong password and an
//! unknown user get the same answer after the same work (a password check against a dummy hash);
//! failures are throttled per account and per address (429).

use std::net::SocketAddr;
use std::sync::LazyLock;

use axum::Json;
use axum::extract::{ConnectInfo, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::IntoResponse;
use rand::RngCore;
use serde::Deserialize;
use serde_json::json;

use super::error::ApiError;
use super::extract::Body;
use crate::app::AppState;
use crate::auth::{Credential, Principal, SESSION_COOKIE, passwords};
use crate::store;
use crate::store::audit::AuditRecord;

/// Failed logins per account within the window before further attempts get 429.
const MAX_FAILURES_PER_ACCOUNT: i64 = 10;
/// Failed logins per address within the window.
const MAX_FAILURES_PER_ADDRESS: i64 = 50;
/// The throttling window.
const WINDOW_MINUTES: i32 = 15;

/// A hash to check passwords of unknown users against, so both cases cost the same.
static DUMMY_HASH: LazyLock<String> = LazyLock::new(|| {
    use argon2::password_hash::PasswordHasher;
    argon2::Argon2::default().hash_password(b"not a real password").map(|h| h.to_string()).unwrap_or_default()
});

/// `POST /api/v1/auth/login`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Login {
    username: String,
    password: String,
}

fn random_hex(bytes: usize) -> String {
    let mut buffer = vec![0u8; bytes];
    rand::rng().fill_bytes(&mut buffer);
    buffer.iter().map(|b| format!("{b:02x}")).collect()
}

/// Checks the password and starts a browser session (an HttpOnly, SameSite=Strict cookie);
/// the answer carries the CSRF token state-changing requests must echo.
pub async fn login(
    State(state): State<AppState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    Body(body): Body<Login>,
) -> Result<impl IntoResponse, ApiError> {
    let username = body.username.trim().to_lowercase();
    let address = peer.ip().to_string();
    let (by_user, by_address) =
        store::browser_sessions::recent_failures(&state.pool, &username, &address, WINDOW_MINUTES).await?;
    if by_user >= MAX_FAILURES_PER_ACCOUNT || by_address >= MAX_FAILURES_PER_ADDRESS {
        return Err(ApiError::TooManyAttempts);
    }
    let user = store::users::by_username(&state.pool, &username).await?;
    let hash = user.as_ref().map_or_else(|| DUMMY_HASH.clone(), |u| u.password_hash.clone());
    let matches = passwords::verify(body.password, hash).await? && user.is_some();
    let Some(user) = user.filter(|_| matches) else {
        store::browser_sessions::record_failure(&state.pool, &username, &address).await?;
        return Err(ApiError::Unauthorized);
    };
    let token = random_hex(32);
    let csrf_token = random_hex(16);
    let ttl = state.config.session_ttl_secs.clamp(1, 30 * 24 * 3600);
    let expires_at = chrono::Utc::now() + chrono::Duration::seconds(ttl);
    store::browser_sessions::create(&state.pool, user.id, &token, &csrf_token, expires_at).await?;
    if let Some(workspace_id) = store::users::personal_workspace(&state.pool, user.id).await? {
        let record = AuditRecord {
            workspace_id,
            actor_user_id: Some(user.id),
            action: "user.logged_in",
            resource_type: "user",
            resource_id: user.id.to_string(),
            detail: json!({"address": address}),
        };
        store::audit::append(&state.pool, record).await?;
    }
    let cookie = format!("{SESSION_COOKIE}={token}; HttpOnly; SameSite=Strict; Path=/; Max-Age={ttl}");
    let mut headers = HeaderMap::new();
    headers.insert(header::SET_COOKIE, HeaderValue::from_str(&cookie).map_err(|e| ApiError::Internal(e.into()))?);
    let body =
        json!({"user": {"id": user.id, "username": user.username}, "csrf_token": csrf_token, "expires_at": expires_at});
    Ok((StatusCode::OK, headers, Json(body)))
}

/// Ends the caller's browser session (and clears the cookie).
pub async fn logout(State(state): State<AppState>, principal: Principal) -> Result<impl IntoResponse, ApiError> {
    if let Credential::Session(id) = principal.credential {
        store::browser_sessions::delete(&state.pool, id).await?;
    }
    let cookie = format!("{SESSION_COOKIE}=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0");
    let mut headers = HeaderMap::new();
    headers.insert(header::SET_COOKIE, HeaderValue::from_str(&cookie).map_err(|e| ApiError::Internal(e.into()))?);
    Ok((StatusCode::NO_CONTENT, headers))
}

#[cfg(test)]
mod tests {
    use super::*;
    use argon2::password_hash::phc::PasswordHash;

    #[tokio::test]
    async fn an_unknown_user_costs_the_same_password_check_as_a_known_one() {
        let real = passwords::hash("a real user's password".to_owned()).await.expect("hash");
        let (dummy, real) =
            (PasswordHash::new(&DUMMY_HASH).expect("dummy parses"), PasswordHash::new(&real).expect("real parses"));
        assert_eq!(dummy.algorithm, real.algorithm, "same algorithm");
        assert_eq!(dummy.params, real.params, "same memory, iterations and parallelism");
    }
}
