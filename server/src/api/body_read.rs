//! The body-read deadline, apart from the handler's: a request's body is read whole *before* the
//! request takes one of the listener's slots ([`super::limits`]), within
//! `AGENTHOLD_BODY_READ_SECS` plus a second per 64 KiB it declares. A client that sends a head and
//! then trickles its body — or never sends it — holds a connection for those seconds, never a
//! slot or a handler: 1,000 such clients cannot answer everyone `503 SERVER_BUSY`. Past the
//! deadline: `408 BODY_READ_TIMEOUT`, and the connection is closed (its body was not read to the
//! end).
//!
//! Bodies are held in memory up to the largest limit of any route (`AGENTHOLD_MAX_BODY_BYTES`,
//! the webhook limit); a body declared larger is passed on unread, to be refused with
//! `413 PAYLOAD_TOO_LARGE` by its route before anything is read.

use std::time::Duration;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http_body_util::BodyExt;

use super::error::ApiError;
use crate::error_code::ErrorCode;

/// How bodies are read.
#[derive(Clone, Copy, Debug)]
pub struct BodyRead {
    /// The deadline for a small body.
    pub base: Duration,
    /// The most bytes held (the largest route limit).
    pub cap: usize,
}

/// Bytes read per extra second of deadline.
const BYTES_PER_SECOND: usize = 64 * 1024;

impl BodyRead {
    /// The deadline for a body of `declared` bytes (`None`: not declared — chunked — taken as
    /// the cap).
    pub fn deadline(&self, declared: Option<usize>) -> Duration {
        let bytes = declared.unwrap_or(self.cap).min(self.cap);
        self.base + Duration::from_secs((bytes / BYTES_PER_SECOND) as u64)
    }
}

fn declared_length(request: &Request) -> Option<usize> {
    request.headers().get(header::CONTENT_LENGTH)?.to_str().ok()?.trim().parse().ok()
}

fn has_body(request: &Request) -> bool {
    declared_length(request).is_some_and(|n| n > 0) || request.headers().contains_key(header::TRANSFER_ENCODING)
}

/// A refusal after which the connection must not be reused.
fn closing(error: ApiError) -> Response {
    let mut response = error.into_response();
    response.headers_mut().insert(header::CONNECTION, header::HeaderValue::from_static("close"));
    response
}

/// Middleware: reads the body within its deadline, then hands the request on.
pub async fn read_first(State(read): State<BodyRead>, request: Request, next: Next) -> Response {
    if !has_body(&request) {
        return next.run(request).await;
    }
    let declared = declared_length(&request);
    if declared.is_some_and(|n| n > read.cap) {
        return next.run(request).await;
    }
    let deadline = read.deadline(declared);
    let (parts, body) = request.into_parts();
    let limited = http_body_util::Limited::new(body, read.cap);
    match tokio::time::timeout(deadline, limited.collect()).await {
        Err(_) => closing(ApiError::Refused {
            status: StatusCode::REQUEST_TIMEOUT,
            code: ErrorCode::BodyReadTimeout,
            message: format!("the request's body did not arrive within {} s", deadline.as_secs()),
        }),
        Ok(Err(error)) if error.is::<http_body_util::LengthLimitError>() => closing(ApiError::PayloadTooLarge),
        Ok(Err(_)) => closing(ApiError::bad_request(ErrorCode::InvalidBody, "the request's body could not be read")),
        Ok(Ok(collected)) => next.run(Request::from_parts(parts, Body::from(collected.to_bytes()))).await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_bodies_get_the_base_deadline_and_large_ones_a_second_per_64_kib() {
        let read = BodyRead { base: Duration::from_secs(5), cap: 4 << 20 };
        assert_eq!(read.deadline(Some(100)), Duration::from_secs(5));
        assert_eq!(read.deadline(Some(1 << 20)), Duration::from_secs(5 + 16));
        assert_eq!(read.deadline(None), Duration::from_secs(5 + 64), "undeclared: as the cap");
        assert_eq!(read.deadline(Some(usize::MAX)), Duration::from_secs(5 + 64), "never past the cap's");
    }
}
