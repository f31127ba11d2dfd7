//! The `replicas` and `agent_leases` tables: which server replicas are alive (a heartbeat
//! renews each one's expiry) and which replica owns each agent. A lease holds while its
//! replica's row has not expired (docs/replicas.md).

use sqlx::PgPool;
use uuid::Uuid;

use crate::ids::AgentId;

/// A live replica as the others reach it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaRow {
    /// Its id.
    pub id: Uuid,
    /// What sandboxes dial to reach it.
    pub tunnel_url: String,
    /// Where other replicas reach its API.
    pub internal_url: String,
}

/// Registers or renews this replica for `ttl_secs` from the database's clock.
pub async fn heartbeat(pool: &PgPool, me: &ReplicaRow, ttl_secs: f64) -> sqlx::Result<()> {
    sqlx::query!(
        r#"INSERT INTO replicas (id, tunnel_url, internal_url, expires_at)
           VALUES ($1, $2, $3, now() + make_interval(secs => $4))
           ON CONFLICT (id) DO UPDATE SET tunnel_url = EXCLUDED.tunnel_url,
                  internal_url = EXCLUDED.internal_url, expires_at = EXCLUDED.expires_at"#,
        me.id,
        me.tunnel_url,
        me.internal_url,
        ttl_secs
    )
    .execute(pool)
    .await?;
    Ok(())
}

/// The replicas alive now (their row has not expired).
pub async fn alive(pool: &PgPool) -> sqlx::Result<Vec<Uuid>> {
    sqlx::query_scalar!(r#"SELECT id FROM replicas WHERE expires_at > now()"#).fetch_all(pool).await
}

/// Ends this replica: its leases go at once (a graceful stop), so others take its agents over
/// without waiting for the expiry.
pub async fn retire(pool: &PgPool, id: Uuid) -> sqlx::Result<()> {
    let mut tx = pool.begin().await?;
    sqlx::query!(r#"DELETE FROM agent_leases WHERE replica_id = $1"#, id).execute(&mut *tx).await?;
    sqlx::query!(r#"DELETE FROM replicas WHERE id = $1"#, id).execute(&mut *tx).await?;
    tx.commit().await
}

/// Who owns an agent after [`acquire`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lease {
    /// This replica does (it took the lease, or held it).
    Mine,
    /// Another live replica does.
    Theirs(ReplicaRow),
    /// The agent does not exist.
    NoAgent,
    /// Owners came and went while asking (the caller acts as if it were [`Self::Mine`], as a
    /// single server would; the next heartbeat settles it).
    Unsettled,
}

/// Takes the agent's lease for `me` unless another live replica holds it. Two replicas asking at
/// once: the row lock of the upsert orders them, and the second sees the first's lease.
pub async fn acquire(pool: &PgPool, agent_id: AgentId, me: Uuid) -> sqlx::Result<Lease> {
    // Twice at most: an owner that expires between the two statements is taken the second time.
    for _ in 0..2 {
        let taken = sqlx::query_scalar!(
            r#"INSERT INTO agent_leases (agent_id, replica_id)
               SELECT $1, $2 WHERE EXISTS (SELECT 1 FROM agents WHERE id = $1)
               ON CONFLICT (agent_id) DO UPDATE SET replica_id = EXCLUDED.replica_id, acquired_at = now()
               WHERE agent_leases.replica_id = EXCLUDED.replica_id
                  OR NOT EXISTS (SELECT 1 FROM replicas r
                                 WHERE r.id = agent_leases.replica_id AND r.expires_at > now())
               RETURNING replica_id"#,
            agent_id.0,
            me
        )
        .fetch_optional(pool)
        .await?;
        if taken.is_some() {
            return Ok(Lease::Mine);
        }
        match live_holder(pool, agent_id).await? {
            Some(owner) if owner.id == me => return Ok(Lease::Mine),
            Some(owner) => return Ok(Lease::Theirs(owner)),
            None => {
                let exists = sqlx::query_scalar!(
                    r#"SELECT EXISTS (SELECT 1 FROM agents WHERE id = $1) AS "exists!""#,
                    agent_id.0
                )
                .fetch_one(pool)
                .await?;
                if !exists {
                    return Ok(Lease::NoAgent);
                }
            }
        }
    }
    Ok(Lease::Unsettled)
}

/// The live replica holding the agent's lease, if one does (read only: nothing is taken).
pub async fn live_holder(pool: &PgPool, agent_id: AgentId) -> sqlx::Result<Option<ReplicaRow>> {
    sqlx::query_as!(
        ReplicaRow,
        r#"SELECT r.id, r.tunnel_url, r.internal_url FROM agent_leases l
               JOIN replicas r ON r.id = l.replica_id
               WHERE l.agent_id = $1 AND r.expires_at > now()"#,
        agent_id.0
    )
    .fetch_optional(pool)
    .await
}

/// The agents whose lease `me` holds.
pub async fn held_by(pool: &PgPool, me: Uuid) -> sqlx::Result<Vec<AgentId>> {
    let ids =
        sqlx::query_scalar!(r#"SELECT agent_id FROM agent_leases WHERE replica_id = $1"#, me).fetch_all(pool).await?;
    Ok(ids.into_iter().map(AgentId).collect())
}

/// Agents with unfinished turns that `me` owns or no live replica does: their lease is `me`'s,
/// or names a replica that is gone or expired, or there is none and the turn is older than
/// `grace_secs` (a turn just recorded by another replica is about to get its lease from it).
pub async fn unserved_turn_agents(pool: &PgPool, me: Uuid, grace_secs: f64) -> sqlx::Result<Vec<AgentId>> {
    let ids = sqlx::query_scalar!(
        r#"SELECT DISTINCT t.agent_id AS "agent_id!" FROM turns t
           LEFT JOIN agent_leases l ON l.agent_id = t.agent_id
           LEFT JOIN replicas r ON r.id = l.replica_id
           WHERE t.state <> 'ended'
             AND (l.replica_id = $1
                  OR (l.agent_id IS NOT NULL AND (r.id IS NULL OR r.expires_at <= now()))
                  OR (l.agent_id IS NULL AND t.created_at < now() - make_interval(secs => $2)))"#,
        me,
        grace_secs
    )
    .fetch_all(pool)
    .await?;
    Ok(ids.into_iter().map(AgentId).collect())
}

/// Forgets replicas expired for longer than `grace_secs` (their leases are void already).
pub async fn forget_expired(pool: &PgPool, grace_secs: f64) -> sqlx::Result<()> {
    let mut tx = pool.begin().await?;
    sqlx::query!(
        r#"DELETE FROM agent_leases l USING replicas r
           WHERE r.id = l.replica_id AND r.expires_at < now() - make_interval(secs => $1)"#,
        grace_secs
    )
    .execute(&mut *tx)
    .await?;
    sqlx::query!(r#"DELETE FROM replicas WHERE expires_at < now() - make_interval(secs => $1)"#, grace_secs)
        .execute(&mut *tx)
        .await?;
    tx.commit().await
}
