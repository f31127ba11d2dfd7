//! `/api/v1/auth/login` and `/api/v1/auth/logout`: browser sessions. A wrong password and an
//! unknown user get the same answer after the same work (a password check against a dummy hash);
//! failures are throttled per account and per address (429 with `Retry-After`). An attempt is
//! counted *before* its password is checked (record, then act), so concurrent attempts cannot
//! pass the limit; the password checks themselves are bounded by the hashing slots (503
//! `LOGIN_BUSY` with `Retry-After` when none frees up in time).

use std::net::SocketAddr;

use axum::Json;
use axum::extract::{ConnectInfo, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::IntoResponse;
use serde::{Deserialize, Serialize};
use serde_json::json;
use utoipa::ToSchema;
use uuid::Uuid;

use super::error::{ApiError, ErrorBody};
use super::extract::Body;
use super::openapi::Access;
use crate::auth::passwords::{self, PasswordError};
use crate::auth::throttle;
use crate::auth::{Credential, Principal, session_cookie};
use crate::state::AppState;
use crate::store;
use crate::store::audit::AuditRecord;

/// How failed logins are throttled ([`crate::auth::throttle`]): each counts for 15 minutes; a
/// (account, address) pair waits longer after each failure past five; an account with 20
/// failures lets only addresses that have not failed on it through; an address with 50 failures
/// (any accounts) waits for the window.
const LIMITS: throttle::Limits =
    throttle::Limits { window: std::time::Duration::from_secs(15 * 60), per_account: 20, per_address: 50 };

/// `POST /api/v1/auth/login`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Login {
    username: String,
    password: String,
}

/// A started browser session.
#[derive(Debug, Serialize, ToSchema)]
pub struct LoggedIn {
    /// Who signed in.
    user: LoginUser,
    /// What requests that change something send in `X-CSRF-Token` with the cookie.
    csrf_token: String,
    /// When the session ends.
    expires_at: chrono::DateTime<chrono::Utc>,
}

/// The user of a login answer.
#[derive(Debug, Serialize, ToSchema)]
pub struct LoginUser {
    /// Its id.
    id: Uuid,
    /// Its name.
    username: String,
}

/// Checks the password and starts a browser session (an HttpOnly, SameSite=Strict cookie);
/// the answer carries the CSRF token state-changing requests must echo.
#[utoipa::path(
    post,
    path = "/api/v1/auth/login",
    operation_id = "login",
    tag = "auth",
    request_body = Login,
    responses(
        (status = 200, description = "Signed in; `Set-Cookie` holds the session", body = LoggedIn,
            headers(("Set-Cookie" = String, description = "The session cookie (HttpOnly, SameSite=Strict; named `__Host-agenthold_session` and Secure when AGENTHOLD_PUBLIC_URL is https)"))),
        (status = 400, description = "`INVALID_BODY`, `NUL_CHARACTER`", body = ErrorBody),
        (status = 401, description = "`UNAUTHORIZED`: wrong username or password", body = ErrorBody),
        (status = 429, description = "`TOO_MANY_ATTEMPTS` (with `Retry-After`)", body = ErrorBody),
        (status = 503, description = "`LOGIN_BUSY` (with `Retry-After`)", body = ErrorBody),
    ),
    extensions(("x-agenthold-access" = json!(Access::Public))),
)]
pub async fn login(
    State(state): State<AppState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    request_headers: HeaderMap,
    Body(body): Body<Login>,
) -> Result<impl IntoResponse, ApiError> {
    let username = body.username.trim().to_lowercase();
    let address =
        crate::auth::client_address::of(peer.ip(), &request_headers, &state.config.trusted_proxies).to_string();
    // Counted as a failure until the password is shown to match.
    let attempt = match store::browser_sessions::reserve_attempt(&state.pool, &username, &address, LIMITS).await? {
        Ok(attempt) => attempt,
        Err(wait) => {
            crate::metrics::login_failed("throttled");
            let retry_after_secs = u32::try_from(wait.as_secs_f64().ceil() as u64).unwrap_or(u32::MAX).max(1);
            return Err(ApiError::TooManyAttempts { retry_after_secs });
        }
    };
    let user = store::users::by_username(&state.pool, &username).await?;
    let matches = match passwords::verify(body.password, user.as_ref().map(|u| u.password_hash.clone())).await {
        Ok(matches) => matches,
        Err(PasswordError::Busy) => {
            // Not checked, so not a failure.
            store::browser_sessions::forgive(&state.pool, attempt).await?;
            crate::metrics::login_failed("busy");
            return Err(ApiError::LoginBusy);
        }
        Err(PasswordError::Failed(error)) => return Err(ApiError::Internal(error)),
    };
    let Some(user) = user.filter(|_| matches) else {
        crate::metrics::login_failed("bad_credentials");
        return Err(ApiError::Unauthorized);
    };
    store::browser_sessions::forgive(&state.pool, attempt).await?;
    let token = hex::encode(rand::random::<[u8; 32]>());
    let csrf_token = hex::encode(rand::random::<[u8; 16]>());
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
    let (name, attributes) = session_cookie(state.config.public_url.as_deref());
    let cookie = format!("{name}={token}; {attributes}; Max-Age={ttl}");
    let mut headers = HeaderMap::new();
    headers.insert(header::SET_COOKIE, HeaderValue::from_str(&cookie).map_err(|e| ApiError::Internal(e.into()))?);
    let body = LoggedIn { user: LoginUser { id: user.id, username: user.username }, csrf_token, expires_at };
    Ok((StatusCode::OK, headers, Json(body)))
}

/// Ends the caller's browser session (and clears the cookie).
#[utoipa::path(
    post,
    path = "/api/v1/auth/logout",
    operation_id = "logout",
    tag = "auth",
    responses((status = 204, description = "Signed out; `Set-Cookie` clears the cookie")),
    extensions(("x-agenthold-access" = json!(Access::SignedIn))),
)]
pub async fn logout(State(state): State<AppState>, principal: Principal) -> Result<impl IntoResponse, ApiError> {
    if let Credential::Session(id) = principal.credential {
        store::browser_sessions::delete(&state.pool, id).await?;
        crate::auth::recheck::record(principal.credential, false, std::time::Instant::now());
    }
    let (name, attributes) = session_cookie(state.config.public_url.as_deref());
    let cookie = format!("{name}=; {attributes}; Max-Age=0");
    let mut headers = HeaderMap::new();
    headers.insert(header::SET_COOKIE, HeaderValue::from_str(&cookie).map_err(|e| ApiError::Internal(e.into()))?);
    Ok((StatusCode::NO_CONTENT, headers))
}
