//! Sealing and opening secret values at rest: XChaCha20-Poly1305 under the master key, a fresh
//! random 24-byte nonce per write, and the row's identity (workspace id and secret id) as
//! associated data, so a ciphertext copied into another row does not open. The key's id is
//! stored beside the ciphertext for rotation.

use chacha20poly1305::aead::{Aead, Generate, KeyInit, Payload};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};
use uuid::Uuid;
use zeroize::Zeroizing;

use super::master_key::MasterKey;
use crate::secret::Secret;

/// Bytes in a nonce.
pub const NONCE_LEN: usize = 24;

/// Which row a ciphertext belongs to: bound into it as associated data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RowIdentity {
    /// The secret's workspace.
    pub workspace_id: Uuid,
    /// The secret.
    pub secret_id: Uuid,
}

impl RowIdentity {
    /// A provider login's value is sealed with the user's id where a secret has its workspace's:
    /// the associated data binds it to its row.
    pub fn provider_login(user_id: Uuid, login_id: Uuid) -> Self {
        Self { workspace_id: user_id, secret_id: login_id }
    }

    /// A webhook's signing secret is sealed under its agent and its own id (random ids, so no
    /// secret value's ciphertext opens as a webhook's, nor the other way round).
    pub fn webhook_secret(agent_id: crate::ids::AgentId, webhook_id: Uuid) -> Self {
        Self { workspace_id: agent_id.0, secret_id: webhook_id }
    }

    fn associated_data(&self) -> String {
        format!("agenthold/secret/v1/{}/{}", self.workspace_id, self.secret_id)
    }
}

/// A value as stored (the store's shape).
pub use crate::store::sealed::Sealed;

/// A value that does not open. Never holds plaintext.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum OpenError {
    /// Sealed under another master key (rotate, or start with that key).
    #[error("sealed with master key {stored}, the server has {have}")]
    OtherKey {
        /// The key id the row names.
        stored: String,
        /// The key id the server has.
        have: String,
    },
    /// Tampered with, moved to another row, or sealed with another key of the same id.
    #[error("the ciphertext does not authenticate (tampered with or moved to another row)")]
    Forged,
    /// Opens, but is not text.
    #[error("the value is not UTF-8")]
    NotText,
}

/// Sealing failed (only for values far beyond any limit the API allows).
#[derive(Debug, thiserror::Error)]
#[error("the value could not be encrypted")]
pub struct SealError;

fn cipher(key: &MasterKey) -> XChaCha20Poly1305 {
    XChaCha20Poly1305::new(key.bytes().into())
}

/// Encrypts a value for a row, with a fresh random nonce.
pub fn seal(key: &MasterKey, row: RowIdentity, plaintext: &[u8]) -> Result<Sealed, SealError> {
    let nonce = XNonce::generate();
    let aad = row.associated_data();
    let ciphertext =
        cipher(key).encrypt(&nonce, Payload { msg: plaintext, aad: aad.as_bytes() }).map_err(|_| SealError)?;
    Ok(Sealed { key_id: key.id().to_owned(), nonce: nonce.to_vec(), ciphertext })
}

/// Decrypts a row's value.
pub fn open(key: &MasterKey, row: RowIdentity, sealed: &Sealed) -> Result<Secret, OpenError> {
    if sealed.key_id != key.id() {
        return Err(OpenError::OtherKey { stored: sealed.key_id.clone(), have: key.id().to_owned() });
    }
    let nonce = XNonce::try_from(sealed.nonce.as_slice()).map_err(|_| OpenError::Forged)?;
    let aad = row.associated_data();
    let plaintext = Zeroizing::new(
        cipher(key)
            .decrypt(&nonce, Payload { msg: &sealed.ciphertext, aad: aad.as_bytes() })
            .map_err(|_| OpenError::Forged)?,
    );
    let text = std::str::from_utf8(&plaintext).map_err(|_| OpenError::NotText)?;
    Ok(Secret::new(text))
}

#[cfg(test)]
mod tests {
    use super::*;

    const VALUE: &str = "sk-ant-api03-not-a-real-key-0123456789";

    fn row() -> RowIdentity {
        RowIdentity { workspace_id: Uuid::new_v4(), secret_id: Uuid::new_v4() }
    }

    fn contains(haystack: &[u8], needle: &[u8]) -> bool {
        haystack.windows(needle.len()).any(|w| w == needle)
    }

    #[test]
    fn a_sealed_value_opens_with_its_key_and_row() {
        let key = MasterKey::generate();
        let row = row();
        let sealed = seal(&key, row, VALUE.as_bytes()).expect("seals");
        assert_eq!(sealed.key_id, key.id());
        assert_eq!(sealed.nonce.len(), NONCE_LEN);
        assert!(!contains(&sealed.ciphertext, VALUE.as_bytes()), "the ciphertext holds no plaintext");
        assert_eq!(open(&key, row, &sealed).expect("opens").expose(), VALUE);
        let again = seal(&key, row, VALUE.as_bytes()).expect("seals");
        assert_ne!((&again.nonce, &again.ciphertext), (&sealed.nonce, &sealed.ciphertext), "fresh nonce per write");
    }

    #[test]
    fn another_key_does_not_open_it() {
        let (key, other) = (MasterKey::generate(), MasterKey::generate());
        let row = row();
        let sealed = seal(&key, row, VALUE.as_bytes()).expect("seals");
        assert!(matches!(open(&other, row, &sealed), Err(OpenError::OtherKey { .. })));
        // Even claiming the other key's id, the tag does not verify.
        let relabelled = Sealed { key_id: other.id().to_owned(), ..sealed };
        assert_eq!(open(&other, row, &relabelled).err(), Some(OpenError::Forged));
    }

    #[test]
    fn a_value_moved_to_another_row_does_not_open() {
        let key = MasterKey::generate();
        let row = row();
        let sealed = seal(&key, row, VALUE.as_bytes()).expect("seals");
        let other_secret = RowIdentity { secret_id: Uuid::new_v4(), ..row };
        let other_workspace = RowIdentity { workspace_id: Uuid::new_v4(), ..row };
        assert_eq!(open(&key, other_secret, &sealed).err(), Some(OpenError::Forged));
        assert_eq!(open(&key, other_workspace, &sealed).err(), Some(OpenError::Forged));
    }

    #[test]
    fn a_tampered_value_does_not_open() {
        let key = MasterKey::generate();
        let row = row();
        let sealed = seal(&key, row, VALUE.as_bytes()).expect("seals");
        for i in 0..sealed.ciphertext.len() {
            let mut tampered = sealed.clone();
            tampered.ciphertext[i] ^= 0x01;
            assert_eq!(open(&key, row, &tampered).err(), Some(OpenError::Forged), "byte {i}");
        }
        let mut nonce = sealed.clone();
        nonce.nonce[0] ^= 0x80;
        assert_eq!(open(&key, row, &nonce).err(), Some(OpenError::Forged));
        let mut short = sealed.clone();
        short.nonce.pop();
        assert_eq!(open(&key, row, &short).err(), Some(OpenError::Forged));
        let mut truncated = sealed;
        truncated.ciphertext.truncate(8);
        assert_eq!(open(&key, row, &truncated).err(), Some(OpenError::Forged));
    }
}
