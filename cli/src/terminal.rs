//! `exec`: runs a command line through an agent's terminal WebSocket
//! (`/api/v1/agents/{id}/terminal`). The line is typed into a real PTY shell followed by
//! `; exit`, so the output is what a terminal shows: the echo of the input, prompts, `\r\n`
//! line endings. It ends when the server closes the terminal (the shell exited).

use std::io::Write;
use std::time::Duration;

use anyhow::anyhow;
use futures_util::StreamExt;
use serde::Deserialize;
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::{self, Message};

use crate::api::Client;
use crate::endpoint::segment;
use crate::error::Failure;
use crate::watch::{close, send};

/// A text message from the terminal endpoint (`{"type":"error","message":…}`).
#[derive(Debug, Deserialize)]
struct ServerText {
    #[serde(rename = "type")]
    kind: String,
    message: Option<String>,
}

/// Terminal size to ask for; wide, so the shell does not wrap the echoed command line.
#[derive(Debug, Clone, Copy)]
pub struct Size {
    /// Columns.
    pub cols: u16,
    /// Rows.
    pub rows: u16,
}

/// Types `command; exit` into the agent's terminal and copies its output to `out` until the
/// server closes the terminal, or `timeout` passes (then [`Failure::Timeout`]).
pub async fn exec(
    client: &Client,
    agent: &str,
    command: &str,
    size: Size,
    timeout: Duration,
    out: &mut dyn Write,
) -> Result<(), Failure> {
    let deadline = Instant::now() + timeout;
    let path = format!("/api/v1/agents/{}/terminal", segment(agent));
    let within = |what: &str| Failure::Timeout(format!("{what} within {timeout:?}"));
    let mut socket =
        tokio::time::timeout_at(deadline, client.websocket(&path)).await.map_err(|_| within("no terminal"))??;
    let resize = serde_json::json!({"type": "resize", "cols": size.cols, "rows": size.rows}).to_string();
    send(&mut socket, Message::text(resize)).await?;
    send(&mut socket, Message::binary(format!("{command}; exit\n").into_bytes())).await?;
    let mut server_error = None;
    loop {
        let message = match tokio::time::timeout_at(deadline, socket.next()).await {
            Ok(message) => message,
            Err(_) => {
                close(&mut socket).await;
                return Err(within("the terminal did not close"));
            }
        };
        match message {
            Some(Ok(Message::Binary(bytes))) => {
                out.write_all(&bytes)
                    .and_then(|()| out.flush())
                    .map_err(|e| anyhow::Error::new(e).context("writing to stdout"))?;
            }
            Some(Ok(Message::Text(text))) => {
                if let Ok(ServerText { kind, message }) = serde_json::from_str(text.as_str())
                    && kind == "error"
                {
                    server_error = Some(message.unwrap_or_default());
                }
            }
            Some(Ok(Message::Close(_)))
            | None
            | Some(Err(tungstenite::Error::ConnectionClosed | tungstenite::Error::AlreadyClosed)) => {
                break;
            }
            Some(Ok(_)) => {}
            Some(Err(error)) => {
                return Err(anyhow::Error::new(error).context("reading the terminal").into());
            }
        }
    }
    match server_error {
        Some(message) => Err(anyhow!("the terminal closed with an error: {message}").into()),
        None => Ok(()),
    }
}
