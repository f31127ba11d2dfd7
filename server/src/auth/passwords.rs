//! Passwords: argon2id (the crate's defaults, with a random salt per hash), hashed and checked
//! on the blocking pool so they never stall the runtime. Each hash or check holds one of
//! [`slots`] (one per core) for its duration, so concurrent argon2 work — and the ~19 MiB each
//! one allocates — is bounded however many logins arrive; a caller that cannot get a slot
//! within [`SLOT_WAIT`] is told the server is busy.

use std::sync::LazyLock;
use std::time::Duration;

use argon2::Argon2;
use argon2::password_hash::phc::PasswordHash;
use argon2::password_hash::{PasswordHasher, PasswordVerifier};
use tokio::sync::{Semaphore, SemaphorePermit};

/// Shortest password accepted.
pub const MIN_LENGTH: usize = 12;
/// Longest password accepted (hashing cost is proportional to it).
pub const MAX_LENGTH: usize = 1024;
/// Longest a hash or check waits for a free slot.
pub const SLOT_WAIT: Duration = Duration::from_secs(5);

/// Slots for argon2 work: one per core.
static SLOTS: LazyLock<Semaphore> = LazyLock::new(|| Semaphore::new(slots()));

/// A hash to check passwords of unknown users against, so both cases cost the same (made on
/// first use, on the blocking pool).
static DUMMY_HASH: LazyLock<String> = LazyLock::new(|| {
    Argon2::default().hash_password(b"not a real password").map(|h| h.to_string()).unwrap_or_default()
});

/// How many argon2 hashes or checks run at once: the number of cores.
pub fn slots() -> usize {
    std::thread::available_parallelism().map_or(2, std::num::NonZeroUsize::get)
}

/// Why a hash or check did not happen.
#[derive(Debug, thiserror::Error)]
pub enum PasswordError {
    /// Every slot stayed busy for [`SLOT_WAIT`].
    #[error("every password hashing slot is busy")]
    Busy,
    /// The hashing failed (or its task died).
    #[error(transparent)]
    Failed(#[from] anyhow::Error),
}

async fn slot() -> Result<SemaphorePermit<'static>, PasswordError> {
    match tokio::time::timeout(SLOT_WAIT, SLOTS.acquire()).await {
        Ok(Ok(permit)) => Ok(permit),
        Ok(Err(_)) | Err(_) => Err(PasswordError::Busy),
    }
}

/// Checks a new password's length.
pub fn check_policy(password: &str) -> Result<(), String> {
    let length = password.chars().count();
    if length < MIN_LENGTH || password.len() > MAX_LENGTH {
        return Err(format!("passwords are {MIN_LENGTH} to {MAX_LENGTH} characters long"));
    }
    Ok(())
}

/// Hashes a password (argon2id PHC string).
pub async fn hash(password: String) -> anyhow::Result<String> {
    let _slot = slot().await.map_err(|e| anyhow::anyhow!("hashing a password: {e}"))?;
    tokio::task::spawn_blocking(move || {
        Argon2::default()
            .hash_password(password.as_bytes())
            .map(|hash| hash.to_string())
            .map_err(|e| anyhow::anyhow!("hashing a password: {e}"))
    })
    .await?
}

/// Whether `password` matches `phc`; with no `phc` (an unknown user) it is checked against a
/// dummy hash at the same cost and never matches. A malformed stored hash never matches.
pub async fn verify(password: String, phc: Option<String>) -> Result<bool, PasswordError> {
    let _slot = slot().await?;
    let known = phc.is_some();
    let matches = tokio::task::spawn_blocking(move || {
        let phc = phc.unwrap_or_else(|| DUMMY_HASH.clone());
        PasswordHash::new(&phc)
            .is_ok_and(|parsed| Argon2::default().verify_password(password.as_bytes(), &parsed).is_ok())
    })
    .await
    .map_err(|e| PasswordError::Failed(e.into()))?;
    Ok(matches && known)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn hashes_verify_and_differ() {
        let first = hash("correct horse battery".to_owned()).await.expect("hash");
        let second = hash("correct horse battery".to_owned()).await.expect("hash");
        assert!(first.starts_with("$argon2id$"));
        assert_ne!(first, second, "salted");
        assert!(verify("correct horse battery".to_owned(), Some(first.clone())).await.expect("verify"));
        assert!(!verify("wrong horse battery".to_owned(), Some(first)).await.expect("verify"));
        assert!(!verify("x".to_owned(), Some("not a hash".to_owned())).await.expect("verify"));
        assert!(!verify("not a real password".to_owned(), None).await.expect("verify"), "unknown users never match");
    }

    #[tokio::test]
    async fn an_unknown_user_costs_the_same_password_check_as_a_known_one() {
        let real = hash("a real user's password".to_owned()).await.expect("hash");
        let dummy = tokio::task::spawn_blocking(|| DUMMY_HASH.clone()).await.expect("dummy");
        let (dummy, real) =
            (PasswordHash::new(&dummy).expect("dummy parses"), PasswordHash::new(&real).expect("real parses"));
        assert_eq!(dummy.algorithm, real.algorithm, "same algorithm");
        assert_eq!(dummy.params, real.params, "same memory, iterations and parallelism");
    }

    #[test]
    fn short_passwords_are_refused() {
        assert!(check_policy("short").is_err());
        assert!(check_policy("long enough password").is_ok());
    }
}
