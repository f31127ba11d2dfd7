//! The agenthold API as seen from the client: authenticated JSON requests over `reqwest`
//! (rustls, connect and request timeouts) and authenticated WebSockets over `tokio-tungstenite`
//! with the same TLS configuration; error responses become [`Failure::Api`].

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use serde_json::Value;
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;
use tokio_tungstenite::{Connector, MaybeTlsStream, WebSocketStream};

use crate::endpoint::Endpoint;
use crate::error::Failure;
use crate::secret::{Secret, Token};
use crate::tls;

/// A WebSocket connection to the server.
pub type Socket = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// Largest response body accepted.
const MAX_BODY_BYTES: usize = 256 * 1024 * 1024;

/// How to reach the server.
#[derive(Debug, Clone)]
pub struct Options {
    /// A PEM file of CA certificates trusted besides the built-in roots.
    pub ca_file: Option<PathBuf>,
    /// Deadline for the TCP connection (and TLS handshake for WebSockets).
    pub connect_timeout: Duration,
    /// Deadline for one REST request (connect, send, whole response) and for opening a WebSocket.
    pub timeout: Duration,
}

impl Default for Options {
    fn default() -> Self {
        Self { ca_file: None, connect_timeout: Duration::from_secs(10), timeout: Duration::from_secs(120) }
    }
}

/// A response of any status.
#[derive(Debug)]
pub struct Reply {
    /// The status code.
    pub status: u16,
    /// The whole body.
    pub body: Vec<u8>,
    /// The first cookie the server set (`name=value`, attributes dropped), if any.
    pub cookie: Option<Secret>,
}

impl Reply {
    /// The body as JSON (`None` when it is empty, as for 204).
    pub fn json(&self) -> anyhow::Result<Option<Value>> {
        if self.body.iter().all(u8::is_ascii_whitespace) {
            return Ok(None);
        }
        serde_json::from_slice(&self.body)
            .map(Some)
            .with_context(|| format!("the {} response is not JSON", self.status))
    }
}

/// An API client. Cloning is cheap and shares the connection pool.
#[derive(Debug, Clone)]
pub struct Client {
    /// The server.
    endpoint: Endpoint,
    /// Sent as `Authorization: Bearer`, if set.
    token: Option<Token>,
    /// The REST client (pooled connections).
    http: reqwest::Client,
    /// TLS for WebSockets, the same configuration as `http`'s.
    tls: Arc<rustls::ClientConfig>,
    /// Timeouts.
    options: Options,
}

impl Client {
    /// A client for `endpoint`. Fails on an unreadable `--ca-file`.
    pub fn new(endpoint: Endpoint, token: Option<Token>, options: Options) -> Result<Self, Failure> {
        let tls = tls::client_config(options.ca_file.as_deref())?;
        let http = reqwest::Client::builder()
            .use_preconfigured_tls((*tls).clone())
            .connect_timeout(options.connect_timeout)
            .timeout(options.timeout)
            .user_agent(concat!("agentholdctl/", env!("CARGO_PKG_VERSION")))
            .no_proxy()
            .build()
            .context("setting up the HTTP client")?;
        Ok(Self { endpoint, token, http, tls, options })
    }

    /// The server.
    pub fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    /// Sends a request to an API path (`/api/v1/…`, query included) with an optional JSON body
    /// and returns the response whatever its status.
    pub async fn send(&self, method: &str, path: &str, body: Option<&Value>) -> Result<Reply, Failure> {
        self.send_with(method, path, body, &[]).await
    }

