//! `GET /api/v1/sessions/{id}/stream?after=<seq>` (WebSocket): every stored event after the
//! cursor, then live events, no gap and no duplicate; one JSON event per text message. A
//! cursor beyond the end of the log is taken as the end. A client that does not take a message
//! within the send timeout is closed with 4408 and resumes from its cursor (docs/api.md).

use std::time::Duration;

use axum::extract::State;
use axum::extract::ws::{Message, WebSocket};
use axum::response::Response;
use futures_util::StreamExt;
use serde::Deserialize;

use super::error::{ApiError, ErrorBody};
use super::extract::{Id, Query, Upgrade};
use super::openapi::Access;
use super::sessions::{cursor, session_in_workspace};
use super::ws;
use crate::auth::{Principal, Standing};
use crate::events::stream::Follower;
use crate::ids::{Seq, SessionId};
use crate::state::AppState;
use crate::store::users::Role;

/// `?after=`.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct StreamQuery {
    /// The cursor: events after this seq (default 0; one beyond the end means "from now on").
    #[param(value_type = Option<i64>)]
    after: Option<Seq>,
}

/// Upgrades to the session's stream (WebSocket: one event per text message, as in `events`).
#[utoipa::path(
    get,
    path = "/api/v1/sessions/{id}/stream",
    operation_id = "stream",
    tag = "sessions",
    params(StreamQuery),
    responses(
        (status = 101, description = "Switching to the WebSocket protocol"),
        (status = 400, description = "`INVALID_QUERY`, `INVALID_CURSOR`, `NOT_A_WEBSOCKET`", body = ErrorBody),
    ),
    extensions(("x-agenthold-access" = json!(Access::Viewer))),
)]
pub async fn stream(
    State(state): State<AppState>,
    principal: Principal,
    Id(id): Id<SessionId>,
    Query(query): Query<StreamQuery>,
    Upgrade(upgrade): Upgrade,
) -> Result<Response, ApiError> {
    let (session, workspace_id) = session_in_workspace(&state, &principal, id, Role::Viewer).await?;
    // A cursor beyond the end of the log (a stale client, a reset database) means "from now
    // on": nothing stored is sent, and live events follow.
    let after = cursor(query.after)?.min(session.last_seq);
    // Someone is looking: the agent is in use (auto-sleep counts from here).
    state.supervisors.host().touch(session.agent_id, std::time::Instant::now());
    let follower = Follower::new(state.log_reads.clone(), &state.hub, id, after);
    // Counted while the socket is open (the guard moves into the socket's task).
    let watching = WatcherGauge::open();
    let pool = state.pool.clone();
    let send_timeout = state.config.ws_send_timeout();
    let stopping = state.stopping.clone();
    // Clients send nothing but control frames: a small limit keeps them from buffering more.
    Ok(upgrade.max_message_size(64 << 10).read_buffer_size(ws::READ_BUFFER_BYTES).on_upgrade(
        move |socket| async move {
            let _watching = watching;
            let access = SocketAccess { principal, workspace_id };
            follow(socket, follower, access, pool, send_timeout, stopping).await;
        },
    ))
}

/// One open stream in `agenthold_stream_watchers`, for as long as it lives.
struct WatcherGauge;

impl WatcherGauge {
    fn open() -> Self {
        crate::metrics::watchers(1.0);
        Self
    }
}

impl Drop for WatcherGauge {
    fn drop(&mut self) {
        crate::metrics::watchers(-1.0);
    }
}

/// How often an open stream (and inbox, and terminal) checks that its token or session was not
/// revoked and that its user still has the role it needs: with the shared answers' freshness
/// ([`crate::auth::recheck::FRESH`]) a revocation or removal closes it within 2 s.
pub const CREDENTIAL_CHECK: Duration = Duration::from_secs(1);

/// Who watches a stream, and where their role is re-checked.
pub struct SocketAccess {
    /// The caller.
    pub principal: Principal,
    /// The workspace of the session's agent.
    pub workspace_id: uuid::Uuid,
}

