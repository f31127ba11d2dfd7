//! `/api/v1/agents/{id}/webhooks` and `/api/v1/webhooks/{id}…`: an agent's webhooks — an
//! incoming URL (`/api/v1/hooks/{id}`, [`super::hooks`]), a secret shown once at creation, a
//! template that makes the prompt from the delivery's JSON body, a new session per delivery or a
//! named one — and each delivery's outcome. The agent's operators set them up (audited with who
//! did it); its viewers see them and their deliveries.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::json;
use utoipa::ToSchema;
use uuid::Uuid;

use super::agents::visible_agent;
use super::error::{ApiError, ErrorBody};
use super::extract::{Id, RawBody, parse_json};
use super::openapi::Access;
use crate::auth::Principal;
use crate::error_code::ErrorCode;
use crate::ids::{AgentId, AgentName, SessionId, TurnId};
use crate::secrets::cipher;
use crate::state::AppState;
use crate::store;
use crate::store::agents::AgentRow;
use crate::store::audit::AuditRecord;
use crate::store::users::Role;
use crate::store::webhooks::{DeliveryRow, NewWebhook, WebhookRow};
use crate::triggers::template::Template;

/// Deliveries one `GET …/deliveries` shows.
const DELIVERIES_SHOWN: i64 = 100;

/// `POST /api/v1/agents/{id}/webhooks`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateWebhook {
    /// 1-64 characters of a-z, 0-9, `-`, `_`, `.`; unique among the agent's webhooks.
    name: String,
    /// The prompt, with `{{ path }}` placeholders the delivery's JSON body fills in
    /// (`{{ pull_request.title }}`, `{{ commits.0.id }}`, `{{ . }}` for the whole body).
    template: String,
    /// A session of the agent's every delivery appends to; absent: a new session per delivery.
    session_id: Option<SessionId>,
}

/// A webhook (never its secret).
#[derive(Debug, Serialize, ToSchema)]
pub struct Webhook {
    /// Its id.
    id: Uuid,
    /// Its agent.
    agent_id: AgentId,
    /// Its name.
    name: String,
    /// Where deliveries go: `POST` this path (on the server's API address).
    path: String,
    /// The full URL, when `AGENTHOLD_PUBLIC_URL` is set.
    #[schema(required = true)]
    url: Option<String>,
    /// The template.
    template: String,
    /// The session each delivery appends to (`null`: a new session per delivery).
    #[schema(required = true)]
    session_id: Option<SessionId>,
    /// Who set it up (and stands behind its deliveries).
    #[schema(required = true)]
    created_by: Option<Uuid>,
    /// When.
    created_at: DateTime<Utc>,
    /// Paused: deliveries are refused (`409 WEBHOOK_PAUSED`).
    paused: bool,
    /// Why, when not by a person: `creator_left` (its maker left the workspace or lost the
    /// operator role; an admin resumes it).
    #[schema(required = true)]
    paused_reason: Option<String>,
}

impl Webhook {
    fn of(row: &WebhookRow, state: &AppState) -> Self {
        let path = format!("/api/v1/hooks/{}", row.id);
        Self {
            id: row.id,
            agent_id: row.agent_id,
            name: row.name.clone(),
            url: state.config.public_url.as_ref().map(|base| format!("{}{path}", base.trim_end_matches('/'))),
            path,
            template: row.template.clone(),
            session_id: row.session_id,
            created_by: row.created_by,
            created_at: row.created_at,
            paused: row.paused || !row.maker_stands,
            paused_reason: row.paused_reason.clone().or_else(|| (!row.maker_stands).then(|| "creator_left".to_owned())),
        }
    }
}

/// A webhook just made, with its secret: shown this once, never again.
#[derive(Debug, Serialize, ToSchema)]
pub struct CreatedWebhook {
    /// The webhook.
    webhook: Webhook,
    /// The signing secret: senders sign each body with HMAC-SHA256 under it
    /// (`X-Hub-Signature-256: sha256=<hex>`). Not shown again.
    secret: String,
    /// The same key as Standard Webhooks libraries take it (`whsec_` and the key's bytes in
    /// base64): they sign `webhook-id`, `webhook-timestamp` and the body. Not shown again.
    standard_secret: String,
}

