//! One webhook delivery, from the signed request to the turn: size (checked by the caller
//! before the body is read), signature (Standard Webhooks, or GitHub's), delivery id, JSON body,
//! template, replay guard, turn. Every delivery of a known webhook is recorded with its outcome —
//! accepted (its session and turn) or refused (a code and why) — and nothing starts unless it is
//! accepted. A refusal's reason never quotes the body. Refusals for want of a valid signature
//! (anyone's to send) are recorded at most [`MAX_REFUSALS_PER_MINUTE`] a minute per webhook (past
//! that they are answered `429` and only counted); no refusal pushes an accepted delivery out of
//! the history; an accepted one is
//! remembered for [`REPLAY_WINDOW`] by its delivery id and its GitHub signature, apart from the
//! history, so neither can be accepted twice.

use axum::http::StatusCode;
use chrono::Utc;
use uuid::Uuid;

use super::signature::{self, SignatureError};
use super::template::{RenderError, Template};
use crate::error_code::ErrorCode;
use crate::ids::{SessionId, TurnId};
use crate::prompting::{self, Origin};
use crate::secrets::cipher::{self, RowIdentity};
use crate::state::AppState;
use crate::store;
use crate::store::sessions::TurnError;
use crate::store::webhooks::{DeliveryRow, WebhookRow};

/// The headers a delivery id is read from, first found wins (GitHub's, Gitea's, Gogs', the
/// Standard Webhooks' `webhook-id`, and a plain one).
pub const DELIVERY_HEADERS: [&str; 5] =
    ["x-github-delivery", "x-gitea-delivery", "x-gogs-delivery", "webhook-id", "x-delivery-id"];
/// Longest delivery id accepted.
const MAX_DELIVERY_ID: usize = 200;
/// How long an accepted delivery's id and signature are remembered (a replay within it is
/// refused; GitHub keeps redelivery of a failed delivery within three days).
pub const REPLAY_WINDOW: std::time::Duration = std::time::Duration::from_secs(30 * 24 * 3600);
/// Deliveries refused for their signature recorded per webhook per minute; past it they are
/// answered `429 TOO_MANY_REFUSALS` and counted (`agenthold_webhook_refusals_dropped_total`), not
/// recorded.
pub const MAX_REFUSALS_PER_MINUTE: i64 = 60;

/// A delivery that started a turn.
#[derive(Debug)]
pub struct Accepted {
    /// The delivery as listed.
    pub id: Uuid,
    /// The session prompted.
    pub session_id: SessionId,
    /// The turn started.
    pub turn_id: TurnId,
}

/// A delivery refused: its status, code and why.
#[derive(Debug)]
pub struct Refusal {
    /// The HTTP status.
    pub status: StatusCode,
    /// A stable code.
    pub code: crate::error_code::ErrorCode,
    /// Why, for a person (never the body).
    pub message: String,
}

impl Refusal {
    fn new(status: StatusCode, code: crate::error_code::ErrorCode, message: impl Into<String>) -> Self {
        Self { status, code, message: message.into() }
    }

    /// Too large: refused before its body was read.
    pub fn too_large(limit: u64) -> Self {
        Self::new(StatusCode::PAYLOAD_TOO_LARGE, ErrorCode::PayloadTooLarge, format!("the body is over {limit} bytes"))
    }
}

/// What a delivery did.
#[derive(Debug)]
pub enum Outcome {
    /// A turn started.
    Accepted(Accepted),
    /// Refused (and recorded as such).
    Refused(Refusal),
}

/// The request's parts a delivery needs.
#[derive(Debug)]
pub struct Request<'a> {
    /// `X-Hub-Signature-256`.
    pub signature: Option<&'a str>,
    /// The Standard Webhooks headers, when it carries `webhook-signature` (checked instead).
    pub standard: Option<signature::Standard<'a>>,
    /// The delivery id header's value.
    pub delivery_id: Option<&'a str>,
    /// The raw body, exactly as signed.
    pub body: &'a [u8],
}

