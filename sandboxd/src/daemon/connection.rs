//! The tunnel connection: dialling the server with the sandbox token (over TLS for `wss://`),
//! the reconnect backoff, and [`Link`], the sending half of a live connection.
//!
//! Bounded: a received message may be at most [`MAX_MESSAGE_BYTES`] (a larger one ends the
//! connection, never sandboxd), and a send that the server does not take within the link's
//! timeout (it stopped reading) breaks the link, so the run loop never waits on the server for
//! longer than that.

use std::sync::Arc;
use std::time::Duration;

use futures_util::SinkExt as _;
use futures_util::stream::{SplitSink, SplitStream};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest as _;
use tokio_tungstenite::tungstenite::http::{HeaderValue, header::AUTHORIZATION};
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::{Connector, MaybeTlsStream, WebSocketStream};

use super::log;
use crate::protocol::{Control, DATA_HEADER_LEN, DataFrame, MAX_STDIN_QUEUED_BYTES};

/// Largest message taken from the server: a stdin frame as large as the whole stdin bound, plus
/// room for its header. Control messages are far smaller.
pub const MAX_MESSAGE_BYTES: usize = MAX_STDIN_QUEUED_BYTES as usize + DATA_HEADER_LEN + 64 * 1024;

/// Most bytes one read from the server's connection takes (see `.read_buffer_size` below).
const READ_BUFFER_BYTES: usize = 8 << 10;

/// Most bytes tungstenite may hold unsent (each send is flushed, so this is one message).
const MAX_WRITE_BUFFER_BYTES: usize = 2 * MAX_MESSAGE_BYTES;

/// The WebSocket to the server.
pub type Ws = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// Incoming half of a connection.
pub type WsStream = SplitStream<Ws>;

/// How long one connection attempt (TCP + WebSocket handshake) may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The per-sandbox token; its `Debug` does not show it.
#[derive(Clone)]
pub struct Token(String);

impl Token {
    /// Wraps a token.
    pub fn new(token: String) -> Self {
        Self(token)
    }
}

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(..)")
    }
}

/// Why a connection attempt did not give a connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refused {
    /// The server sent sandboxd to another address (the replica that owns its agent).
    Redirect(String),
    /// Anything else (for logs; never holds the token).
    Failed(String),
}

impl From<String> for Refused {
    fn from(message: String) -> Self {
        Self::Failed(message)
    }
}

impl From<&str> for Refused {
    fn from(message: &str) -> Self {
        Self::Failed(message.to_owned())
    }
}

/// Where a redirect may send sandboxd from `dialled`: a `ws://` or `wss://` URL of the same
/// scheme (a redirect never takes the token from TLS to plain text).
pub fn redirect_target(dialled: &str, location: &str) -> Option<String> {
    let scheme = |url: &str| url.split_once("://").map(|(scheme, _)| scheme.to_ascii_lowercase());
    let (from, to) = (scheme(dialled)?, scheme(location)?);
    (from == to && (to == "ws" || to == "wss") && location.len() <= 2048).then(|| location.to_owned())
}

/// Dials `url` with `Authorization: Bearer <token>`, over TLS with `tls` for `wss://` (a `wss://`
/// URL without `tls` fails). Errors are for logs and never hold the token.
pub async fn connect(url: &str, token: &Token, tls: Option<Arc<rustls::ClientConfig>>) -> Result<Ws, Refused> {
    let mut request = url.into_client_request().map_err(|err| format!("tunnel URL: {err}"))?;
    let mut value =
        HeaderValue::from_str(&format!("Bearer {}", token.0)).map_err(|_| "the token is not a valid header value")?;
    value.set_sensitive(true);
    request.headers_mut().insert(AUTHORIZATION, value);
    let config = WebSocketConfig::default()
        .max_message_size(Some(MAX_MESSAGE_BYTES))
        .max_frame_size(Some(MAX_MESSAGE_BYTES))
        // tungstenite zeroes its read buffer up to this size before every read: its 128 KiB
        // default cost a 128 KiB memset per message.
        .read_buffer_size(READ_BUFFER_BYTES)
        .max_write_buffer_size(MAX_WRITE_BUFFER_BYTES);
    let attempt =
        tokio_tungstenite::connect_async_tls_with_config(request, Some(config), true, tls.map(Connector::Rustls));
    match tokio::time::timeout(CONNECT_TIMEOUT, attempt).await {
        Err(_) => Err("timed out".into()),
        Ok(Err(tokio_tungstenite::tungstenite::Error::Http(response))) if response.status().is_redirection() => {
            let location = response.headers().get("location").and_then(|v| v.to_str().ok());
            match location.and_then(|location| redirect_target(url, location)) {
                Some(target) => Err(Refused::Redirect(target)),
                None => Err(format!("the server answered {} without a usable location", response.status()).into()),
            }
        }
        Ok(Err(err)) => Err(err.to_string().into()),
        Ok(Ok((ws, _response))) => Ok(ws),
    }
}

