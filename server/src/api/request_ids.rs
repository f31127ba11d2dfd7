//! Every request gets an id: the caller's `X-Request-Id` if it sent a well-formed one (1–64 of
//! `[A-Za-z0-9._-]`), else a new UUID. It is in the request's log span (so on every line logged
//! while handling it, and in the JSON logs) and returned in the response's `X-Request-Id`, so a
//! caller can quote it.

use axum::extract::Request;
use axum::http::{HeaderName, HeaderValue};
use axum::middleware::Next;
use axum::response::Response;
use tracing::Span;

/// The header.
pub static HEADER: HeaderName = HeaderName::from_static("x-request-id");

/// Longest id taken from a caller.
const MAX_LEN: usize = 64;

/// Middleware (outside the trace layer): sets the id on the request and the response.
pub async fn assign(mut request: Request, next: Next) -> Response {
    let id = request.headers().get(&HEADER).filter(|id| well_formed(id.as_bytes())).cloned().unwrap_or_else(new_id);
    request.headers_mut().insert(HEADER.clone(), id.clone());
    let mut response = next.run(request).await;
    response.headers_mut().insert(HEADER.clone(), id);
    response
}

fn new_id() -> HeaderValue {
    let mut buffer = uuid::Uuid::encode_buffer();
    let id = uuid::Uuid::new_v4().hyphenated().encode_lower(&mut buffer);
    HeaderValue::from_str(id).unwrap_or(HeaderValue::from_static("-"))
}

/// The request's span: method, path and id (never the query, never another header).
pub fn span<B>(request: &axum::http::Request<B>) -> Span {
    let id = request.headers().get(&HEADER).and_then(|id| id.to_str().ok()).unwrap_or("-");
    tracing::info_span!("request", method = %request.method(), path = %request.uri().path(), request_id = %id)
}

/// Whether a caller's id may be kept.
fn well_formed(id: &[u8]) -> bool {
    !id.is_empty() && id.len() <= MAX_LEN && id.iter().all(|b| b.is_ascii_alphanumeric() || b"._-".contains(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_short_plain_ids_are_kept() {
        assert!(well_formed(b"build-42.retry_1"));
        assert!(!well_formed(b""));
        assert!(!well_formed(b"a b"));
        assert!(!well_formed(b"x\"}{"));
        assert!(!well_formed(&[b'a'; 65]));
    }
}
