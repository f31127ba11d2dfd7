//! The master key: the 32 bytes that encrypt every secret value at rest. It comes from a file
//! (`AGENTHOLD_MASTER_KEY_FILE`) or the environment (`AGENTHOLD_MASTER_KEY`, base64), never from
//! the database. Outside dev and test mode the server refuses to start without one; in dev and
//! test mode it falls back to `<data dir>/master.key`, made (mode 0600) when absent. The key's
//! id (the first 8 bytes of its SHA-256, hex) is stored with every ciphertext, so rotation knows
//! which rows it has re-encrypted. The bytes are wiped on drop and never printed.

use std::fmt;
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use base64::Engine;
use sha2::{Digest, Sha256};
use zeroize::Zeroizing;

use crate::config::{Config, Mode};

/// Bytes in a master key.
pub const KEY_LEN: usize = 32;

/// The file name of the dev/test fallback key in the data directory.
pub const DEV_KEY_FILE: &str = "master.key";

/// A master key. `Debug` shows its id only.
pub struct MasterKey {
    bytes: Zeroizing<[u8; KEY_LEN]>,
    id: String,
}

/// A key that could not be read or does not have the right shape. Never holds key material.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    /// Not 32 bytes, raw or as base64.
    #[error("a master key is 32 bytes: 32 raw bytes, or their base64 (44 characters)")]
    Malformed,
    /// The file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// Which file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

impl MasterKey {
    /// A key from its bytes.
    pub fn from_bytes(bytes: [u8; KEY_LEN]) -> Self {
        let digest = Sha256::digest(bytes);
        let id = hex::encode(&digest[..8]);
        Self { bytes: Zeroizing::new(bytes), id }
    }

    /// A 32-byte key for one `purpose` derived from this one (HMAC-SHA256 of the purpose under
    /// the master key): material for a credential the server checks itself, never stored.
    pub fn derive(&self, purpose: &[u8]) -> Zeroizing<[u8; 32]> {
        use hmac::Mac as _;
        let mut mac = <hmac::Hmac<Sha256> as hmac::Mac>::new_from_slice(&self.bytes[..])
            .unwrap_or_else(|_| unreachable!("HMAC accepts any key length"));
        mac.update(purpose);
        let mut out = Zeroizing::new([0u8; 32]);
        out.copy_from_slice(&mac.finalize().into_bytes());
        out
    }

    /// A fresh random key.
    pub fn generate() -> Self {
        let mut bytes = Zeroizing::new([0u8; KEY_LEN]);
        rand::fill(&mut bytes[..]);
        Self::from_bytes(*bytes)
    }

    /// Parses 32 raw bytes, or base64 text (surrounding whitespace ignored) of 32 bytes.
    pub fn parse(raw: &[u8]) -> Result<Self, KeyError> {
        if let Ok(bytes) = <[u8; KEY_LEN]>::try_from(raw) {
            return Ok(Self::from_bytes(bytes));
        }
        let text = std::str::from_utf8(raw).map_err(|_| KeyError::Malformed)?.trim();
        let decoded =
            Zeroizing::new(base64::engine::general_purpose::STANDARD.decode(text).map_err(|_| KeyError::Malformed)?);
        let bytes = <[u8; KEY_LEN]>::try_from(decoded.as_slice()).map_err(|_| KeyError::Malformed)?;
        Ok(Self::from_bytes(bytes))
    }

    /// Reads a key file (raw or base64). Warns when others than its owner may read it.
    pub fn from_file(path: &Path) -> Result<Self, KeyError> {
        let io = |source| KeyError::Io { path: path.to_owned(), source };
        let raw = Zeroizing::new(std::fs::read(path).map_err(io)?);
        if let Ok(meta) = std::fs::metadata(path)
            && meta.permissions().mode() & 0o077 != 0
        {
            tracing::warn!(path = %path.display(), "the master key file is readable by others than its owner; chmod 600 it");
        }
        Self::parse(&raw)
    }

    /// Reads the key file at `path`, or creates it (mode 0600, base64) with a fresh key when it
    /// does not exist. Returns the key and whether it was created.
    pub fn open_or_create(path: &Path) -> Result<(Self, bool), KeyError> {
        let io = |source| KeyError::Io { path: path.to_owned(), source };
        let key = Self::generate();
        match std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(path) {
            Ok(mut file) => {
                let text = Zeroizing::new(base64::engine::general_purpose::STANDARD.encode(*key.bytes));
                file.write_all(text.as_bytes()).and_then(|()| file.write_all(b"\n")).map_err(io)?;
                file.sync_all().map_err(io)?;
                Ok((key, true))
            }
            Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => Ok((Self::from_file(path)?, false)),
            Err(error) => Err(io(error)),
        }
    }