/// Reconnect delays: 100 ms, doubling, at most 2 s.
#[derive(Debug)]
pub struct Backoff {
    next: Duration,
}

impl Backoff {
    const FIRST: Duration = Duration::from_millis(100);
    const MAX: Duration = Duration::from_secs(2);

    /// The delay before the next attempt.
    pub fn next_delay(&mut self) -> Duration {
        let delay = self.next;
        self.next = (self.next * 2).min(Self::MAX);
        delay
    }

    /// Back to the first delay (after a connection worked).
    pub fn reset(&mut self) {
        self.next = Self::FIRST;
    }
}

impl Default for Backoff {
    fn default() -> Self {
        Self { next: Self::FIRST }
    }
}

/// The sending half of a connection, and where the connection is in its handshake.
pub struct Link {
    sink: SplitSink<Ws, Message>,
    /// How long one send may wait for the server to take it.
    send_timeout: Duration,
    /// The server answered `Hello` with `Resume`: live output may flow.
    pub live: bool,
    /// A send failed; the run loop drops the connection.
    pub broken: bool,
}

impl Link {
    /// Wraps the sending half of a new connection; a send that takes longer than `send_timeout`
    /// breaks it.
    pub fn new(sink: SplitSink<Ws, Message>, send_timeout: Duration) -> Self {
        Self { sink, send_timeout, live: false, broken: false }
    }

    /// Sends a message; a failure or a timeout marks the link broken (logged once).
    pub async fn send(&mut self, message: Message) {
        if self.broken {
            return;
        }
        match tokio::time::timeout(self.send_timeout, self.sink.send(message)).await {
            Ok(Ok(())) => {}
            Ok(Err(err)) => {
                log(format_args!("tunnel send failed: {err}"));
                self.broken = true;
            }
            Err(_) => {
                log(format_args!(
                    "the server took nothing for {} ms; dropping the connection",
                    self.send_timeout.as_millis()
                ));
                self.broken = true;
            }
        }
    }

    /// Sends a control message.
    pub async fn control(&mut self, control: &Control) {
        match serde_json::to_string(control) {
            Ok(text) => self.send(Message::text(text)).await,
            Err(err) => log(format_args!("cannot encode a control message: {err}")),
        }
    }

    /// Sends a data frame.
    pub async fn data(&mut self, frame: &DataFrame) {
        self.send(Message::binary(frame.encode())).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redirects_keep_their_scheme() {
        let from = "ws://lb:7701/tunnel";
        assert_eq!(redirect_target(from, "ws://10.0.0.2:7701/tunnel").as_deref(), Some("ws://10.0.0.2:7701/tunnel"));
        assert_eq!(redirect_target("wss://lb/tunnel", "WSS://r2/tunnel").as_deref(), Some("WSS://r2/tunnel"));
        assert_eq!(redirect_target("wss://lb/tunnel", "ws://r2/tunnel"), None, "never from TLS to plain text");
        assert_eq!(redirect_target(from, "http://r2/tunnel"), None);
        assert_eq!(redirect_target(from, "/tunnel"), None);
        assert_eq!(redirect_target(from, &format!("ws://{}", "a".repeat(3000))), None);
    }

    #[test]
    fn backoff_doubles_to_two_seconds_and_resets() {
        let mut backoff = Backoff::default();
        let delays: Vec<u64> = (0..7).map(|_| backoff.next_delay().as_millis() as u64).collect();
        assert_eq!(delays, vec![100, 200, 400, 800, 1600, 2000, 2000]);
        backoff.reset();
        assert_eq!(backoff.next_delay(), Duration::from_millis(100));
    }

    #[test]
    fn token_debug_is_redacted() {
        assert_eq!(format!("{:?}", Token::new("s3cret".into())), "Token(..)");
    }
}
