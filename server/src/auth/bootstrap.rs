//! The first start: an admin user (with a personal workspace) and the bootstrap admin token.
//!
//! The admin's name is `AGENTHOLD_BOOTSTRAP_ADMIN_USER` (default `admin`); its password is
//! `AGENTHOLD_BOOTSTRAP_ADMIN_PASSWORD` or generated and written once to
//! `<data dir>/admin-password` (mode 0600). The bootstrap token is `AGENTHOLD_ADMIN_TOKEN` or
//! generated and written to `<data dir>/admin-token` (0600); `make dev` prints both.

use anyhow::Context;
use sqlx::PgPool;
use uuid::Uuid;

use super::passwords;
use crate::config::Config;
use crate::store;
use crate::store::users::{CreateUserError, UserRow};

/// Name of the bootstrap admin token.
const BOOTSTRAP_TOKEN_NAME: &str = "bootstrap-admin";
/// File (in the data directory) the generated bootstrap token is written to, mode 0600.
pub const ADMIN_TOKEN_FILE: &str = "admin-token";
/// File the generated admin password is written to, mode 0600.
pub const ADMIN_PASSWORD_FILE: &str = "admin-password";

fn random_secret(prefix: &str) -> String {
    format!("{prefix}{}", hex::encode(rand::random::<[u8; 24]>()))
}

/// Makes sure the admin user and the bootstrap token exist; adopts agents made before
/// workspaces existed into the admin's personal workspace.
pub async fn run(pool: &PgPool, config: &Config) -> anyhow::Result<()> {
    let admin = ensure_admin(pool, config).await?;
    if let Some(workspace) = store::users::personal_workspace(pool, admin).await? {
        let adopted = store::agents::adopt_orphans(pool, workspace).await?;
        if adopted > 0 {
            tracing::info!(adopted, "moved agents made before workspaces into the admin's workspace");
        }
    }
    ensure_token(pool, config, admin).await
}

async fn ensure_admin(pool: &PgPool, config: &Config) -> anyhow::Result<Uuid> {
    let username = config.bootstrap_admin_user.to_lowercase();
    if let Some(user) = store::users::by_username(pool, &username).await? {
        return Ok(user.id);
    }
    let (password, generated) = match &config.bootstrap_admin_password {
        Some(password) => (password.expose().to_owned(), false),
        None => (random_secret(""), true),
    };
    passwords::check_policy(&password).map_err(|m| anyhow::anyhow!("AGENTHOLD_BOOTSTRAP_ADMIN_PASSWORD: {m}"))?;
    let user = UserRow {
        id: Uuid::new_v4(),
        username: username.clone(),
        password_hash: passwords::hash(password.clone()).await?,
        server_admin: true,
    };
    match store::users::create(pool, &user).await {
        Ok(_) => {}
        Err(CreateUserError::Taken) => {
            // Another replica made it first.
            let user = store::users::by_username(pool, &username).await?.context("the admin user vanished")?;
            return Ok(user.id);
        }
        Err(CreateUserError::Db(error)) => return Err(error.into()),
    }
    if generated {
        write_private(&config.data_dir.join(ADMIN_PASSWORD_FILE), &password).await?;
    }
    tracing::info!(username, "created the admin user");
    Ok(user.id)
}

async fn ensure_token(pool: &PgPool, config: &Config, admin: Uuid) -> anyhow::Result<()> {
    if let Some(token) = &config.admin_token {
        store::tokens::replace_named(pool, BOOTSTRAP_TOKEN_NAME, token.expose(), admin).await?;
        return Ok(());
    }
    let file = config.data_dir.join(ADMIN_TOKEN_FILE);
    if store::tokens::named(pool, BOOTSTRAP_TOKEN_NAME).await?.is_some() && file.exists() {
        let token = tokio::fs::read_to_string(&file).await.context("reading the admin token file")?;
        if store::tokens::authenticate(pool, token.trim()).await?.is_some() {
            return Ok(());
        }
    }
    let token = random_secret("ah_");
    store::tokens::replace_named(pool, BOOTSTRAP_TOKEN_NAME, &token, admin).await?;
    write_private(&file, &token).await?;
    tracing::info!(path = %file.display(), "generated the bootstrap admin token");
    Ok(())
}

async fn write_private(path: &std::path::Path, contents: &str) -> anyhow::Result<()> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let path = path.to_owned();
    let contents = contents.to_owned();
    tokio::task::spawn_blocking(move || -> anyhow::Result<()> {
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&path)
            .with_context(|| format!("writing {}", path.display()))?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))?;
        std::io::Write::write_all(&mut file, contents.as_bytes())?;
        Ok(())
    })
    .await?
}