/// Closes `sink` when the caller's credential or role no longer holds (`needed` in the
/// workspace) — or, should the server start stopping while it checks, with 1012; whether it did.
pub async fn closed_for_access(
    sink: &mut ws::Sink,
    access: &SocketAccess,
    pool: &sqlx::PgPool,
    needed: Role,
    stopping: &mut tokio::sync::watch::Receiver<bool>,
) -> bool {
    let standing = tokio::select! {
        standing = access.principal.still_holds(pool, access.workspace_id, needed) => standing,
        () = ws::server_stopping(stopping) => {
            ws::close(sink, ws::CLOSE_RESTARTING, "the server is restarting; reconnect with your cursor").await;
            return true;
        }
    };
    match standing {
        Standing::Holds => false,
        Standing::Revoked => {
            ws::close(sink, ws::CLOSE_REVOKED, "the credential was revoked").await;
            true
        }
        Standing::AccessEnded => {
            ws::close(sink, ws::CLOSE_ACCESS_ENDED, "your access to this workspace ended").await;
            true
        }
    }
}
/// How long a send that found the client gone waits to learn whether it had sent a Close.
const CLOSE_GRACE: Duration = Duration::from_secs(1);
/// While the log cannot be read (a database outage), the stream waits this long between tries…
const READ_RETRY: Duration = Duration::from_secs(1);
/// …and gives up (closing with 1011, the client resumes from its cursor) after this long.
const READ_RETRY_FOR: Duration = Duration::from_secs(120);

async fn follow(
    socket: WebSocket,
    mut follower: Follower,
    access: SocketAccess,
    pool: sqlx::PgPool,
    send_timeout: Duration,
    mut stopping: tokio::sync::watch::Receiver<bool>,
) {
    let (mut sink, incoming) = socket.split();
    let mut client = ws::ClientWatch::spawn(incoming);
    let mut check = tokio::time::interval(CREDENTIAL_CHECK);
    // Since when the log could not be read, while it cannot.
    let mut failing_since: Option<std::time::Instant> = None;
    loop {
        tokio::select! {
            () = ws::server_stopping(&mut stopping) => {
                crate::metrics::stream_closed("shutdown");
                ws::close(&mut sink, ws::CLOSE_RESTARTING, "the server is restarting; reconnect with your cursor").await;
                return;
            }
            _ = check.tick() => {
                if closed_for_access(&mut sink, &access, &pool, Role::Viewer, &mut stopping).await {
                    crate::metrics::stream_closed("revoked");
                    return;
                }
            }
            batch = follower.next_batch() => {
                let batch = match batch {
                    Ok(Some(batch)) => batch,
                    Ok(None) => {
                        crate::metrics::stream_closed("deleted");
                        ws::close(&mut sink, ws::CLOSE_DELETED, "the session was deleted").await;
                        return;
                    }
                    Err(error) => {
                        let since = *failing_since.get_or_insert_with(std::time::Instant::now);
                        if crate::store::availability::is_unavailable(&error) && since.elapsed() < READ_RETRY_FOR {
                            // The cursor did not move: the same read is tried again.
                            tokio::time::sleep(READ_RETRY).await;
                            continue;
                        }
                        tracing::error!(%error, "reading events for a stream");
                        crate::metrics::stream_closed("error");
                        ws::close(&mut sink, ws::CLOSE_INTERNAL, "the server could not read the log; reconnect with your cursor").await;
                        return;
                    }
                };
                failing_since = None;
                // The client's frames are read while a batch goes out: a Close mid-flood is
                // answered at once, not after the batch (or the send timeout).
                let send = async {
                    for event in batch {
                        ws::feed(&mut sink, Message::Text(event.json.as_ref().into()), send_timeout).await?;
                    }
                    ws::flush(&mut sink, send_timeout).await
                };
                let sent = tokio::select! {
                    sent = send => Some(sent),
                    end = client.ended() => match end {
                        ws::ClientEnd::Dropped => return,
                        ws::ClientEnd::Closed => None,
                    },
                };
                let Some(sent) = sent else {
                    crate::metrics::stream_closed("client");
                    ws::answer_close(&mut sink).await;
                    return;
                };
                match sent {
                    Ok(()) => {}
                    Err(ws::SendError::Gone) => {
                        // A Close the client's reader took just before this send met it (the
                        // protocol refuses to send after one) is still answered.
                        if let Ok(ws::ClientEnd::Closed) = tokio::time::timeout(CLOSE_GRACE, client.ended()).await {
                            crate::metrics::stream_closed("client");
                            ws::answer_close(&mut sink).await;
                        }
                        return;
                    }
                    Err(ws::SendError::TooSlow) => {
                        crate::metrics::stream_closed("too_slow");
                        ws::close_too_slow(&mut sink, "stream").await;
                        return;
                    }
                }
            }
            end = client.ended() => {
                // A Close is answered, so the client's close handshake completes.
                if end == ws::ClientEnd::Closed {
                    crate::metrics::stream_closed("client");
                    ws::answer_close(&mut sink).await;
                }
                return;
            }
        }
    }
}
