//! The `webhooks` and `webhook_deliveries` tables. A webhook's secret is stored sealed under
//! the master key (like secret values) and only ever opened to check a signature. An accepted
//! delivery id is accepted once (a partial unique index: the replay guard); the newest
//! deliveries of each webhook are kept, whatever their outcome.

use chrono::{DateTime, Utc};
use sqlx::PgPool;
use uuid::Uuid;

use super::sealed::Sealed;
use crate::ids::{AgentId, SessionId, TurnId};

/// A webhook as stored.
#[derive(Debug, Clone)]
pub struct WebhookRow {
    /// Its id (in its URL).
    pub id: Uuid,
    /// Its agent.
    pub agent_id: AgentId,
    /// Its agent's workspace.
    pub workspace_id: Uuid,
    /// Its name (unique per agent).
    pub name: String,
    /// The template that makes the prompt.
    pub template: String,
    /// The session each delivery appends to (`None`: a new session per delivery).
    pub session_id: Option<SessionId>,
    /// Its secret, sealed.
    pub secret: Sealed,
    /// Who set it up (and stands behind its deliveries).
    pub created_by: Option<Uuid>,
    /// When.
    pub created_at: DateTime<Utc>,
    /// Paused: deliveries are refused (`WEBHOOK_PAUSED`).
    pub paused: bool,
    /// Why, when not by a person: `creator_left`.
    pub paused_reason: Option<String>,
    /// Whether its maker is still an operator (or admin) of its agent's workspace.
    pub maker_stands: bool,
}

/// A new webhook.
#[derive(Debug)]
pub struct NewWebhook<'a> {
    /// Its id.
    pub id: Uuid,
    /// Its agent.
    pub agent_id: AgentId,
    /// Its name.
    pub name: &'a str,
    /// The template (checked).
    pub template: &'a str,
    /// A session of the agent's, or `None`.
    pub session_id: Option<SessionId>,
    /// The secret, sealed.
    pub secret: &'a Sealed,
    /// Who sets it up.
    pub created_by: Uuid,
}

/// Inserts a webhook, unless the agent's workspace holds `max` already; `false` when the name
/// is taken on the agent.
pub async fn insert(pool: &PgPool, w: &NewWebhook<'_>, max: i64) -> Result<bool, super::quotas::QuotaError> {
    let mut tx = pool.begin().await?;
    super::quotas::webhooks_of_workspace(&mut tx, w.agent_id, max).await?;
    let inserted = sqlx::query!(
        r#"INSERT INTO webhooks (id, agent_id, name, template, session_id, secret_key_id, secret_nonce, secret_sealed, created_by)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
           ON CONFLICT (agent_id, name) DO NOTHING"#,
        w.id,
        w.agent_id.0,
        w.name,
        w.template,
        w.session_id.map(|id| id.0),
        w.secret.key_id,
        w.secret.nonce,
        w.secret.ciphertext,
        w.created_by
    )
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(inserted.rows_affected() == 1)
}

macro_rules! row {
    ($r:expr) => {
        WebhookRow {
            id: $r.id,
            agent_id: AgentId($r.agent_id),
            workspace_id: $r.workspace_id,
            name: $r.name,
            template: $r.template,
            session_id: $r.session_id.map(SessionId),
            secret: Sealed { key_id: $r.secret_key_id, nonce: $r.secret_nonce, ciphertext: $r.secret_sealed },
            created_by: $r.created_by,
            created_at: $r.created_at,
            paused: $r.paused,
            paused_reason: $r.paused_reason,
            maker_stands: $r.maker_stands,
        }
    };
}

/// One webhook (of an agent not being deleted).
pub async fn get(pool: &PgPool, id: Uuid) -> sqlx::Result<Option<WebhookRow>> {
    let row = sqlx::query!(
        r#"SELECT w.id, w.agent_id, a.workspace_id AS "workspace_id!", w.name, w.template, w.session_id, w.secret_key_id,
                  w.secret_nonce, w.secret_sealed, w.created_by, w.created_at, w.paused, w.paused_reason,
                  EXISTS (SELECT 1 FROM memberships m WHERE m.workspace_id = a.workspace_id AND m.user_id = w.created_by
                            AND m.role IN ('operator', 'admin')) AS "maker_stands!"
           FROM webhooks w JOIN agents a ON a.id = w.agent_id
           WHERE w.id = $1 AND a.deleting_at IS NULL"#,
        id
    )
    .fetch_optional(pool)
    .await?;
    Ok(row.map(|r| row!(r)))
}

