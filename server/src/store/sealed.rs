//! A sealed value as the tables that hold one store it (secrets, provider logins, webhook
//! secrets, proxy identities). Sealing and opening are `crate::secrets::cipher`'s.

/// A value as stored: the key id, the nonce and the ciphertext (with its tag).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sealed {
    /// The id of the master key that sealed it.
    pub key_id: String,
    /// The nonce.
    pub nonce: Vec<u8>,
    /// The ciphertext and its 16-byte tag.
    pub ciphertext: Vec<u8>,
}
