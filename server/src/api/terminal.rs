//! `GET /api/v1/agents/{id}/terminal` (WebSocket): a PTY shell in the agent's sandbox, as the
//! sandbox user in its home. Binary messages carry input and output; a text message
//! `{"type":"resize","cols":N,"rows":N}` resizes. Wakes a sleeping agent.

use agenthold_sandboxd::protocol::{Control, DataKind};
use axum::extract::State;
use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::response::Response;
use futures_util::{SinkExt, StreamExt};
use serde::Deserialize;
use tokio::sync::mpsc;

use super::agents::visible_agent;
use super::error::ApiError;
use super::extract::Id;
use crate::app::AppState;
use crate::auth::Principal;
use crate::ids::AgentId;
use crate::store::users::Role;
use crate::supervisor::{Command, LifecycleError, TerminalAccess};
use crate::tunnel::link::TerminalEvent;

/// The shell: bash when the image has it, else sh.
const SHELL: &str = "if [ -x /bin/bash ]; then exec /bin/bash -l; else exec /bin/sh -l; fi";

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum ClientMessage {
    Resize { cols: u16, rows: u16 },
}

/// Opens a terminal.
pub async fn open(
    State(state): State<AppState>,
    principal: Principal,
    Id(id): Id<AgentId>,
    upgrade: WebSocketUpgrade,
) -> Result<Response, ApiError> {
    visible_agent(&state, &principal, id, Role::Operator).await?;
    // Opening a terminal wakes a sleeping agent.
    crate::store::agents::set_desired_state(&state.pool, id, "awake").await?;
    let access = state
        .supervisors
        .ask(id, |reply| Command::Terminal { reply })
        .await
        .ok_or_else(|| ApiError::Internal(anyhow::anyhow!("the agent's supervisor stopped")))?
        .map_err(|error| match error {
            LifecycleError::Busy => ApiError::conflict("TURN_IN_PROGRESS", "busy"),
            LifecycleError::Failed(message) => ApiError::Unavailable { code: "SANDBOX_FAILED", message },
        })?;
    let pool = state.pool.clone();
    Ok(upgrade.on_upgrade(move |socket| pump(socket, access, principal, pool)))
}

async fn pump(socket: WebSocket, access: TerminalAccess, principal: Principal, pool: sqlx::PgPool) {
    let TerminalAccess { link, channel, home_dir, user } = access;
    let (events_tx, mut events) = mpsc::channel(256);
    link.watch_terminal(channel, events_tx);
    link.send(&Control::OpenTerminal {
        channel,
        cols: 80,
        rows: 24,
        argv: vec!["/bin/sh".to_owned(), "-c".to_owned(), SHELL.to_owned()],
        env: vec![("TERM".to_owned(), "xterm-256color".to_owned()), ("HOME".to_owned(), home_dir.clone())],
        cwd: home_dir,
        user,
    });
    let (mut sink, mut incoming) = socket.split();
    let mut input_offset = 0u64;
    let mut check = tokio::time::interval(super::stream::CREDENTIAL_CHECK);
    loop {
        tokio::select! {
            _ = check.tick() => {
                if !principal.still_valid(&pool).await {
                    let _ = sink.send(Message::Close(None)).await;
                    break;
                }
            }
            event = events.recv() => match event {
                Some(TerminalEvent::Output(bytes)) => {
                    if sink.send(Message::Binary(bytes)).await.is_err() {
                        break;
                    }
                }
                Some(TerminalEvent::Closed(reason)) => {
                    if let Some(reason) = reason {
                        let _ = sink.send(Message::Text(format!("{{\"type\":\"error\",\"message\":{}}}", serde_json::json!(reason)).into())).await;
                    }
                    let _ = sink.send(Message::Close(None)).await;
                    break;
                }
                None => break,
            },
            message = incoming.next() => match message {
                Some(Ok(Message::Binary(bytes))) => {
                    let len = bytes.len() as u64;
                    link.send_data(DataKind::TerminalInput, channel, input_offset, bytes);
                    input_offset += len;
                }
                Some(Ok(Message::Text(text))) => {
                    if let Ok(ClientMessage::Resize { cols, rows }) = serde_json::from_str(text.as_str()) {
                        link.send(&Control::Resize { channel, cols: cols.max(1), rows: rows.max(1) });
                    }
                }
                Some(Ok(_)) => {}
                None | Some(Err(_)) => break,
            },
        }
    }
    link.send(&Control::CloseTerminal { channel });
    link.unwatch_terminal(channel);
}