/// Records a refusal of a delivery to `webhook` and returns it.
pub async fn refuse(
    state: &AppState,
    webhook: &WebhookRow,
    delivery_id: Option<&str>,
    refusal: Refusal,
) -> sqlx::Result<Outcome> {
    let unsigned = refusal.code.as_str().starts_with("SIGNATURE");
    if unsigned && store::webhooks::unsigned_last_minute(&state.pool, webhook.id).await? >= MAX_REFUSALS_PER_MINUTE {
        metrics::counter!("agenthold_webhook_refusals_dropped_total").increment(1);
        return Ok(Outcome::Refused(Refusal::new(
            StatusCode::TOO_MANY_REQUESTS,
            ErrorCode::TooManyRefusals,
            format!(
                "over {MAX_REFUSALS_PER_MINUTE} unsigned deliveries to this webhook were refused in the last minute"
            ),
        )));
    }
    let row = DeliveryRow {
        id: Uuid::new_v4(),
        delivery_id: delivery_id.map(|id| id.chars().take(MAX_DELIVERY_ID).collect()),
        received_at: Utc::now(),
        status: i32::from(refusal.status.as_u16()),
        outcome: "refused".to_owned(),
        code: Some(refusal.code.as_str().to_owned()),
        reason: Some(refusal.message.clone()),
        session_id: None,
        turn_id: None,
    };
    store::webhooks::refuse(&state.pool, webhook.id, &row).await?;
    metrics::counter!("agenthold_webhook_deliveries_total", "outcome" => "refused", "code" => refusal.code.as_str())
        .increment(1);
    tracing::info!(webhook.id = %webhook.id, code = refusal.code.as_str(), "a webhook delivery was refused");
    Ok(Outcome::Refused(refusal))
}

/// Checks and runs a delivery to `webhook`; records its outcome.
pub async fn deliver(state: &AppState, webhook: &WebhookRow, request: Request<'_>) -> anyhow::Result<Outcome> {
    let delivery_id = request.standard.and_then(|s| s.id).or(request.delivery_id);
    // It acts on behalf of its maker: once they left the workspace (or lost the operator role)
    // it is paused until an admin resumes it.
    if !webhook.paused && !webhook.maker_stands {
        store::webhooks::set_paused(&state.pool, webhook.id, true, Some("creator_left"), None).await?;
        tracing::info!(webhook.id = %webhook.id, "a webhook's maker left its workspace (or lost the operator role): paused");
    }
    if webhook.paused || !webhook.maker_stands {
        let refusal = Refusal::new(
            StatusCode::CONFLICT,
            ErrorCode::WebhookPaused,
            "the webhook is paused (an operator resumes it; one whose maker left, an admin)",
        );
        return Ok(refuse(state, webhook, delivery_id, refusal).await?);
    }
    match check(state, webhook, &request, Utc::now().timestamp()) {
        Err(refusal) => Ok(refuse(state, webhook, delivery_id, refusal).await?),
        Ok((delivery_id, prompt)) => {
            let github = if request.standard.is_some() { None } else { request.signature };
            let keys = signature::replay_keys(delivery_id, github);
            start(state, webhook, delivery_id, &keys, &prompt).await
        }
    }
}

/// Everything that needs no database: the signature, the delivery id, the body, the template,
/// at `now` (Unix seconds). The delivery id and the prompt.
fn check<'a>(
    state: &AppState,
    webhook: &WebhookRow,
    request: &Request<'a>,
    now: i64,
) -> Result<(&'a str, String), Refusal> {
    let row = RowIdentity::webhook_secret(webhook.agent_id, webhook.id);
    let secret = cipher::open(&state.master_key, row, &webhook.secret).map_err(|error| {
        tracing::warn!(webhook.id = %webhook.id, error = %error, "a webhook's secret does not open");
        Refusal::new(
            StatusCode::SERVICE_UNAVAILABLE,
            ErrorCode::SecretUnavailable,
            "the webhook's secret cannot be opened on this server (master key)",
        )
    })?;
    let refused = |error: SignatureError| {
        let code = match error {
            SignatureError::Missing => ErrorCode::SignatureMissing,
            SignatureError::Stale => ErrorCode::SignatureExpired,
            SignatureError::Malformed | SignatureError::Wrong | SignatureError::Incomplete => {
                ErrorCode::SignatureInvalid
            }
        };
        Refusal::new(StatusCode::UNAUTHORIZED, code, error.to_string())
    };
    let key = secret.expose().as_bytes();
    let delivery_id = match request.standard {
        Some(standard) => Some(signature::verify_standard(key, standard, request.body, now).map_err(refused)?),
        None => {
            signature::verify(key, request.body, request.signature).map_err(refused)?;
            request.delivery_id
        }
    };
    let delivery_id = delivery_id.filter(|id| !id.trim().is_empty()).ok_or_else(|| {
        Refusal::new(
            StatusCode::BAD_REQUEST,
            ErrorCode::DeliveryIdMissing,
            format!("no delivery id (one of the headers {})", DELIVERY_HEADERS.join(", ")),
        )
    })?;
    if delivery_id.len() > MAX_DELIVERY_ID {
        return Err(Refusal::new(
            StatusCode::BAD_REQUEST,
            ErrorCode::DeliveryIdMissing,
            format!("the delivery id is over {MAX_DELIVERY_ID} bytes"),
        ));
    }
    let body: serde_json::Value = serde_json::from_slice(request.body)
        .map_err(|_| Refusal::new(StatusCode::BAD_REQUEST, ErrorCode::InvalidBody, "the body is not JSON"))?;
    let template = Template::parse(&webhook.template)
        .map_err(|message| Refusal::new(StatusCode::UNPROCESSABLE_ENTITY, ErrorCode::InvalidTemplate, message))?;
    let prompt = template.render(&body).map_err(|error| match error {
        RenderError::Missing(field) => Refusal::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            ErrorCode::TemplateFieldMissing,
            format!("the template needs the field {field:?}, which the body lacks"),
        ),
        RenderError::TooLong => {
            Refusal::new(StatusCode::UNPROCESSABLE_ENTITY, ErrorCode::PromptTooLong, error.to_string())
        }
    })?;
    if prompt.contains('\0') {
        return Err(Refusal::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            ErrorCode::NulCharacter,
            "the prompt would contain the NUL character",
        ));
    }
    Ok((delivery_id, prompt))
}

