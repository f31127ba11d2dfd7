//! Extractors that turn malformed input into [`ApiError`]s with codes: JSON bodies (unknown
//! fields rejected by the target types; a NUL character, which Postgres cannot store in text,
//! rejected as `NUL_CHARACTER`), query strings, ids in paths (an id that does not parse names
//! no resource: 404), and WebSocket upgrades (a plain request to a WebSocket route:
//! `NOT_A_WEBSOCKET`).

use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use serde::de::DeserializeOwned;

use super::error::ApiError;
use crate::error_code::ErrorCode;

/// A JSON body; malformed JSON, a wrong shape or unknown fields → 400 `INVALID_BODY`; a string
/// holding NUL (`\u0000`) → 400 `NUL_CHARACTER`.
pub struct Body<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for Body<T> {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, Self::Rejection> {
        let (parts, body) = request.into_parts();
        let RawBody(bytes) = RawBody::from_request(Request::from_parts(parts.clone(), body), state).await?;
        let request = Request::from_parts(parts, axum::body::Body::from(bytes.clone()));
        match axum::Json::<T>::from_request(request, state).await {
            Ok(axum::Json(value)) => {
                reject_nul(&bytes)?;
                Ok(Self(value))
            }
            Err(rejection) => Err(ApiError::bad_request(ErrorCode::InvalidBody, rejection.body_text())),
        }
    }
}

/// A body read whole, to be parsed later (with [`parse_json`], once the caller's role is
/// checked); over the limit → 413 `PAYLOAD_TOO_LARGE`, unreadable → 400 `INVALID_BODY`.
pub struct RawBody(pub axum::body::Bytes);

impl<S: Send + Sync> FromRequest<S> for RawBody {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, Self::Rejection> {
        axum::body::Bytes::from_request(request, state).await.map(Self).map_err(|rejection| match rejection.status() {
            axum::http::StatusCode::PAYLOAD_TOO_LARGE => ApiError::PayloadTooLarge,
            _ => ApiError::bad_request(ErrorCode::InvalidBody, rejection.body_text()),
        })
    }
}

/// Parses a JSON body read by hand, with the same errors as [`Body`].
pub fn parse_json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    let value =
        serde_json::from_slice(bytes).map_err(|e| ApiError::bad_request(ErrorCode::InvalidBody, e.to_string()))?;
    reject_nul(bytes)?;
    Ok(value)
}

/// 400 `NUL_CHARACTER` when a JSON text holds the escape `\u0000` (a NUL in a string; Postgres
/// cannot store it). An escaped backslash followed by `u0000` is text, not a NUL.
fn reject_nul(json: &[u8]) -> Result<(), ApiError> {
    if has_nul(json) {
        return Err(ApiError::bad_request(
            ErrorCode::NulCharacter,
            "text must not contain the NUL character (\\u0000)",
        ));
    }
    Ok(())
}

fn has_nul(json: &[u8]) -> bool {
    let mut backslashes = 0usize;
    for (i, byte) in json.iter().enumerate() {
        if *byte == b'\\' {
            backslashes += 1;
            continue;
        }
        if backslashes % 2 == 1 && *byte == b'u' && json.get(i + 1..i + 5) == Some(b"0000") {
            return true;
        }
        backslashes = 0;
    }
    false
}

/// A query string; anything malformed → 400 `INVALID_QUERY`.
pub struct Query<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequestParts<S> for Query<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        match axum::extract::Query::<T>::from_request_parts(parts, state).await {
            Ok(axum::extract::Query(value)) => Ok(Self(value)),
            Err(rejection) => Err(ApiError::bad_request(ErrorCode::InvalidQuery, rejection.body_text())),
        }
    }
}

/// A WebSocket upgrade; a request that is not one → 400 `NOT_A_WEBSOCKET`.
pub struct Upgrade(pub axum::extract::ws::WebSocketUpgrade);

impl<S: Send + Sync> FromRequestParts<S> for Upgrade {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        axum::extract::ws::WebSocketUpgrade::from_request_parts(parts, state)
            .await
            .map(Self)
            .map_err(|rejection| ApiError::bad_request(ErrorCode::NotAWebsocket, rejection.body_text()))
    }
}

/// The `{id}` of a path, parsed as `T`; one that does not parse is not found.
pub struct Id<T>(pub T);

impl<T: std::str::FromStr + Send, S: Send + Sync> FromRequestParts<S> for Id<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let axum::extract::Path(params) =
            axum::extract::Path::<std::collections::HashMap<String, String>>::from_request_parts(parts, state)
                .await
                .map_err(|_| ApiError::NotFound("resource"))?;
        let raw = params.get("id").ok_or(ApiError::NotFound("resource"))?;
        raw.parse().map(Self).map_err(|_| ApiError::NotFound("resource"))
    }
}

#[cfg(test)]
mod tests {
    use super::has_nul;

    #[test]
    fn nul_escapes_are_found_and_escaped_backslashes_are_not() {
        assert!(has_nul(br#"{"text":"a\u0000b"}"#));
        assert!(has_nul(br#"{"text":"\\\u0000"}"#));
        assert!(!has_nul(br#"{"text":"\\u0000"}"#));
        assert!(!has_nul(br#"{"text":"\u0001 u0000"}"#));
    }
}