    /// The key's id: the first 8 bytes of its SHA-256, as 16 hex digits. Not secret.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The key material, for the cipher only.
    pub(super) fn bytes(&self) -> &[u8; KEY_LEN] {
        &self.bytes
    }
}

impl fmt::Debug for MasterKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "MasterKey(id={}, <redacted>)", self.id)
    }
}

/// Where the server's master key came from (logged at start, without the key).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeySource {
    /// `AGENTHOLD_MASTER_KEY_FILE`.
    File(PathBuf),
    /// `AGENTHOLD_MASTER_KEY`.
    Environment,
    /// The dev/test fallback in the data directory (`created`: made at this start).
    DevFile {
        /// The file.
        path: PathBuf,
        /// Whether this start created it.
        created: bool,
    },
}

/// Loads the configured master key. Outside dev and test mode, no key is an error that says
/// how to provide one.
pub fn load(config: &Config) -> anyhow::Result<(MasterKey, KeySource)> {
    use anyhow::Context;
    match (&config.master_key_file, &config.master_key) {
        (Some(_), Some(_)) => {
            anyhow::bail!("set either AGENTHOLD_MASTER_KEY_FILE or AGENTHOLD_MASTER_KEY, not both")
        }
        (Some(path), None) => {
            let key = MasterKey::from_file(path).context("reading the master key (AGENTHOLD_MASTER_KEY_FILE)")?;
            Ok((key, KeySource::File(path.clone())))
        }
        (None, Some(value)) => {
            let key = MasterKey::parse(value.expose().as_bytes()).context("AGENTHOLD_MASTER_KEY")?;
            Ok((key, KeySource::Environment))
        }
        (None, None) if config.mode == Mode::Production => anyhow::bail!(
            "no master key: secrets are encrypted with a 32-byte master key, and the server does not start \
             without one in production mode. Set AGENTHOLD_MASTER_KEY_FILE to a file holding it (make one with \
             `head -c 32 /dev/urandom | base64 > master.key; chmod 600 master.key`) or AGENTHOLD_MASTER_KEY to \
             its base64, or set AGENTHOLD_MODE=dev to use a key in the data directory (docs/secrets.md)"
        ),
        (None, None) => {
            let path = config.data_dir.join(DEV_KEY_FILE);
            let (key, created) = MasterKey::open_or_create(&path)
                .with_context(|| format!("the {} mode master key", config.mode.as_str()))?;
            Ok((key, KeySource::DevFile { path, created }))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_parse_raw_or_base64_and_nothing_else() {
        let raw = [7u8; KEY_LEN];
        let from_raw = MasterKey::parse(&raw).expect("raw");
        let text = format!("  {}\n", base64::engine::general_purpose::STANDARD.encode(raw));
        let from_text = MasterKey::parse(text.as_bytes()).expect("base64");
        assert_eq!(from_raw.id(), from_text.id());
        assert_eq!(from_raw.id().len(), 16);
        for bad in [&b""[..], &[7u8; 31][..], &[7u8; 33][..], b"not base64!", b"AAAA"] {
            assert!(MasterKey::parse(bad).is_err(), "{bad:?}");
        }
        assert_ne!(MasterKey::generate().id(), MasterKey::generate().id());
    }

    #[test]
    fn debug_shows_the_id_never_the_bytes() {
        let key = MasterKey::from_bytes([0xab; KEY_LEN]);
        let shown = format!("{key:?}");
        assert!(shown.contains(key.id()));
        assert!(!shown.contains("abab"), "{shown}");
        assert!(!shown.contains(&base64::engine::general_purpose::STANDARD.encode([0xab; KEY_LEN])));
    }

    #[test]
    fn the_dev_key_file_is_made_once_with_mode_0600() {
        let dir = std::env::temp_dir().join(format!("agenthold-key-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&dir).expect("dir");
        let path = dir.join(DEV_KEY_FILE);
        let (first, created) = MasterKey::open_or_create(&path).expect("created");
        assert!(created);
        let mode = std::fs::metadata(&path).expect("meta").permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let (again, created) = MasterKey::open_or_create(&path).expect("read");
        assert!(!created);
        assert_eq!(first.id(), again.id());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
