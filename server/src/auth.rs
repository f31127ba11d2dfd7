//! Who is calling. Until users and roles land there is one kind of principal: a holder of an
//! API token (the bootstrap admin token). Handlers take a [`Principal`] and ask it before acting,
//! so real principals with roles slot in here without touching the handlers' shape.

use anyhow::Context;
use axum::extract::FromRequestParts;
use axum::http::header;
use axum::http::request::Parts;
use rand::RngCore;
use sqlx::PgPool;

use crate::api::error::ApiError;
use crate::app::AppState;
use crate::config::Config;
use crate::store;

/// Name of the bootstrap admin token.
const BOOTSTRAP_TOKEN_NAME: &str = "bootstrap-admin";
/// File (in the data directory) the generated bootstrap token is written to, mode 0600.
pub const ADMIN_TOKEN_FILE: &str = "admin-token";

/// An authenticated caller.
#[derive(Debug, Clone)]
pub struct Principal {
    /// The API token used.
    pub token_id: uuid::Uuid,
}

impl FromRequestParts<AppState> for Principal {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        let token = parts
            .headers
            .get(header::AUTHORIZATION)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.strip_prefix("Bearer "))
            .ok_or(ApiError::Unauthorized)?;
        match store::tokens::authenticate(&state.pool, token.trim()).await? {
            Some(token_id) => Ok(Self { token_id }),
            None => Err(ApiError::Unauthorized),
        }
    }
}

/// Makes sure the bootstrap admin token exists: the configured one, or one generated on first
/// start and written to `<data dir>/admin-token` (0600) for `make dev` to print.
pub async fn ensure_bootstrap_token(pool: &PgPool, config: &Config) -> anyhow::Result<()> {
    if let Some(token) = &config.admin_token {
        store::tokens::replace_named(pool, BOOTSTRAP_TOKEN_NAME, token.expose()).await?;
        return Ok(());
    }
    let file = config.data_dir.join(ADMIN_TOKEN_FILE);
    if store::tokens::exists_named(pool, BOOTSTRAP_TOKEN_NAME).await? && file.exists() {
        let token = tokio::fs::read_to_string(&file).await.context("reading the admin token file")?;
        if store::tokens::authenticate(pool, token.trim()).await?.is_some() {
            return Ok(());
        }
    }
    let mut bytes = [0u8; 24];
    rand::rng().fill_bytes(&mut bytes);
    let token = format!("ah_{}", bytes.iter().map(|b| format!("{b:02x}")).collect::<String>());
    store::tokens::replace_named(pool, BOOTSTRAP_TOKEN_NAME, &token).await?;
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