/// An agent's webhooks.
#[derive(Debug, Serialize, ToSchema)]
pub struct WebhookList {
    /// By name.
    webhooks: Vec<Webhook>,
}

/// One delivery and what became of it.
#[derive(Debug, Serialize, ToSchema)]
pub struct Delivery {
    /// Its id (the `delivery_id` of its prompt's origin).
    id: Uuid,
    /// The sender's delivery id.
    #[schema(required = true)]
    delivery_id: Option<String>,
    /// When it arrived.
    received_at: DateTime<Utc>,
    /// The HTTP status it was answered with.
    status: i32,
    /// `accepted` (a turn started) or `refused`.
    outcome: String,
    /// Why it was refused: `SIGNATURE_MISSING`, `SIGNATURE_INVALID`, `REPLAYED`,
    /// `PAYLOAD_TOO_LARGE`, `TEMPLATE_FIELD_MISSING`, `INVALID_BODY`, `DELIVERY_ID_MISSING`,
    /// `TURN_IN_PROGRESS`, …
    #[schema(required = true)]
    code: Option<String>,
    /// Why, for a person.
    #[schema(required = true)]
    reason: Option<String>,
    /// The session it prompted.
    #[schema(required = true)]
    session_id: Option<SessionId>,
    /// The turn it started.
    #[schema(required = true)]
    turn_id: Option<TurnId>,
}

impl From<DeliveryRow> for Delivery {
    fn from(d: DeliveryRow) -> Self {
        Self {
            id: d.id,
            delivery_id: d.delivery_id,
            received_at: d.received_at,
            status: d.status,
            outcome: d.outcome,
            code: d.code,
            reason: d.reason,
            session_id: d.session_id,
            turn_id: d.turn_id,
        }
    }
}

/// A webhook's recent deliveries.
#[derive(Debug, Serialize, ToSchema)]
pub struct DeliveryList {
    /// Newest first (at most 100).
    deliveries: Vec<Delivery>,
}

/// A webhook the caller has at least `needed` on (through its agent), with its agent.
async fn visible_webhook(
    state: &AppState,
    principal: &Principal,
    id: Uuid,
    needed: Role,
) -> Result<(WebhookRow, AgentRow), ApiError> {
    let webhook = store::webhooks::get(&state.pool, id).await?.ok_or(ApiError::NotFound("webhook"))?;
    match visible_agent(state, principal, webhook.agent_id, needed).await {
        Ok(agent) => Ok((webhook, agent)),
        Err(ApiError::NotFound(_)) => Err(ApiError::NotFound("webhook")),
        Err(other) => Err(other),
    }
}

async fn audit(
    state: &AppState,
    principal: &Principal,
    agent: &AgentRow,
    webhook: &WebhookRow,
    action: &'static str,
) -> Result<(), ApiError> {
    let record = AuditRecord {
        workspace_id: agent.workspace_id,
        actor_user_id: Some(principal.user_id),
        action,
        resource_type: "webhook",
        resource_id: webhook.id.to_string(),
        detail: json!({"name": webhook.name, "agent_id": agent.id, "session_id": webhook.session_id}),
    };
    store::audit::append(&state.pool, record).await?;
    Ok(())
}

