//! The proxy's own answers: fixed plain-text bodies that name the host and the reason, never
//! a header value, an upstream error text or a secret.

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Empty, Full};
use hyper::header::{CONTENT_TYPE, HeaderValue, PROXY_AUTHENTICATE};
use hyper::{Response, StatusCode};

/// The body type of every response the proxy produces or forwards.
pub type Body = BoxBody<Bytes, hyper::Error>;

/// An empty body.
pub fn empty() -> Body {
    Empty::new().map_err(|never| match never {}).boxed()
}

/// A plain-text response.
pub fn text(status: StatusCode, message: impl Into<String>) -> Response<Body> {
    let mut body = message.into();
    body.insert_str(0, "agenthold-proxy: ");
    body.push('\n');
    let mut response = Response::new(Full::new(Bytes::from(body)).map_err(|never| match never {}).boxed());
    *response.status_mut() = status;
    response.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
    response
}

/// `GET /metrics`: Prometheus' text format.
pub fn metrics(text: String) -> Response<Body> {
    let mut response = Response::new(Full::new(Bytes::from(text)).map_err(|never| match never {}).boxed());
    response.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("text/plain; version=0.0.4"));
    response
}

/// A configured answer (`policy::Answer`): its status, content type and body; the connection
/// closes after it (the request's body is not read).
pub fn answer(answer: &crate::policy::Answer) -> Response<Body> {
    let mut response = Response::new(Full::new(answer.body.clone()).map_err(|never| match never {}).boxed());
    *response.status_mut() = answer.status;
    response.headers_mut().insert(CONTENT_TYPE, answer.content_type.clone());
    response.headers_mut().insert(hyper::header::CONNECTION, HeaderValue::from_static("close"));
    response
}

/// 407 with `Proxy-Authenticate`.
pub fn auth_required() -> Response<Body> {
    let mut response =
        text(StatusCode::PROXY_AUTHENTICATION_REQUIRED, "proxy credentials missing or wrong for this sandbox");
    response.headers_mut().insert(PROXY_AUTHENTICATE, HeaderValue::from_static("Basic realm=\"agenthold\""));
    response
}

/// 403 naming the destination.
pub fn forbidden(destination: &str, why: &str) -> Response<Body> {
    text(StatusCode::FORBIDDEN, format!("{destination} {why}; refused"))
}
