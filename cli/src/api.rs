//! The agenthold API as seen from the client: authenticated JSON requests over [`crate::http`]
//! and authenticated WebSocket connections, with error responses turned into [`Failure::Api`].

use std::fmt;
use std::time::Duration;

use anyhow::Context;
use serde_json::Value;
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

use crate::endpoint::Endpoint;
use crate::error::Failure;
use crate::http;

/// A WebSocket connection to the server.
pub type Socket = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// A bearer token; `Debug` does not show it.
#[derive(Clone)]
pub struct Token(String);

impl Token {
    /// Wraps a token.
    pub fn new(token: String) -> Self {
        Self(token)
    }

    fn header(&self) -> String {
        format!("Bearer {}", self.0)
    }
}

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Token(<redacted>)")
    }
}

/// An API client.
#[derive(Debug, Clone)]
pub struct Client {
    /// The server.
    endpoint: Endpoint,
    /// Sent as `Authorization: Bearer`, if set.
    token: Option<Token>,
    /// Deadline for one REST request (connect, send, whole response).
    timeout: Duration,
}

impl Client {
    /// A client for `endpoint`.
    pub fn new(endpoint: Endpoint, token: Option<Token>, timeout: Duration) -> Self {
        Self { endpoint, token, timeout }
    }

    /// Sends a request to an API path (`/api/v1/…`, query included) with an optional JSON
    /// body. Returns the JSON body of a 2xx response (`None` when it is empty, as for 204);
    /// any other status is a [`Failure::Api`].
    pub async fn call(&self, method: &str, path: &str, body: Option<&Value>) -> Result<Option<Value>, Failure> {
        let body_bytes = body.map(serde_json::to_vec).transpose().context("encoding the request body")?;
        let target = self.endpoint.target(path);
        let mut headers = vec![("Accept", "application/json".to_owned())];
        if let Some(token) = &self.token {
            headers.push(("Authorization", token.header()));
        }
        if body_bytes.is_some() {
            headers.push(("Content-Type", "application/json".to_owned()));
        }
        let request = http::Request { method, target: &target, headers, body: body_bytes.as_deref() };
        let response = tokio::time::timeout(self.timeout, http::send(&self.endpoint, &request))
            .await
            .map_err(|_| Failure::Timeout(format!("{method} {path}: no complete response within {:?}", self.timeout)))?
            .with_context(|| format!("{method} {path}"))?;
        if !(200..300).contains(&response.status) {
            return Err(Failure::from_response(response.status, &response.body));
        }
        if response.body.iter().all(u8::is_ascii_whitespace) {
            return Ok(None);
        }
        let value = serde_json::from_slice(&response.body)
            .with_context(|| format!("{method} {path}: the {} response is not JSON", response.status))?;
        Ok(Some(value))
    }

    /// Opens a WebSocket on an API path, with the `Authorization` header. A refused upgrade
    /// is a [`Failure::Api`] carrying the server's error code.
    pub async fn websocket(&self, path: &str) -> Result<Socket, Failure> {
        let url = self.endpoint.ws_url(path);
        let mut request =
            url.as_str().into_client_request().with_context(|| format!("building a WebSocket request for {url}"))?;
        if let Some(token) = &self.token {
            let value = HeaderValue::from_str(&token.header()).context("the token is not a valid header value")?;
            request.headers_mut().insert("Authorization", value);
        }
        let connect = tokio_tungstenite::connect_async(request);
        match tokio::time::timeout(self.timeout, connect).await {
            Err(_) => Err(Failure::Timeout(format!("opening {url}: no answer within {:?}", self.timeout))),
            Ok(Ok((socket, _response))) => Ok(socket),
            Ok(Err(tokio_tungstenite::tungstenite::Error::Http(response))) => {
                let status = response.status().as_u16();
                Err(Failure::from_response(status, response.body().as_deref().unwrap_or_default()))
            }
            Ok(Err(error)) => Err(anyhow::Error::new(error).context(format!("opening {url}")).into()),
        }
    }
}
