//! The `audit_log` table: who did what to which resource, per workspace, append-only.

use chrono::{DateTime, Utc};
use sqlx::PgPool;
use uuid::Uuid;

/// One record to append.
#[derive(Debug, Clone)]
pub struct AuditRecord<'a> {
    /// The workspace it belongs to.
    pub workspace_id: Uuid,
    /// Who did it.
    pub actor_user_id: Option<Uuid>,
    /// What (`agent.created`, `member.added`, `token.revoked`, …).
    pub action: &'a str,
    /// The kind of resource (`agent`, `member`, `token`, …).
    pub resource_type: &'a str,
    /// Its id.
    pub resource_id: String,
    /// Anything else worth keeping (never a secret).
    pub detail: serde_json::Value,
}

/// Appends a record (on the pool, or in a transaction with what it records).
pub async fn append<'e>(executor: impl sqlx::PgExecutor<'e>, record: AuditRecord<'_>) -> sqlx::Result<()> {
    sqlx::query!(
        r#"INSERT INTO audit_log (workspace_id, actor_user_id, action, resource_type, resource_id, detail)
           VALUES ($1, $2, $3, $4, $5, $6)"#,
        record.workspace_id,
        record.actor_user_id,
        record.action,
        record.resource_type,
        record.resource_id,
        record.detail
    )
    .execute(executor)
    .await?;
    Ok(())
}

/// A stored record.
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct AuditView {
    /// Its position (newest has the highest).
    pub id: i64,
    /// Who did it.
    #[schema(required = true)]
    pub actor_user_id: Option<Uuid>,
    /// What.
    pub action: String,
    /// The kind of resource.
    pub resource_type: String,
    /// Its id.
    pub resource_id: String,
    /// Details.
    pub detail: serde_json::Value,
    /// When.
    pub created_at: DateTime<Utc>,
}

/// The newest records before `before` (all when `None`), newest first.
pub async fn page(pool: &PgPool, workspace_id: Uuid, before: Option<i64>, limit: i64) -> sqlx::Result<Vec<AuditView>> {
    sqlx::query_as!(
        AuditView,
        r#"SELECT id, actor_user_id, action, resource_type, resource_id, detail, created_at FROM audit_log
           WHERE workspace_id = $1 AND id < COALESCE($2, 9223372036854775807) ORDER BY id DESC LIMIT $3"#,
        workspace_id,
        before,
        limit
    )
    .fetch_all(pool)
    .await
}
