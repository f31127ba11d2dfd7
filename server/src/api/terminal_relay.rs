//! A terminal opened on a replica that does not own the agent (docs/replicas.md): the terminal
//! needs the sandbox's tunnel, which only the owner holds, so this replica opens the same
//! WebSocket on the owner (its `AGENTHOLD_REPLICA_URL`) with the caller's own credentials and
//! `Origin`/`Host` — the owner checks them again — and relays frames both ways. A refusal by the
//! owner (403, 503 …) is answered as the owner gave it. A relayed request is marked
//! ([`RELAYED`]) and never relayed again (an owner that lost the agent meanwhile answers 503).
//!
//! Bounded: each frame is at most the terminal's own limits; a send that the other side does not
//! take within the WebSocket send timeout ends both sockets.

use std::time::Duration;

use axum::extract::ws::{self, WebSocket, WebSocketUpgrade};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures_util::{SinkExt as _, StreamExt as _};
use tokio_tungstenite::tungstenite::{self, client::IntoClientRequest as _, protocol::WebSocketConfig};

use super::error::ApiError;
use crate::error_code::ErrorCode;
use crate::store::replicas::ReplicaRow;

/// The header marking a relayed terminal request.
pub const RELAYED: &str = "x-agenthold-relayed";
/// How long opening the owner's terminal may take (it may wake the sandbox).
const OPEN_TIMEOUT: Duration = Duration::from_secs(120);
/// Largest frame relayed either way (the terminal's input limit is smaller; output frames are
/// chunks of the PTY's reads).
const MAX_FRAME: usize = 1 << 20;

/// Opens the terminal at the owner and relays the caller's socket to it.
pub async fn relay(
    upgrade: WebSocketUpgrade,
    owner: &ReplicaRow,
    path_and_query: &str,
    headers: &HeaderMap,
    send_timeout: Duration,
) -> Result<Response, ApiError> {
    let unavailable = |message: String| ApiError::Unavailable { code: ErrorCode::ReplicaUnavailable, message };
    let authority =
        owner.internal_url.strip_prefix("http://").map(|rest| rest.trim_end_matches('/')).ok_or_else(|| {
            unavailable(format!("the agent's replica has no http:// address ({})", owner.internal_url))
        })?;
    let mut request = format!("ws://{authority}{path_and_query}")
        .into_client_request()
        .map_err(|e| unavailable(format!("the agent's replica address: {e}")))?;
    for name in [header::AUTHORIZATION, header::COOKIE, header::ORIGIN, header::HOST, header::USER_AGENT] {
        if let Some(value) = headers.get(&name) {
            request.headers_mut().insert(name, value.clone());
        }
    }
    request.headers_mut().insert(RELAYED, header::HeaderValue::from_static("1"));
    let config = WebSocketConfig::default()
        .max_message_size(Some(MAX_FRAME))
        .max_frame_size(Some(MAX_FRAME))
        .read_buffer_size(super::ws::READ_BUFFER_BYTES);
    let connect = tokio_tungstenite::connect_async_with_config(request, Some(config), true);
    let upstream = match tokio::time::timeout(OPEN_TIMEOUT, connect).await {
        Err(_) => return Err(unavailable("the agent's replica did not open the terminal in time".into())),
        Ok(Err(tungstenite::Error::Http(response))) => {
            let status = StatusCode::from_u16(response.status().as_u16()).unwrap_or(StatusCode::BAD_GATEWAY);
            let body = response.into_body().unwrap_or_default();
            return Ok((status, [(header::CONTENT_TYPE, "application/json")], body).into_response());
        }
        Ok(Err(error)) => return Err(unavailable(format!("the agent's replica: {error}"))),
        Ok(Ok((upstream, _))) => upstream,
    };
    Ok(upgrade
        .max_message_size(MAX_FRAME)
        .read_buffer_size(super::ws::READ_BUFFER_BYTES)
        .on_upgrade(move |client| pump(client, upstream, send_timeout)))
}

type Upstream = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// Relays until either side closes, fails, or does not take a frame within `send_timeout`.
async fn pump(client: WebSocket, upstream: Upstream, send_timeout: Duration) {
    let (mut client_tx, mut client_rx) = client.split();
    let (mut upstream_tx, mut upstream_rx) = upstream.split();
    let to_owner = async {
        while let Some(Ok(message)) = client_rx.next().await {
            let message = match message {
                ws::Message::Binary(bytes) => tungstenite::Message::Binary(bytes),
                ws::Message::Text(text) => tungstenite::Message::Text(text.as_str().into()),
                ws::Message::Close(_) => break,
                ws::Message::Ping(_) | ws::Message::Pong(_) => continue,
            };
            if !matches!(tokio::time::timeout(send_timeout, upstream_tx.send(message)).await, Ok(Ok(()))) {
                break;
            }
        }
        let _ = tokio::time::timeout(send_timeout, upstream_tx.close()).await;
    };
    let to_client = async {
        while let Some(Ok(message)) = upstream_rx.next().await {
            let message = match message {
                tungstenite::Message::Binary(bytes) => ws::Message::Binary(bytes),
                tungstenite::Message::Text(text) => ws::Message::Text(text.as_str().into()),
                tungstenite::Message::Close(frame) => {
                    let frame = frame.map(|f| ws::CloseFrame { code: f.code.into(), reason: f.reason.as_str().into() });
                    let _ = tokio::time::timeout(send_timeout, client_tx.send(ws::Message::Close(frame))).await;
                    return;
                }
                _ => continue,
            };
            if !matches!(tokio::time::timeout(send_timeout, client_tx.send(message)).await, Ok(Ok(()))) {
                return;
            }
        }
        let _ = tokio::time::timeout(send_timeout, client_tx.close()).await;
    };
    tokio::select! {
        () = to_owner => {}
        () = to_client => {}
    }
}
