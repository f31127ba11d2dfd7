//! `GET /api/v1/agents/{id}/terminal` (WebSocket): a PTY shell in the agent's sandbox, as the
//! sandbox user in its home. Binary messages carry input and output; a text message
//! `{"type":"resize","cols":N,"rows":N}` resizes. Wakes a sleeping agent.
//!
//! The terminal's process gets what the harness's gets besides the harness's own variables
//! (`supervisor::sandbox_env`): the agent's plain env, its secrets' and logins' placeholders, the
//! egress proxy's variables and its CA's — so `npm`, `pip`, `apt`, `git` in the terminal reach
//! what the agent reaches, and no further.
//!
//! `?login=<method id>` (agent admins) runs one of the harness's login methods instead of the
//! shell — "sign in inside this sandbox" (docs/logins.md): with that environment, so the
//! sign-in reaches the provider, and `NO_BROWSER=1`, so it prints its URL. The agent is then marked
//! as holding its own login.

use std::time::Duration;

use agenthold_sandboxd::protocol::Control;
use axum::extract::ws::{Message, WebSocket};
use axum::extract::{Query, State};
use axum::response::Response;
use futures_util::StreamExt;
use serde::Deserialize;

use super::agents::visible_agent;
use super::error::{ApiError, ErrorBody};
use super::extract::{Id, Upgrade};
use super::openapi::Access;
use super::ws;
use crate::auth::Principal;
use crate::error_code::ErrorCode;
use crate::ids::AgentId;
use crate::state::AppState;
use crate::store::users::Role;
use crate::supervisor::{Command, TerminalAccess};
use crate::tunnel::link::TerminalEvent;

/// The shell: bash when the image has it, else sh.
const SHELL: &str = "if [ -x /bin/bash ]; then exec /bin/bash -l; else exec /bin/sh -l; fi";

/// `?login=<method id>`.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct TerminalQuery {
    /// Run this login method of the agent's (`login_methods`; agent admins) instead of a shell.
    login: Option<String>,
}

