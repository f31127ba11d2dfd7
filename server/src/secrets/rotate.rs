//! Master key rotation: `agenthold secrets rotate --old-key-file OLD --new-key-file NEW`
//! re-encrypts every secret (secret values, provider logins, webhook secrets) sealed under the
//! old key with the new one, in one transaction (all
//! rows or none). Rows already under the new key are left alone, so running it twice is safe; a
//! row under a third key, or one that does not open, aborts the whole rotation.

use std::path::Path;

use anyhow::Context;
use sqlx::PgPool;

use super::cipher::{self, RowIdentity};
use super::master_key::MasterKey;
use crate::store;

/// What a rotation did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rotated {
    /// Rows moved from the old key to the new one.
    pub resealed: usize,
    /// Rows that were under the new key already.
    pub already: usize,
}

/// Re-encrypts every secret under `old` with `new`.
pub async fn rotate(pool: &PgPool, old: &MasterKey, new: &MasterKey) -> anyhow::Result<Rotated> {
    anyhow::ensure!(old.id() != new.id(), "the old and the new key are the same key (id {})", new.id());
    let mut tx = pool.begin().await?;
    let rows = store::secrets::lock_all_sealed(&mut tx).await?;
    let mut done = Rotated { resealed: 0, already: 0 };
    for row in rows {
        let identity = RowIdentity { workspace_id: row.workspace_id, secret_id: row.id };
        match resealed(old, new, identity, &row.sealed, "secret")? {
            Some(sealed) => {
                store::secrets::reseal(&mut tx, row.id, &sealed).await?;
                done.resealed += 1;
            }
            None => done.already += 1,
        }
    }
    // Provider logins are sealed the same way (docs/logins.md).
    for (id, user_id, sealed) in store::provider_logins::lock_all_sealed(&mut tx).await? {
        match resealed(old, new, RowIdentity::provider_login(user_id, id), &sealed, "provider login")? {
            Some(sealed) => {
                store::provider_logins::reseal(&mut tx, id, &sealed).await?;
                done.resealed += 1;
            }
            None => done.already += 1,
        }
    }
    // And webhook secrets (docs/triggers.md).
    for (id, agent_id, sealed) in store::webhooks::lock_all_sealed(&mut tx).await? {
        let identity = RowIdentity::webhook_secret(agent_id, id);
        match resealed(old, new, identity, &sealed, "webhook secret")? {
            Some(sealed) => {
                store::webhooks::reseal(&mut tx, id, &sealed).await?;
                done.resealed += 1;
            }
            None => done.already += 1,
        }
    }
    tx.commit().await?;
    Ok(done)
}

/// A row's value sealed under `new` (`None`: it is already); an error for a row under a third
/// key or one that does not open.
fn resealed(
    old: &MasterKey,
    new: &MasterKey,
    identity: RowIdentity,
    sealed: &cipher::Sealed,
    what: &str,
) -> anyhow::Result<Option<cipher::Sealed>> {
    if sealed.key_id == new.id() {
        return Ok(None);
    }
    let id = identity.secret_id;
    anyhow::ensure!(
        sealed.key_id == old.id(),
        "{what} {id} is sealed under key {}, neither the old key ({}) nor the new one ({}); nothing was changed",
        sealed.key_id,
        old.id(),
        new.id()
    );
    let value = cipher::open(old, identity, sealed)
        .with_context(|| format!("{what} {id} does not open; nothing was changed"))?;
    Ok(Some(cipher::seal(new, identity, value.expose().as_bytes())?))
}

/// The subcommand: reads both key files, rotates, says what it did.
pub async fn run(database_url: &str, old_key_file: &Path, new_key_file: &Path) -> anyhow::Result<String> {
    let old = MasterKey::from_file(old_key_file).context("reading --old-key-file")?;
    let new = MasterKey::from_file(new_key_file).context("reading --new-key-file")?;
    let pool = store::connect(database_url, 2, std::time::Duration::from_secs(10)).await?;
    let done = rotate(&pool, &old, &new).await;
    pool.close().await;
    let done = done?;
    Ok(format!(
        "re-encrypted {} secret(s) from key {} to key {} ({} already under the new key); restart the server with the new key",
        done.resealed,
        old.id(),
        new.id(),
        done.already
    ))
}
