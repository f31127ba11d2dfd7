//! Passwords: argon2id (the crate's defaults, with a random salt per hash), hashed and checked
//! on the blocking pool so they never stall the runtime.

use argon2::Argon2;
use argon2::password_hash::phc::PasswordHash;
use argon2::password_hash::{PasswordHasher, PasswordVerifier};

/// Shortest password accepted.
pub const MIN_LENGTH: usize = 12;
/// Longest password accepted (hashing cost is proportional to it).
pub const MAX_LENGTH: usize = 1024;

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
    tokio::task::spawn_blocking(move || {
        Argon2::default()
            .hash_password(password.as_bytes())
            .map(|hash| hash.to_string())
            .map_err(|e| anyhow::anyhow!("hashing a password: {e}"))
    })
    .await?
}

/// Whether `password` matches `phc`. A malformed stored hash never matches.
pub async fn verify(password: String, phc: String) -> anyhow::Result<bool> {
    Ok(tokio::task::spawn_blocking(move || {
        PasswordHash::new(&phc)
            .is_ok_and(|parsed| Argon2::default().verify_password(password.as_bytes(), &parsed).is_ok())
    })
    .await?)
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
        assert!(verify("correct horse battery".to_owned(), first.clone()).await.expect("verify"));
        assert!(!verify("wrong horse battery".to_owned(), first).await.expect("verify"));
        assert!(!verify("x".to_owned(), "not a hash".to_owned()).await.expect("verify"));
    }

    #[test]
    fn short_passwords_are_refused() {
        assert!(check_policy("short").is_err());
        assert!(check_policy("long enough password").is_ok());
    }
}
