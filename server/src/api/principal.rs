//! Who is calling an API route: the [`Principal`] extractor (an API token, or a browser session
//! cookie with its CSRF token on state-changing requests and the server's own origin on
//! WebSocket upgrades) and the role checks handlers make against a resource's workspace (404
//! for non-members, 403 below the role needed). What a principal is, and the re-checks of open
//! sockets, are [`crate::auth`]'s.

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{Method, header};
use uuid::Uuid;

use super::error::ApiError;
use crate::auth::{CSRF_HEADER, Credential, Principal, origin, session_cookie};
use crate::state::AppState;
use crate::store;
use crate::store::users::Role;

fn cookie<'a>(parts: &'a Parts, name: &str) -> Option<&'a str> {
    parts
        .headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find_map(|(key, value)| (key == name).then_some(value))
}

impl FromRequestParts<AppState> for Principal {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        let bearer = parts
            .headers
            .get(header::AUTHORIZATION)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.strip_prefix("Bearer "));
        if let Some(token) = bearer {
            return match store::tokens::authenticate(&state.pool, token.trim()).await? {
                Some(owner) => Ok(Principal {
                    user_id: owner.user_id,
                    credential: Credential::Token(owner.token_id),
                    csrf_token: None,
                }),
                None => Err(ApiError::Unauthorized),
            };
        }
        let (name, _) = session_cookie(state.config.public_url.as_deref());
        let token = cookie(parts, name).ok_or(ApiError::Unauthorized)?;
        let session = store::browser_sessions::find(&state.pool, token).await?.ok_or(ApiError::Unauthorized)?;
        if origin::is_websocket_upgrade(parts)
            && !origin::is_own_origin(&parts.headers, state.config.public_url.as_deref())
        {
            return Err(ApiError::OriginRejected);
        }
        let safe = matches!(parts.method, Method::GET | Method::HEAD | Method::OPTIONS);
        let echoed = parts.headers.get(CSRF_HEADER).and_then(|value| value.to_str().ok());
        if !safe && echoed != Some(session.csrf_token.as_str()) {
            return Err(ApiError::CsrfRejected);
        }
        Ok(Principal {
            user_id: session.user_id,
            credential: Credential::Session(session.id),
            csrf_token: Some(session.csrf_token),
        })
    }
}

impl Principal {
    /// Checks the caller's role in a workspace: 404 (`what` not found) for non-members, 403 for
    /// members whose role is below `needed`. Returns the caller's role.
    pub async fn require(
        &self,
        state: &AppState,
        workspace_id: Uuid,
        needed: Role,
        what: &'static str,
    ) -> Result<Role, ApiError> {
        match store::users::role_in(&state.pool, self.user_id, workspace_id).await? {
            None => Err(ApiError::NotFound(what)),
            Some(role) if role < needed => Err(ApiError::Forbidden { needed }),
            Some(role) => Ok(role),
        }
    }

    /// The caller's user row.
    pub async fn user(&self, state: &AppState) -> Result<store::users::UserRow, ApiError> {
        store::users::get(&state.pool, self.user_id).await?.ok_or(ApiError::Unauthorized)
    }
}