/// The replay guard and the turn, in one transaction.
async fn start(
    state: &AppState,
    webhook: &WebhookRow,
    delivery_id: &str,
    replay_keys: &[Vec<u8>],
    prompt: &str,
) -> anyhow::Result<Outcome> {
    let id = Uuid::new_v4();
    let mut tx = state.pool.begin().await?;
    let session_id = match webhook.session_id {
        Some(session_id) => session_id,
        None => {
            let session_id = SessionId::new();
            let max = state.config.max_sessions_per_agent;
            match store::sessions::create_in(&mut tx, session_id, webhook.agent_id, max).await {
                Ok(()) => {}
                Err(store::quotas::QuotaError::Exceeded(message)) => {
                    drop(tx);
                    let refusal = Refusal::new(StatusCode::CONFLICT, ErrorCode::QuotaExceeded, message);
                    return Ok(refuse(state, webhook, Some(delivery_id), refusal).await?);
                }
                Err(store::quotas::QuotaError::Db(error)) => return Err(error.into()),
            }
            session_id
        }
    };
    let turn_id = TurnId::new();
    let row = DeliveryRow {
        id,
        delivery_id: Some(delivery_id.to_owned()),
        received_at: Utc::now(),
        status: 202,
        outcome: "accepted".to_owned(),
        code: None,
        reason: None,
        session_id: Some(session_id),
        turn_id: Some(turn_id),
    };
    // The replay guard first: a delivery accepted before (its id, or its GitHub signature under
    // another id) is refused as such, whatever else.
    let fresh = store::webhooks::remember(&mut tx, webhook.id, replay_keys, REPLAY_WINDOW).await?;
    if !fresh || !store::webhooks::accept(&mut tx, webhook.id, &row).await? {
        drop(tx);
        let refusal = Refusal::new(
            StatusCode::CONFLICT,
            ErrorCode::Replayed,
            format!("delivery {delivery_id:?} (or its signed body) was accepted before"),
        );
        return Ok(refuse(state, webhook, Some(delivery_id), refusal).await?);
    }
    let origin = Origin::webhook(webhook.id, id);
    let blocks = prompting::text_blocks(prompt);
    let max_bytes = state.config.max_event_bytes_per_agent;
    let recorded =
        match prompting::record(&mut tx, turn_id, session_id, webhook.agent_id, &blocks, &origin, max_bytes).await {
            Ok(recorded) => recorded,
            Err(TurnError::Quota(message)) => {
                drop(tx);
                let refusal = Refusal::new(StatusCode::CONFLICT, ErrorCode::QuotaExceeded, message);
                return Ok(refuse(state, webhook, Some(delivery_id), refusal).await?);
            }
            Err(TurnError::InProgress) => {
                drop(tx);
                let refusal = Refusal::new(
                    StatusCode::CONFLICT,
                    ErrorCode::TurnInProgress,
                    "the webhook's session has a turn in progress",
                );
                return Ok(refuse(state, webhook, Some(delivery_id), refusal).await?);
            }
            Err(TurnError::Db(error)) => return Err(error.into()),
        };
    tracing::info!(webhook.id = %webhook.id, turn.id = %recorded.turn_id, "a webhook delivery started a turn");
    let turn_id = recorded.turn_id;
    prompting::hand_over(state, tx, recorded).await?;
    store::webhooks::prune(&state.pool, webhook.id).await?;
    metrics::counter!("agenthold_webhook_deliveries_total", "outcome" => "accepted", "code" => "").increment(1);
    Ok(Outcome::Accepted(Accepted { id, session_id, turn_id }))
}