/// What the terminal runs, and its extra environment.
struct Program {
    argv: Vec<String>,
    env: Vec<(String, String)>,
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum ClientMessage {
    Resize { cols: u16, rows: u16 },
}

/// The text message a terminal that cannot go on sends before it closes.
#[derive(serde::Serialize)]
struct TerminalError {
    /// Always `error`.
    #[serde(rename = "type")]
    kind: &'static str,
    /// Why.
    message: String,
}

/// Largest input message a client may send (bigger ones end the socket).
const MAX_INPUT_MESSAGE: usize = 64 << 10;

/// Opens a terminal in the sandbox (WebSocket: binary frames are the terminal's bytes; a text
/// frame `{"type": "resize", "cols", "rows"}` resizes it).
#[utoipa::path(
    get,
    path = "/api/v1/agents/{id}/terminal",
    operation_id = "terminal",
    tag = "agents",
    params(TerminalQuery),
    responses(
        (status = 101, description = "Switching to the WebSocket protocol"),
        (status = 400, description = "`INVALID_QUERY`, `UNKNOWN_LOGIN_METHOD`, `NOT_A_WEBSOCKET`", body = ErrorBody),
        (status = 503, description = "`CAPACITY`: the host runs as many sandboxes as it may; `REPLICA_UNAVAILABLE`: the replica that owns the agent cannot be reached", body = ErrorBody),
    ),
    extensions(("x-agenthold-access" = json!(Access::Operator))),
)]
pub async fn open(
    State(state): State<AppState>,
    principal: Principal,
    Id(id): Id<AgentId>,
    query: Result<Query<TerminalQuery>, axum::extract::rejection::QueryRejection>,
    headers: axum::http::HeaderMap,
    uri: axum::http::Uri,
    Upgrade(upgrade): Upgrade,
) -> Result<Response, ApiError> {
    // The role first: a caller without it learns nothing from the query's validation.
    let agent = visible_agent(&state, &principal, id, Role::Operator).await?;
    let workspace_id = agent.workspace_id;
    let Query(query) = query.map_err(|e| ApiError::bad_request(ErrorCode::InvalidQuery, e.body_text()))?;
    // The sandbox's tunnel is on the replica that owns the agent: the terminal opens there.
    if let crate::replicas::Route::There(owner) = state.dispatch.route(id).await {
        if headers.contains_key(super::terminal_relay::RELAYED) {
            return Err(ApiError::Unavailable {
                code: ErrorCode::ReplicaUnavailable,
                message: "the agent moved to another replica meanwhile; open the terminal again".to_owned(),
            });
        }
        let path_and_query = uri.path_and_query().map_or(uri.path(), |p| p.as_str());
        let send_timeout = state.config.ws_send_timeout();
        return super::terminal_relay::relay(upgrade, &owner, path_and_query, &headers, send_timeout).await;
    }
    if !state.supervisors.host().has_room_for(id) {
        return Err(super::agents::host_full());
    }
    let mut program = match &query.login {
        None => Program { argv: vec!["/bin/sh".to_owned(), "-c".to_owned(), SHELL.to_owned()], env: Vec::new() },
        Some(method) => login_program(&state, &principal, id, method).await?,
    };
    // The agent's plain env, then what its harness gets besides: its secrets' and logins'
    // placeholders, the egress proxy and its CA (so npm, pip, apt, git… in the terminal go where
    // the agent's go).
    let shared =
        crate::supervisor::sandbox_env::shared(&state.pool, state.supervisors.proxy(), state.driver.as_ref(), &agent)
            .await
            .map_err(|e| ApiError::Internal(anyhow::anyhow!("the terminal's environment: {e}")))?;
    let mut env: Vec<(String, String)> = agent.env.to_vec();
    env.extend(shared.env);
    env.append(&mut program.env);
    program.env = env;
    // Node in the terminal (a harness's own login, `npx …`) sees the sandbox's memory limit too.
    program.env.extend(crate::harness::node_options(&agent));
    // Opening a terminal wakes a sleeping agent.
    crate::store::agents::set_desired_state(&state.pool, id, "awake").await?;
    let access = state
        .dispatch
        .ask(id, |reply| Command::Terminal { reply })
        .await
        .ok_or_else(|| ApiError::Internal(anyhow::anyhow!("the agent's supervisor stopped")))?
        .map_err(super::agents::lifecycle_error)?;
    let pool = state.pool.clone();
    let send_timeout = state.config.ws_send_timeout();
    let stopping = state.stopping.clone();
    // An open terminal keeps the agent awake (auto-sleep).
    let host = std::sync::Arc::clone(state.supervisors.host());
    Ok(upgrade.max_message_size(MAX_INPUT_MESSAGE).read_buffer_size(super::ws::READ_BUFFER_BYTES).on_upgrade(
        move |socket| async move {
            host.terminal_opened(id, std::time::Instant::now());
            let caller = super::stream::SocketAccess { principal, workspace_id };
            pump(socket, access, program, caller, pool, send_timeout, stopping).await;
            host.terminal_closed(id, std::time::Instant::now());
        },
    ))
}

/// The login method's command (agent admins), with the proxy's environment; records that the
/// agent now holds its own login.
async fn login_program(
    state: &AppState,
    principal: &Principal,
    id: AgentId,
    method: &str,
) -> Result<Program, ApiError> {
    let agent = visible_agent(state, principal, id, Role::Admin).await?;
    let init = crate::store::sandboxes::get(&state.pool, id).await?.and_then(|row| row.harness_init);
    let home_dir = state.driver.home_dir(id);
    let methods = crate::harness::login_methods(&agent, init.as_ref(), &state.driver.tools_dir(), &home_dir);
    let Some(argv) = methods.iter().find(|m| m.id == method).and_then(|m| m.terminal.clone()) else {
        let runnable: Vec<&str> = methods.iter().filter(|m| m.terminal.is_some()).map(|m| m.id.as_str()).collect();
        let known =
            if init.is_none() { " (the harness has not started yet: prompt or wake the agent first)" } else { "" };
        return Err(ApiError::bad_request(
            ErrorCode::UnknownLoginMethod,
            format!("login methods this terminal can run: [{}]{known}", runnable.join(", ")),
        ));
    };
    // The proxy's environment comes with every terminal's (`open`).
    let env = vec![("NO_BROWSER".to_owned(), "1".to_owned())];
    crate::store::agents::mark_sandbox_login(&state.pool, id).await?;
    let record = crate::store::audit::AuditRecord {
        workspace_id: agent.workspace_id,
        actor_user_id: Some(principal.user_id),
        action: "agent.sandbox_login",
        resource_type: "agent",
        resource_id: id.to_string(),
        detail: serde_json::json!({"name": agent.name, "method": method}),
    };
    crate::store::audit::append(&state.pool, record).await?;
    Ok(Program { argv, env })
}

