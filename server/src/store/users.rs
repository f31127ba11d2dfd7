//! The `users`, `workspaces` and `memberships` tables.

use sqlx::PgPool;
use uuid::Uuid;

/// A role in a workspace, weakest first.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize, utoipa::ToSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Reads agents, sessions, events.
    Viewer,
    /// Also prompts, cancels, answers permission requests, uses terminals.
    Operator,
    /// Also creates, changes and deletes agents; manages members.
    Admin,
}

impl Role {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Viewer => "viewer",
            Self::Operator => "operator",
            Self::Admin => "admin",
        }
    }

    /// Parses a stored name.
    pub fn parse(raw: &str) -> Option<Self> {
        Some(match raw {
            "viewer" => Self::Viewer,
            "operator" => Self::Operator,
            "admin" => Self::Admin,
            _ => return None,
        })
    }
}

/// A user.
#[derive(Debug, Clone)]
pub struct UserRow {
    /// Its id.
    pub id: Uuid,
    /// Login name.
    pub username: String,
    /// argon2id PHC string.
    pub password_hash: String,
    /// May create users.
    pub server_admin: bool,
}

/// Creating a user failed.
#[derive(Debug, thiserror::Error)]
pub enum CreateUserError {
    /// The name is taken.
    #[error("the username is taken")]
    Taken,
    /// The database failed.
    #[error(transparent)]
    Db(#[from] sqlx::Error),
}

/// Creates a user with a personal workspace (where it is admin); returns the workspace's id.
pub async fn create(pool: &PgPool, user: &UserRow) -> Result<Uuid, CreateUserError> {
    let mut tx = pool.begin().await?;
    let inserted = sqlx::query!(
        r#"INSERT INTO users (id, username, password_hash, server_admin) VALUES ($1, $2, $3, $4)
           ON CONFLICT (username) DO NOTHING"#,
        user.id,
        user.username,
        user.password_hash,
        user.server_admin
    )
    .execute(&mut *tx)
    .await?;
    if inserted.rows_affected() == 0 {
        return Err(CreateUserError::Taken);
    }
    let workspace = Uuid::new_v4();
    sqlx::query!(
        r#"INSERT INTO workspaces (id, name, personal_user_id) VALUES ($1, $2, $3)"#,
        workspace,
        format!("{} (personal)", user.username),
        user.id
    )
    .execute(&mut *tx)
    .await?;
    sqlx::query!(
        r#"INSERT INTO memberships (workspace_id, user_id, role) VALUES ($1, $2, 'admin')"#,
        workspace,
        user.id
    )
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(workspace)
}

/// A user by login name.
pub async fn by_username(pool: &PgPool, username: &str) -> sqlx::Result<Option<UserRow>> {
    sqlx::query_as!(
        UserRow,
        r#"SELECT id, username, password_hash, server_admin FROM users WHERE username = $1"#,
        username
    )
    .fetch_optional(pool)
    .await
}

/// A user by id.
pub async fn get(pool: &PgPool, id: Uuid) -> sqlx::Result<Option<UserRow>> {
    sqlx::query_as!(UserRow, r#"SELECT id, username, password_hash, server_admin FROM users WHERE id = $1"#, id)
        .fetch_optional(pool)
        .await
}

/// The personal workspace of a user.
pub async fn personal_workspace(pool: &PgPool, user_id: Uuid) -> sqlx::Result<Option<Uuid>> {
    sqlx::query_scalar!(r#"SELECT id FROM workspaces WHERE personal_user_id = $1"#, user_id).fetch_optional(pool).await
}

/// The user's role in a workspace, if a member.
pub async fn role_in(pool: &PgPool, user_id: Uuid, workspace_id: Uuid) -> sqlx::Result<Option<Role>> {
    let role = sqlx::query_scalar!(
        r#"SELECT role FROM memberships WHERE user_id = $1 AND workspace_id = $2"#,
        user_id,
        workspace_id
    )
    .fetch_optional(pool)
    .await?;
    Ok(role.as_deref().and_then(Role::parse))
}

/// A workspace membership as listed for a user.
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct MembershipView {
    /// The workspace.
    pub workspace_id: Uuid,
    /// Its name.
    pub name: String,
    /// The user's role.
    pub role: Role,
    /// Whether it is the user's personal workspace.
    pub personal: bool,
}

/// The workspaces a user belongs to.
pub async fn memberships(pool: &PgPool, user_id: Uuid) -> sqlx::Result<Vec<MembershipView>> {
    let rows = sqlx::query!(
        r#"SELECT w.id, w.name, m.role, (w.personal_user_id IS NOT DISTINCT FROM $1) AS "personal!"
           FROM memberships m JOIN workspaces w ON w.id = m.workspace_id
           WHERE m.user_id = $1 ORDER BY w.created_at, w.id"#,
        user_id
    )
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .filter_map(|r| {
            Some(MembershipView { workspace_id: r.id, name: r.name, role: Role::parse(&r.role)?, personal: r.personal })
        })
        .collect())
}

/// A member of a workspace as listed for its members.
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct MemberView {
    /// The user.
    pub user_id: Uuid,
    /// Their login name (the user model has no other name or email).
    pub username: String,
    /// Their role in the workspace.
    pub role: Role,
    /// When they joined it (a role change keeps this).
    pub joined_at: chrono::DateTime<chrono::Utc>,
}

/// A workspace's members, earliest first.
pub async fn members(pool: &PgPool, workspace_id: Uuid) -> sqlx::Result<Vec<MemberView>> {
    let rows = sqlx::query!(
        r#"SELECT u.id, u.username, m.role, m.created_at
           FROM memberships m JOIN users u ON u.id = m.user_id
           WHERE m.workspace_id = $1 ORDER BY m.created_at, u.username"#,
        workspace_id
    )
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .filter_map(|r| {
            let role = Role::parse(&r.role)?;
            Some(MemberView { user_id: r.id, username: r.username, role, joined_at: r.created_at })
        })
        .collect())
}

/// Creates a shared workspace with its creator as admin.
pub async fn create_workspace(pool: &PgPool, name: &str, creator: Uuid) -> sqlx::Result<Uuid> {
    let id = Uuid::new_v4();
    let mut tx = pool.begin().await?;
    sqlx::query!(r#"INSERT INTO workspaces (id, name) VALUES ($1, $2)"#, id, name).execute(&mut *tx).await?;
    sqlx::query!(r#"INSERT INTO memberships (workspace_id, user_id, role) VALUES ($1, $2, 'admin')"#, id, creator)
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(id)
}

/// Changing a membership failed.
#[derive(Debug, thiserror::Error)]
pub enum MembershipError {
    /// It would leave the workspace without an admin.
    #[error("a workspace keeps at least one admin")]
    LastAdmin,
    /// The database failed.
    #[error(transparent)]
    Db(#[from] sqlx::Error),
}

/// Adds a member or changes its role (`None` removes it), keeping at least one admin.
pub async fn set_membership(
    pool: &PgPool,
    workspace_id: Uuid,
    user_id: Uuid,
    role: Option<Role>,
) -> Result<(), MembershipError> {
    let mut tx = pool.begin().await?;
    // Lock the workspace's memberships so concurrent changes cannot both remove "the other" admin.
    sqlx::query!(r#"SELECT id FROM workspaces WHERE id = $1 FOR UPDATE"#, workspace_id)
        .fetch_optional(&mut *tx)
        .await?;
    match role {
        Some(role) => {
            sqlx::query!(
                r#"INSERT INTO memberships (workspace_id, user_id, role) VALUES ($1, $2, $3)
                   ON CONFLICT (workspace_id, user_id) DO UPDATE SET role = EXCLUDED.role"#,
                workspace_id,
                user_id,
                role.as_str()
            )
            .execute(&mut *tx)
            .await?;
        }
        None => {
            sqlx::query!(r#"DELETE FROM memberships WHERE workspace_id = $1 AND user_id = $2"#, workspace_id, user_id)
                .execute(&mut *tx)
                .await?;
        }
    }
    let admins = sqlx::query_scalar!(
        r#"SELECT count(*) AS "count!" FROM memberships WHERE workspace_id = $1 AND role = 'admin'"#,
        workspace_id
    )
    .fetch_one(&mut *tx)
    .await?;
    if admins == 0 {
        return Err(MembershipError::LastAdmin);
    }
    tx.commit().await?;
    Ok(())
}
