//! `GET /api/v1/sessions/{id}/stream?after=<seq>` (WebSocket): every stored event after the
//! cursor, then live events, no gap and no duplicate; one JSON event per text message. A
//! cursor beyond the end of the log is taken as the end.

use axum::extract::State;
use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::response::Response;
use futures_util::{SinkExt, StreamExt};
use serde::Deserialize;

use super::error::ApiError;
use super::extract::{Id, Query};
use super::sessions::{cursor, visible_session};
use crate::app::AppState;
use crate::auth::Principal;
use crate::events::stream::Follower;
use crate::ids::{Seq, SessionId};
use crate::store::users::Role;

/// `?after=`.
#[derive(Debug, Deserialize)]
pub struct StreamQuery {
    after: Option<Seq>,
}

/// Upgrades to the session's stream.
pub async fn stream(
    State(state): State<AppState>,
    principal: Principal,
    Id(id): Id<SessionId>,
    Query(query): Query<StreamQuery>,
    upgrade: WebSocketUpgrade,
) -> Result<Response, ApiError> {
    let session = visible_session(&state, &principal, id, Role::Viewer).await?;
    // A cursor beyond the end of the log (a stale client, a reset database) means "from now
    // on": nothing stored is sent, and live events follow.
    let after = cursor(query.after)?.min(session.last_seq);
    let follower = Follower::new(state.pool.clone(), &state.hub, id, after);
    let pool = state.pool.clone();
    Ok(upgrade.on_upgrade(move |socket| follow(socket, follower, principal, pool)))
}

/// How often an open stream checks that its token or session was not revoked.
pub const CREDENTIAL_CHECK: std::time::Duration = std::time::Duration::from_secs(2);

async fn follow(socket: WebSocket, mut follower: Follower, principal: Principal, pool: sqlx::PgPool) {
    let (mut sink, mut incoming) = socket.split();
    let mut check = tokio::time::interval(CREDENTIAL_CHECK);
    loop {
        tokio::select! {
            _ = check.tick() => {
                if !principal.still_valid(&pool).await {
                    let reason = axum::extract::ws::CloseFrame { code: 4401, reason: "the credential was revoked".into() };
                    let _ = sink.send(Message::Close(Some(reason))).await;
                    return;
                }
            }
            batch = follower.next_batch() => {
                let batch = match batch {
                    Ok(Some(batch)) => batch,
                    Ok(None) => {
                        let reason = axum::extract::ws::CloseFrame { code: 4404, reason: "the session was deleted".into() };
                        let _ = sink.send(Message::Close(Some(reason))).await;
                        return;
                    }
                    Err(error) => {
                        tracing::error!(%error, "reading events for a stream");
                        let _ = sink.send(Message::Close(None)).await;
                        return;
                    }
                };
                for event in batch {
                    if sink.feed(Message::Text(event.json.as_ref().into())).await.is_err() {
                        return;
                    }
                }
                if sink.flush().await.is_err() {
                    return;
                }
            }
            message = incoming.next() => match message {
                None | Some(Err(_)) | Some(Ok(Message::Close(_))) => return,
                Some(Ok(_)) => {}
            },
        }
    }
}