    /// Like [`send`](Self::send), with extra headers whose values are secrets (a cookie, a CSRF
    /// token); they are marked sensitive.
    pub async fn send_with(
        &self,
        method: &str,
        path: &str,
        body: Option<&Value>,
        headers: &[(&'static str, &Secret)],
    ) -> Result<Reply, Failure> {
        let what = || format!("{method} {path}");
        let method = reqwest::Method::from_bytes(method.as_bytes())
            .map_err(|_| Failure::Usage(format!("not an HTTP method: {method:?}")))?;
        let mut request = self.http.request(method, self.endpoint.url(path)).header("Accept", "application/json");
        if let Some(token) = &self.token {
            request = request.bearer_auth(token.expose());
        }
        for (name, value) in headers {
            let mut value = reqwest::header::HeaderValue::from_str(value.expose())
                .map_err(|_| Failure::Usage(format!("{name}: not a valid header value")))?;
            value.set_sensitive(true);
            request = request.header(*name, value);
        }
        if let Some(body) = body {
            request = request.json(body);
        }
        let outcome = async {
            let mut response = request.send().await?;
            let status = response.status().as_u16();
            let cookie = response
                .headers()
                .get(reqwest::header::SET_COOKIE)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.split(';').next())
                .and_then(|pair| crate::secret::parse_token(pair).ok());
            let mut body = Vec::new();
            while let Some(chunk) = response.chunk().await? {
                if body.len() + chunk.len() > MAX_BODY_BYTES {
                    return Ok(Err(status));
                }
                body.extend_from_slice(&chunk);
            }
            Ok(Ok(Reply { status, body, cookie }))
        };
        match outcome.await {
            Ok(Ok(reply)) => Ok(reply),
            Ok(Err(status)) => {
                Err(anyhow::anyhow!("{}: the {status} response is larger than {MAX_BODY_BYTES} bytes", what()).into())
            }
            Err(error) => Err(self.transport_error(error, &what())),
        }
    }

    /// Like [`send`](Self::send), but any status outside 2xx is a [`Failure::Api`]; returns the
    /// JSON body (`None` when empty).
    pub async fn call(&self, method: &str, path: &str, body: Option<&Value>) -> Result<Option<Value>, Failure> {
        let reply = self.send(method, path, body).await?;
        if !(200..300).contains(&reply.status) {
            return Err(Failure::from_response(reply.status, &reply.body));
        }
        Ok(reply.json().with_context(|| format!("{method} {path}"))?)
    }

    fn transport_error(&self, error: reqwest::Error, what: &str) -> Failure {
        if error.is_timeout() {
            let limit = if error.is_connect() { self.options.connect_timeout } else { self.options.timeout };
            return Failure::Timeout(format!("{what}: no answer from {} within {limit:?}", self.endpoint));
        }
        anyhow::Error::new(error).context(format!("{what} ({})", self.endpoint)).into()
    }

    /// Opens a WebSocket on an API path, with the `Authorization` header. A refused upgrade is
    /// a [`Failure::Api`] carrying the server's error code.
    pub async fn websocket(&self, path: &str) -> Result<Socket, Failure> {
        let url = self.endpoint.ws_url(path);
        let mut request =
            url.as_str().into_client_request().with_context(|| format!("building a WebSocket request for {url}"))?;
        if let Some(token) = &self.token {
            let mut value = HeaderValue::from_str(&format!("Bearer {}", token.expose()))
                .context("the token is not a valid header value")?;
            value.set_sensitive(true);
            request.headers_mut().insert("Authorization", value);
        }
        let open = async {
            let address = (self.endpoint.host(), self.endpoint.port());
            let stream = tokio::time::timeout(self.options.connect_timeout, TcpStream::connect(address))
                .await
                .map_err(|_| {
                    Failure::Timeout(format!(
                        "connecting to {}: no connection within {:?}",
                        self.endpoint, self.options.connect_timeout
                    ))
                })?
                .with_context(|| format!("connecting to {}", self.endpoint))?;
            stream.set_nodelay(true).ok();
            let connector = if self.endpoint.is_tls() { Connector::Rustls(self.tls.clone()) } else { Connector::Plain };
            match tokio_tungstenite::client_async_tls_with_config(request, stream, None, Some(connector)).await {
                Ok((socket, _response)) => Ok(socket),
                Err(tokio_tungstenite::tungstenite::Error::Http(response)) => {
                    let status = response.status().as_u16();
                    Err(Failure::from_response(status, response.body().as_deref().unwrap_or_default()))
                }
                Err(error) => Err(anyhow::Error::new(error).context(format!("opening {url}")).into()),
            }
        };
        match tokio::time::timeout(self.options.timeout, open).await {
            Ok(outcome) => outcome,
            Err(_) => Err(Failure::Timeout(format!("opening {url}: no answer within {:?}", self.options.timeout))),
        }
    }
}
