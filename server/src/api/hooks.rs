//! `POST /api/v1/hooks/{id}`: a webhook delivery. No credentials but the signature: the body's
//! HMAC-SHA256 under the webhook's secret in `X-Hub-Signature-256`. The size limit
//! (`AGENTHOLD_WEBHOOK_MAX_BODY_BYTES`) holds before the body is read: a `Content-Length` over it
//! is refused at once, and reading stops at the limit. What a delivery does is
//! [`crate::triggers::delivery`]'s.

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use serde::Serialize;
use utoipa::ToSchema;
use uuid::Uuid;

use super::error::{ApiError, ErrorBody};
use super::extract::Id;
use super::openapi::Access;
use crate::ids::{SessionId, TurnId};
use crate::state::AppState;
use crate::store;
use crate::triggers::delivery::{self, DELIVERY_HEADERS, Outcome, Refusal, Request};
use crate::triggers::signature;

/// A delivery that started a turn.
#[derive(Debug, Serialize, ToSchema)]
pub struct Delivered {
    /// The delivery, as listed under the webhook's deliveries.
    delivery: Uuid,
    /// The session prompted.
    session_id: SessionId,
    /// The turn started.
    turn_id: TurnId,
}

/// Delivers a webhook: a signed JSON body becomes a prompt to the webhook's agent. Refusals
/// start nothing and are listed under the webhook's deliveries; a webhook that does not exist
/// answers 404 (and records nothing).
#[utoipa::path(
    post,
    path = "/api/v1/hooks/{id}",
    operation_id = "deliver_webhook",
    tag = "triggers",
    request_body(content = Object, description = "Any JSON, signed with the webhook's secret"),
    params(
        ("webhook-signature" = Option<String>, Header, description = "Standard Webhooks: `v1,<base64 HMAC-SHA256 of {webhook-id}.{webhook-timestamp}.{body}>` (space-separated, any may match), with `webhook-id` and `webhook-timestamp` (Unix seconds, within five minutes of the server's clock); checked instead of `X-Hub-Signature-256` when present"),
        ("X-Hub-Signature-256" = Option<String>, Header, description = "GitHub's scheme: `sha256=` and the lowercase hex HMAC-SHA256 of the body under the webhook's secret; a signature accepted once is refused after, under any delivery id"),
        ("X-GitHub-Delivery" = Option<String>, Header, description = "The delivery's id (or `X-Gitea-Delivery`, `X-Gogs-Delivery`, `Webhook-Id`, `X-Delivery-Id`): an id accepted once is refused after (for 30 days)"),
    ),
    responses(
        (status = 202, description = "A turn started", body = Delivered),
        (status = 400, description = "`DELIVERY_ID_MISSING`, `INVALID_BODY` (not JSON)", body = ErrorBody),
        (status = 401, description = "`SIGNATURE_MISSING`, `SIGNATURE_INVALID`, `SIGNATURE_EXPIRED` (a Standard Webhooks timestamp over five minutes from the server's clock)", body = ErrorBody),
        (status = 404, description = "`NOT_FOUND`: no such webhook", body = ErrorBody),
        (status = 409, description = "`REPLAYED`: the delivery id was accepted before; `WEBHOOK_PAUSED`: the webhook is paused (or its maker left the workspace); `TURN_IN_PROGRESS`: the \
            webhook's session has a turn in progress", body = ErrorBody),
        (status = 413, description = "`PAYLOAD_TOO_LARGE`: over `AGENTHOLD_WEBHOOK_MAX_BODY_BYTES`", body = ErrorBody),
        (status = 429, description = "`TOO_MANY_REFUSALS`: over 60 unsigned deliveries to this webhook were refused in the last minute (counted, not recorded)", body = ErrorBody),
        (status = 422, description = "`TEMPLATE_FIELD_MISSING` (the message names the field), `PROMPT_TOO_LONG`, \
            `NUL_CHARACTER`", body = ErrorBody),
        (status = 503, description = "`SECRET_UNAVAILABLE`: the webhook's secret does not open under this \
            server's master key", body = ErrorBody),
    ),
    extensions(("x-agenthold-access" = json!(Access::Public))),
)]
pub async fn deliver(
    State(state): State<AppState>,
    Id(id): Id<Uuid>,
    headers: HeaderMap,
    body: axum::body::Body,
) -> Result<(StatusCode, Json<Delivered>), ApiError> {
    let webhook = store::webhooks::get(&state.pool, id).await?.ok_or(ApiError::NotFound("webhook"))?;
    let text = |name: &str| headers.get(name).and_then(|value| value.to_str().ok());
    let delivery_id = DELIVERY_HEADERS.iter().find_map(|name| text(name));
    let limit = state.config.webhook_max_body_bytes;
    let declared = text(header::CONTENT_LENGTH.as_str()).and_then(|length| length.trim().parse::<u64>().ok());
    let outcome = if declared.is_some_and(|length| length > limit) {
        delivery::refuse(&state, &webhook, delivery_id, Refusal::too_large(limit)).await?
    } else {
        let max = usize::try_from(limit).unwrap_or(usize::MAX);
        match axum::body::to_bytes(body, max).await {
            Err(_) => delivery::refuse(&state, &webhook, delivery_id, Refusal::too_large(limit)).await?,
            Ok(bytes) => {
                let standard = text(signature::STANDARD_SIGNATURE).map(|signature| signature::Standard {
                    id: text(signature::STANDARD_ID),
                    timestamp: text(signature::STANDARD_TIMESTAMP),
                    signature,
                });
                let request = Request { signature: text(signature::HEADER), standard, delivery_id, body: &bytes };
                delivery::deliver(&state, &webhook, request).await?
            }
        }
    };
    match outcome {
        Outcome::Accepted(accepted) => Ok((
            StatusCode::ACCEPTED,
            Json(Delivered { delivery: accepted.id, session_id: accepted.session_id, turn_id: accepted.turn_id }),
        )),
        Outcome::Refused(refusal) => {
            Err(ApiError::Refused { status: refusal.status, code: refusal.code, message: refusal.message })
        }
    }
}
