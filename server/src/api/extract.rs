//! Extractors that turn malformed input into [`ApiError`]s with codes: JSON bodies (unknown
//! fields rejected by the target types), query strings, and ids in paths (an id that does not
//! parse names no resource: 404).

use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use serde::de::DeserializeOwned;

use super::error::ApiError;

/// A JSON body; malformed JSON, a wrong shape or unknown fields → 400 `INVALID_BODY`.
pub struct Body<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for Body<T> {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, Self::Rejection> {
        match axum::Json::<T>::from_request(request, state).await {
            Ok(axum::Json(value)) => Ok(Self(value)),
            Err(rejection) => Err(ApiError::bad_request("INVALID_BODY", rejection.body_text())),
        }
    }
}

/// A query string; anything malformed → 400 `INVALID_QUERY`.
pub struct Query<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequestParts<S> for Query<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        match axum::extract::Query::<T>::from_request_parts(parts, state).await {
            Ok(axum::extract::Query(value)) => Ok(Self(value)),
            Err(rejection) => Err(ApiError::bad_request("INVALID_QUERY", rejection.body_text())),
        }
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