/// An agent's webhooks, by name.
pub async fn list(pool: &PgPool, agent_id: AgentId) -> sqlx::Result<Vec<WebhookRow>> {
    let rows = sqlx::query!(
        r#"SELECT w.id, w.agent_id, a.workspace_id AS "workspace_id!", w.name, w.template, w.session_id, w.secret_key_id,
                  w.secret_nonce, w.secret_sealed, w.created_by, w.created_at, w.paused, w.paused_reason,
                  EXISTS (SELECT 1 FROM memberships m WHERE m.workspace_id = a.workspace_id AND m.user_id = w.created_by
                            AND m.role IN ('operator', 'admin')) AS "maker_stands!"
           FROM webhooks w JOIN agents a ON a.id = w.agent_id
           WHERE w.agent_id = $1 ORDER BY w.name"#,
        agent_id.0
    )
    .fetch_all(pool)
    .await?;
    Ok(rows.into_iter().map(|r| row!(r)).collect())
}

/// Pauses (`reason`: why, when not a person) or resumes a webhook; a resume by `resumed_by`
/// makes them the one who stands behind it. `false` when it is gone.
pub async fn set_paused(
    pool: &PgPool,
    id: Uuid,
    paused: bool,
    reason: Option<&str>,
    resumed_by: Option<Uuid>,
) -> sqlx::Result<bool> {
    let updated = sqlx::query!(
        r#"UPDATE webhooks SET paused = $2, paused_reason = $3, created_by = COALESCE($4, created_by) WHERE id = $1"#,
        id,
        paused,
        reason,
        resumed_by
    )
    .execute(pool)
    .await?;
    Ok(updated.rows_affected() == 1)
}

