//! The API's one error type: a stable machine-readable `code`, a clear message, the right
//! status. Internal errors are logged once here and answered with a generic 500.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

pub use crate::error_code::ErrorCode;

/// Errors a handler returns.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// Missing or unknown credentials.
    #[error("missing or invalid credentials")]
    Unauthorized,
    /// A cookie-authenticated state-changing request without the session's CSRF token.
    #[error("missing or wrong X-CSRF-Token for this session")]
    CsrfRejected,
    /// A cookie-authenticated WebSocket upgrade from a page of another origin.
    #[error("this WebSocket must be opened from the server's own origin (or with a bearer token)")]
    OriginRejected,
    /// Too many failed logins from this address: try again after this long.
    #[error("too many failed logins from this address; try again in {retry_after_secs} s")]
    TooManyAttempts {
        /// `Retry-After`.
        retry_after_secs: u32,
    },
    /// Too many password checks at once; try again shortly.
    #[error("the server is busy checking passwords; try again shortly")]
    LoginBusy,
    /// A malformed request (body, query, path).
    #[error("{message}")]
    BadRequest {
        /// The code.
        code: ErrorCode,
        /// Why.
        message: String,
    },
    /// The caller can see the resource but its role does not allow this.
    #[error("this needs the {} role in the resource's workspace", needed.as_str())]
    Forbidden {
        /// The role needed.
        needed: crate::store::users::Role,
    },
    /// No such resource (or not visible to the caller).
    #[error("{0} not found")]
    NotFound(&'static str),
    /// The request conflicts with the resource's state.
    #[error("{message}")]
    Conflict {
        /// The code.
        code: ErrorCode,
        /// Why.
        message: String,
    },
    /// A dependency (the sandbox, the engine) failed.
    #[error("{message}")]
    Unavailable {
        /// The code.
        code: ErrorCode,
        /// Why.
        message: String,
    },
    /// Postgres cannot be reached right now (docs/operations.md, "Postgres outages").
    #[error("the database is unavailable; try again shortly")]
    DatabaseUnavailable,
    /// Every request slot of the listener is taken (`AGENTHOLD_MAX_CONCURRENT_REQUESTS`).
    #[error("the server is busy; try again shortly")]
    ServerBusy,
    /// The request took longer than `AGENTHOLD_REQUEST_TIMEOUT_SECS`.
    #[error("the request took too long and was stopped")]
    Timeout,
    /// The request body is larger than `AGENTHOLD_MAX_BODY_BYTES`.
    #[error("the request body is too large")]
    PayloadTooLarge,
    /// A refusal with its own status (a webhook delivery: unsigned 401, replayed 409, …).
    #[error("{message}")]
    Refused {
        /// The status.
        status: StatusCode,
        /// The code.
        code: ErrorCode,
        /// Why.
        message: String,
    },
    /// Anything else: logged, answered generically.
    #[error("internal error")]
    Internal(anyhow::Error),
}

impl From<anyhow::Error> for ApiError {
    fn from(error: anyhow::Error) -> Self {
        if crate::store::availability::chain_is_unavailable(&error) {
            tracing::warn!(error = format!("{error:#}"), "the database is unavailable");
            return Self::DatabaseUnavailable;
        }
        Self::Internal(error)
    }
}

impl From<sqlx::Error> for ApiError {
    fn from(error: sqlx::Error) -> Self {
        anyhow::Error::from(error).into()
    }
}

impl From<crate::store::quotas::QuotaError> for ApiError {
    fn from(error: crate::store::quotas::QuotaError) -> Self {
        match error {
            crate::store::quotas::QuotaError::Exceeded(message) => Self::conflict(ErrorCode::QuotaExceeded, message),
            crate::store::quotas::QuotaError::Db(error) => error.into(),
        }
    }
}

impl ApiError {
    /// A 400 with a code.
    pub fn bad_request(code: ErrorCode, message: impl Into<String>) -> Self {
        Self::BadRequest { code, message: message.into() }
    }

    /// A 409 with a code.
    pub fn conflict(code: ErrorCode, message: impl Into<String>) -> Self {
        Self::Conflict { code, message: message.into() }
    }
}

/// Seconds a login refused because every password check slot was busy is told to wait.
pub const BUSY_RETRY_AFTER_SECS: u32 = 1;
/// Seconds a caller is told to wait while the database is unavailable.
pub const DATABASE_RETRY_AFTER_SECS: u32 = 2;

impl ApiError {
    fn retry_after_secs(&self) -> Option<u32> {
        match self {
            Self::TooManyAttempts { retry_after_secs } => Some(*retry_after_secs),
            Self::LoginBusy | Self::ServerBusy => Some(BUSY_RETRY_AFTER_SECS),
            Self::DatabaseUnavailable => Some(DATABASE_RETRY_AFTER_SECS),
            _ => None,
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let (status, code) = match &self {
            Self::Unauthorized => (StatusCode::UNAUTHORIZED, ErrorCode::Unauthorized),
            Self::CsrfRejected => (StatusCode::FORBIDDEN, ErrorCode::CsrfRejected),
            Self::OriginRejected => (StatusCode::FORBIDDEN, ErrorCode::OriginRejected),
            Self::TooManyAttempts { .. } => (StatusCode::TOO_MANY_REQUESTS, ErrorCode::TooManyAttempts),
            Self::LoginBusy => (StatusCode::SERVICE_UNAVAILABLE, ErrorCode::LoginBusy),
            Self::BadRequest { code, .. } => (StatusCode::BAD_REQUEST, *code),
            Self::Forbidden { .. } => (StatusCode::FORBIDDEN, ErrorCode::Forbidden),
            Self::NotFound(_) => (StatusCode::NOT_FOUND, ErrorCode::NotFound),
            Self::Conflict { code, .. } => (StatusCode::CONFLICT, *code),
            Self::Unavailable { code, .. } => (StatusCode::SERVICE_UNAVAILABLE, *code),
            Self::PayloadTooLarge => (StatusCode::PAYLOAD_TOO_LARGE, ErrorCode::PayloadTooLarge),
            Self::Refused { status, code, .. } => (*status, *code),
            Self::DatabaseUnavailable => (StatusCode::SERVICE_UNAVAILABLE, ErrorCode::DatabaseUnavailable),
            Self::ServerBusy => (StatusCode::SERVICE_UNAVAILABLE, ErrorCode::ServerBusy),
            Self::Timeout => (StatusCode::SERVICE_UNAVAILABLE, ErrorCode::RequestTimeout),
            Self::Internal(error) => {
                tracing::error!(error = format!("{error:#}"), "internal error");
                (StatusCode::INTERNAL_SERVER_ERROR, ErrorCode::Internal)
            }
        };
        let body = ErrorBody { error: ErrorDetail { code, message: self.to_string() } };
        let mut response = (status, Json(body)).into_response();
        if let Some(seconds) = self.retry_after_secs() {
            response.headers_mut().insert(axum::http::header::RETRY_AFTER, seconds.into());
        }
        response
    }
}

/// The body of every error answer: `{"error": {"code", "message"}}`.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
#[schema(as = Error)]
pub struct ErrorBody {
    /// What went wrong.
    pub error: ErrorDetail,
}

/// An error's code and message.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub struct ErrorDetail {
    /// A stable, machine-readable code (`NOT_FOUND`, `TURN_IN_PROGRESS`, …); each operation lists
    /// the codes it can answer with under its statuses.
    pub code: ErrorCode,
    /// A clear message for a person.
    pub message: String,
}