/// Creates a webhook and answers its secret, once (the agent's operators; the role is checked
/// before the body is read). Audited as `webhook.created`.
#[utoipa::path(
    post,
    path = "/api/v1/agents/{id}/webhooks",
    operation_id = "create_webhook",
    tag = "triggers",
    request_body = CreateWebhook,
    responses(
        (status = 201, description = "The webhook and its secret (shown this once)", body = CreatedWebhook),
        (status = 400, description = "`INVALID_BODY`, `NUL_CHARACTER`, `INVALID_NAME`, `INVALID_TEMPLATE`, \
            `INVALID_SESSION`", body = ErrorBody),
        (status = 409, description = "`NAME_TAKEN`", body = ErrorBody),
    ),
    extensions(("x-agenthold-access" = json!(Access::Operator))),
)]
pub async fn create(
    State(state): State<AppState>,
    principal: Principal,
    Id(agent_id): Id<AgentId>,
    RawBody(body): RawBody,
) -> Result<(StatusCode, Json<CreatedWebhook>), ApiError> {
    let agent = visible_agent(&state, &principal, agent_id, Role::Operator).await?;
    let body: CreateWebhook = parse_json(&body)?;
    let name = AgentName::parse(&body.name).map_err(|m| ApiError::bad_request(ErrorCode::InvalidName, m))?;
    Template::parse(&body.template).map_err(|m| ApiError::bad_request(ErrorCode::InvalidTemplate, m))?;
    super::schedules::check_session(&state, &agent, body.session_id).await?;
    let id = Uuid::new_v4();
    let secret = crate::secret::Secret::new(hex::encode(rand::random::<[u8; 32]>()));
    let sealed = cipher::seal(
        &state.master_key,
        crate::secrets::cipher::RowIdentity::webhook_secret(agent_id, id),
        secret.expose().as_bytes(),
    )
    .map_err(|e| ApiError::Internal(anyhow::anyhow!(e)))?;
    let new = NewWebhook {
        id,
        agent_id,
        name: name.as_str(),
        template: &body.template,
        session_id: body.session_id,
        secret: &sealed,
        created_by: principal.user_id,
    };
    if !store::webhooks::insert(&state.pool, &new, state.config.max_webhooks_per_workspace).await? {
        return Err(ApiError::conflict(ErrorCode::NameTaken, format!("the agent has a webhook named {:?}", new.name)));
    }
    let row = store::webhooks::get(&state.pool, id).await?.ok_or(ApiError::NotFound("webhook"))?;
    audit(&state, &principal, &agent, &row, "webhook.created").await?;
    let standard_secret = {
        use base64::Engine;
        format!("whsec_{}", base64::engine::general_purpose::STANDARD.encode(secret.expose().as_bytes()))
    };
    let created =
        CreatedWebhook { webhook: Webhook::of(&row, &state), secret: secret.expose().to_owned(), standard_secret };
    Ok((StatusCode::CREATED, Json(created)))
}

/// Lists an agent's webhooks (never their secrets).
#[utoipa::path(
    get,
    path = "/api/v1/agents/{id}/webhooks",
    operation_id = "list_webhooks",
    tag = "triggers",
    responses((status = 200, description = "The webhooks", body = WebhookList)),
    extensions(("x-agenthold-access" = json!(Access::Viewer))),
)]
pub async fn list(
    State(state): State<AppState>,
    principal: Principal,
    Id(agent_id): Id<AgentId>,
) -> Result<Json<WebhookList>, ApiError> {
    visible_agent(&state, &principal, agent_id, Role::Viewer).await?;
    let rows = store::webhooks::list(&state.pool, agent_id).await?;
    Ok(Json(WebhookList { webhooks: rows.iter().map(|row| Webhook::of(row, &state)).collect() }))
}

/// Shows a webhook (never its secret).
#[utoipa::path(
    get,
    path = "/api/v1/webhooks/{id}",
    operation_id = "show_webhook",
    tag = "triggers",
    responses((status = 200, description = "The webhook", body = Webhook)),
    extensions(("x-agenthold-access" = json!(Access::Viewer))),
)]
pub async fn show(
    State(state): State<AppState>,
    principal: Principal,
    Id(id): Id<Uuid>,
) -> Result<Json<Webhook>, ApiError> {
    let (webhook, _) = visible_webhook(&state, &principal, id, Role::Viewer).await?;
    Ok(Json(Webhook::of(&webhook, &state)))
}