/// Deletes a webhook (and its deliveries); `false` when it was gone.
pub async fn delete(pool: &PgPool, id: Uuid) -> sqlx::Result<bool> {
    let deleted = sqlx::query!(r#"DELETE FROM webhooks WHERE id = $1"#, id).execute(pool).await?;
    Ok(deleted.rows_affected() == 1)
}

/// A delivery as recorded.
#[derive(Debug, Clone)]
pub struct DeliveryRow {
    /// Its id.
    pub id: Uuid,
    /// The sender's delivery id.
    pub delivery_id: Option<String>,
    /// When it arrived.
    pub received_at: DateTime<Utc>,
    /// The HTTP status it was answered with.
    pub status: i32,
    /// `accepted` or `refused`.
    pub outcome: String,
    /// Why it was refused (an error code).
    pub code: Option<String>,
    /// Why, for a person.
    pub reason: Option<String>,
    /// The session it prompted.
    pub session_id: Option<SessionId>,
    /// The turn it started.
    pub turn_id: Option<TurnId>,
}

/// Records an accepted delivery inside `tx`: `false` when its delivery id was accepted before
/// (a replay; nothing is written).
pub async fn accept(tx: &mut sqlx::PgConnection, webhook_id: Uuid, d: &DeliveryRow) -> sqlx::Result<bool> {
    let inserted = sqlx::query!(
        r#"INSERT INTO webhook_deliveries (id, webhook_id, delivery_id, received_at, status, outcome, session_id, turn_id)
           VALUES ($1, $2, $3, $4, $5, 'accepted', $6, $7)
           ON CONFLICT (webhook_id, delivery_id) WHERE outcome = 'accepted' DO NOTHING"#,
        d.id,
        webhook_id,
        d.delivery_id,
        d.received_at,
        d.status,
        d.session_id.map(|id| id.0),
        d.turn_id.map(|id| id.0)
    )
    .execute(&mut *tx)
    .await?;
    Ok(inserted.rows_affected() == 1)
}

/// Records a refused delivery.
pub async fn refuse(pool: &PgPool, webhook_id: Uuid, d: &DeliveryRow) -> sqlx::Result<()> {
    sqlx::query!(
        r#"INSERT INTO webhook_deliveries (id, webhook_id, delivery_id, received_at, status, outcome, code, reason)
           VALUES ($1, $2, $3, $4, $5, 'refused', $6, $7)"#,
        d.id,
        webhook_id,
        d.delivery_id,
        d.received_at,
        d.status,
        d.code,
        d.reason
    )
    .execute(pool)
    .await?;
    prune(pool, webhook_id).await
}

/// Deliveries kept per webhook, of each outcome: refused ones never push accepted ones out.
pub const KEPT_DELIVERIES: i64 = 200;

/// Keeps the newest deliveries of each outcome only.
pub async fn prune(pool: &PgPool, webhook_id: Uuid) -> sqlx::Result<()> {
    sqlx::query!(
        r#"DELETE FROM webhook_deliveries WHERE id IN
             (SELECT id FROM (SELECT id, row_number() OVER (PARTITION BY outcome ORDER BY received_at DESC, id) AS n
                              FROM webhook_deliveries WHERE webhook_id = $1) ranked
              WHERE n > $2)"#,
        webhook_id,
        KEPT_DELIVERIES
    )
    .execute(pool)
    .await?;
    Ok(())
}

/// Remembers an accepted delivery by `keys` (`crate::triggers::signature::replay_keys`), first
/// forgetting what is older than `window`; `false` when any key was seen within it (a replay:
/// roll the transaction back).
pub async fn remember(
    tx: &mut sqlx::PgConnection,
    webhook_id: Uuid,
    keys: &[Vec<u8>],
    window: std::time::Duration,
) -> sqlx::Result<bool> {
    let window_secs = f64::from(u32::try_from(window.as_secs()).unwrap_or(u32::MAX));
    sqlx::query!(
        r#"DELETE FROM webhook_seen WHERE webhook_id = $1 AND seen_at < now() - make_interval(secs => $2)"#,
        webhook_id,
        window_secs
    )
    .execute(&mut *tx)
    .await?;
    let inserted = sqlx::query!(
        r#"INSERT INTO webhook_seen (webhook_id, key) SELECT $1, k FROM unnest($2::bytea[]) AS k
           ON CONFLICT DO NOTHING"#,
        webhook_id,
        keys
    )
    .execute(&mut *tx)
    .await?;
    Ok(inserted.rows_affected() == keys.len() as u64)
}

/// How many deliveries to the webhook were refused for their signature in the last minute.
pub async fn unsigned_last_minute(pool: &PgPool, webhook_id: Uuid) -> sqlx::Result<i64> {
    let count = sqlx::query_scalar!(
        r#"SELECT count(*) AS "count!" FROM webhook_deliveries
           WHERE webhook_id = $1 AND outcome = 'refused' AND code LIKE 'SIGNATURE%'
             AND received_at > now() - interval '1 minute'"#,
        webhook_id
    )
    .fetch_one(pool)
    .await?;
    Ok(count)
}

/// A webhook's newest deliveries, newest first.
pub async fn deliveries(pool: &PgPool, webhook_id: Uuid, limit: i64) -> sqlx::Result<Vec<DeliveryRow>> {
    let rows = sqlx::query!(
        r#"SELECT id, delivery_id, received_at, status, outcome, code, reason, session_id, turn_id
           FROM webhook_deliveries WHERE webhook_id = $1 ORDER BY received_at DESC, id LIMIT $2"#,
        webhook_id,
        limit
    )
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| DeliveryRow {
            id: r.id,
            delivery_id: r.delivery_id,
            received_at: r.received_at,
            status: r.status,
            outcome: r.outcome,
            code: r.code,
            reason: r.reason,
            session_id: r.session_id.map(SessionId),
            turn_id: r.turn_id.map(TurnId),
        })
        .collect())
}

/// Every webhook's sealed secret with its agent, locked for update until the transaction ends
/// (master key rotation).
pub async fn lock_all_sealed(tx: &mut sqlx::PgConnection) -> sqlx::Result<Vec<(Uuid, AgentId, Sealed)>> {
    let rows = sqlx::query!(
        r#"SELECT id, agent_id, secret_key_id, secret_nonce, secret_sealed FROM webhooks ORDER BY id FOR UPDATE"#
    )
    .fetch_all(&mut *tx)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| {
            let sealed = Sealed { key_id: r.secret_key_id, nonce: r.secret_nonce, ciphertext: r.secret_sealed };
            (r.id, AgentId(r.agent_id), sealed)
        })
        .collect())
}

/// Replaces a webhook's sealed secret (same secret, another key).
pub async fn reseal(tx: &mut sqlx::PgConnection, id: Uuid, sealed: &Sealed) -> sqlx::Result<()> {
    sqlx::query!(
        r#"UPDATE webhooks SET secret_key_id = $2, secret_nonce = $3, secret_sealed = $4 WHERE id = $1"#,
        id,
        sealed.key_id,
        sealed.nonce,
        sealed.ciphertext
    )
    .execute(&mut *tx)
    .await?;
    Ok(())
}