async fn pump(
    socket: WebSocket,
    access: TerminalAccess,
    program: Program,
    caller: super::stream::SocketAccess,
    pool: sqlx::PgPool,
    send_timeout: Duration,
    mut stopping: tokio::sync::watch::Receiver<bool>,
) {
    let TerminalAccess { link, channel, home_dir, user } = access;
    let output = link.watch_terminal(channel);
    link.send(&Control::OpenTerminal {
        channel,
        cols: 80,
        rows: 24,
        argv: program.argv,
        env: [("TERM".to_owned(), "xterm-256color".to_owned()), ("HOME".to_owned(), home_dir.clone())]
            .into_iter()
            .chain(program.env)
            .collect(),
        cwd: home_dir,
        user,
    });
    let (mut sink, mut incoming) = socket.split();
    let mut input_offset = 0u64;
    let mut check = tokio::time::interval(super::stream::CREDENTIAL_CHECK);
    loop {
        tokio::select! {
            () = ws::server_stopping(&mut stopping) => {
                ws::close(&mut sink, ws::CLOSE_RESTARTING, "the server is restarting; reconnect").await;
                break;
            }
            _ = check.tick() => {
                // A member removed or demoted below operator loses the terminal within 2 s.
                if super::stream::closed_for_access(&mut sink, &caller, &pool, Role::Operator, &mut stopping).await {
                    break;
                }
            }
            event = output.pop() => match event {
                Some(TerminalEvent::Output(bytes)) => match ws::send(&mut sink, Message::Binary(bytes), send_timeout).await {
                    Ok(()) => {}
                    Err(ws::SendError::Gone) => break,
                    Err(ws::SendError::TooSlow) => {
                        ws::close_too_slow(&mut sink, "terminal").await;
                        break;
                    }
                },
                Some(TerminalEvent::Closed(None)) => {
                    ws::close(&mut sink, 1000, "the terminal ended").await;
                    break;
                }
                Some(TerminalEvent::Closed(Some(reason))) => {
                    // The terminal could not start, or the sandbox went away.
                    let text = serde_json::to_string(&TerminalError { kind: "error", message: reason }).unwrap_or_default();
                    let _ = ws::send(&mut sink, Message::Text(text.into()), send_timeout).await;
                    ws::close(&mut sink, ws::CLOSE_SANDBOX_GONE, "the terminal could not go on in the sandbox").await;
                    break;
                }
                None if output.was_dropped() => {
                    ws::close(&mut sink, ws::CLOSE_OUTPUT_OVERFLOW, "the terminal's output got too far ahead of the client; the terminal was closed").await;
                    break;
                }
                None => {
                    ws::close(&mut sink, ws::CLOSE_SANDBOX_GONE, "the sandbox disconnected").await;
                    break;
                }
            },
            message = incoming.next() => match message {
                Some(Ok(Message::Binary(bytes))) => {
                    let len = bytes.len() as u64;
                    let sent = tokio::time::timeout(send_timeout, link.send_terminal_input(channel, input_offset, bytes)).await;
                    if sent != Ok(true) {
                        ws::close(&mut sink, ws::CLOSE_SANDBOX_GONE, "the sandbox is not taking input").await;
                        break;
                    }
                    input_offset += len;
                }
                Some(Ok(Message::Text(text))) => {
                    if let Ok(ClientMessage::Resize { cols, rows }) = serde_json::from_str(text.as_str()) {
                        link.send(&Control::Resize { channel, cols: cols.max(1), rows: rows.max(1) });
                    }
                }
                // Answered at once, so the client's close handshake completes (also mid-flood).
                Some(Ok(Message::Close(_))) => {
                    ws::answer_close(&mut sink).await;
                    break;
                }
                Some(Ok(_)) => {}
                None | Some(Err(_)) => break,
            },
        }
    }
    link.unwatch_terminal(channel);
    link.send(&Control::CloseTerminal { channel });
}