/// A webhook's recent deliveries and what became of each, newest first.
#[utoipa::path(
    get,
    path = "/api/v1/webhooks/{id}/deliveries",
    operation_id = "list_webhook_deliveries",
    tag = "triggers",
    responses((status = 200, description = "Its deliveries", body = DeliveryList)),
    extensions(("x-agenthold-access" = json!(Access::Viewer))),
)]
pub async fn deliveries(
    State(state): State<AppState>,
    principal: Principal,
    Id(id): Id<Uuid>,
) -> Result<Json<DeliveryList>, ApiError> {
    visible_webhook(&state, &principal, id, Role::Viewer).await?;
    let rows = store::webhooks::deliveries(&state.pool, id, DELIVERIES_SHOWN).await?;
    Ok(Json(DeliveryList { deliveries: rows.into_iter().map(Delivery::from).collect() }))
}

/// Deletes a webhook and its deliveries (the agent's operators): its URL answers 404 from then
/// on. Audited as `webhook.deleted`.
#[utoipa::path(
    delete,
    path = "/api/v1/webhooks/{id}",
    operation_id = "delete_webhook",
    tag = "triggers",
    responses((status = 204, description = "Deleted")),
    extensions(("x-agenthold-access" = json!(Access::Operator))),
)]
pub async fn delete(
    State(state): State<AppState>,
    principal: Principal,
    Id(id): Id<Uuid>,
) -> Result<StatusCode, ApiError> {
    let (webhook, agent) = visible_webhook(&state, &principal, id, Role::Operator).await?;
    if !store::webhooks::delete(&state.pool, id).await? {
        return Err(ApiError::NotFound("webhook"));
    }
    audit(&state, &principal, &agent, &webhook, "webhook.deleted").await?;
    Ok(StatusCode::NO_CONTENT)
}

/// `PATCH /api/v1/webhooks/{id}`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateWebhook {
    /// `true` pauses it (deliveries refused), `false` resumes it.
    paused: bool,
}

/// Pauses or resumes a webhook (the agent's operators; the role is checked before the body is
/// read). A webhook paused because its maker left the workspace is resumed by an admin, who then
/// stands behind it. Audited as `webhook.paused` / `webhook.resumed`.
#[utoipa::path(
    patch,
    path = "/api/v1/webhooks/{id}",
    operation_id = "update_webhook",
    tag = "triggers",
    request_body = UpdateWebhook,
    responses(
        (status = 200, description = "The webhook as changed", body = Webhook),
        (status = 400, description = "`INVALID_BODY`", body = ErrorBody),
    ),
    extensions(("x-agenthold-access" = json!(Access::Operator))),
)]
pub async fn update(
    State(state): State<AppState>,
    principal: Principal,
    Id(id): Id<Uuid>,
    RawBody(body): RawBody,
) -> Result<Json<Webhook>, ApiError> {
    let (webhook, agent) = visible_webhook(&state, &principal, id, Role::Operator).await?;
    let body: UpdateWebhook = parse_json(&body)?;
    let was_paused = webhook.paused || !webhook.maker_stands;
    let maker_left = webhook.paused_reason.as_deref() == Some("creator_left") || !webhook.maker_stands;
    let resumed_by = if !body.paused && maker_left {
        principal.require(&state, agent.workspace_id, Role::Admin, "webhook").await?;
        Some(principal.user_id)
    } else {
        None
    };
    let reason = if body.paused && was_paused { webhook.paused_reason.as_deref() } else { None };
    if !store::webhooks::set_paused(&state.pool, id, body.paused, reason, resumed_by).await? {
        return Err(ApiError::NotFound("webhook"));
    }
    if body.paused != was_paused {
        let action = if body.paused { "webhook.paused" } else { "webhook.resumed" };
        audit(&state, &principal, &agent, &webhook, action).await?;
    }
    let row = store::webhooks::get(&state.pool, id).await?.ok_or(ApiError::NotFound("webhook"))?;
    Ok(Json(Webhook::of(&row, &state)))
}
