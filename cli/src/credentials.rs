//! The login file written by `agentholdctl login`: the server URL, its token and optionally a CA
//! file, as JSON in `$XDG_CONFIG_HOME/agenthold/credentials` (else
//! `~/.config/agenthold/credentials`), the file mode 0600 in a directory of mode 0700. Later
//! commands use its token when none is given and the server is the one it was stored for.

use std::fs::{self, DirBuilder, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use anyhow::Context;
use secrecy::zeroize::Zeroize;
use serde::{Deserialize, Serialize};

use crate::error::Failure;
use crate::secret::Token;

/// What the login file holds.
#[derive(Debug, Clone, PartialEq)]
pub struct Credentials {
    /// The server, as `Endpoint` prints it.
    pub url: String,
    /// Its API token.
    pub token: Token,
    /// A CA file to trust for this server, if login was given one.
    pub ca_file: Option<PathBuf>,
}

/// The file's JSON; the token is wiped from memory when this is dropped.
#[derive(Serialize, Deserialize)]
struct Stored {
    url: String,
    token: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    ca_file: Option<PathBuf>,
}

impl Drop for Stored {
    fn drop(&mut self) {
        self.token.zeroize();
    }
}

/// Where the login file lives: `$AGENTHOLD_CREDENTIALS` is handled by the caller; this is the
/// default, from `XDG_CONFIG_HOME` (when set to an absolute path) or `HOME`.
pub fn default_path() -> Result<PathBuf, Failure> {
    let config = match std::env::var_os("XDG_CONFIG_HOME").map(PathBuf::from) {
        Some(dir) if dir.is_absolute() => dir,
        _ => match std::env::var_os("HOME").map(PathBuf::from) {
            Some(home) if home.is_absolute() => home.join(".config"),
            _ => {
                return Err(Failure::Usage(
                    "neither XDG_CONFIG_HOME nor HOME is set: give --credentials FILE".to_owned(),
                ));
            }
        },
    };
    Ok(config.join("agenthold").join("credentials"))
}

/// Reads the login file; `None` when there is none. A file others can read is used, with a
/// warning on stderr.
pub fn load(path: &Path) -> Result<Option<Credentials>, Failure> {
    let mut text = match fs::read_to_string(path) {
        Ok(text) => text,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(error) => return Err(anyhow::Error::new(error).context(format!("reading {}", path.display())).into()),
    };
    if let Ok(meta) = fs::metadata(path)
        && meta.permissions().mode() & 0o077 != 0
    {
        eprintln!(
            "agentholdctl: warning: {} is readable by others (mode {:o}); run: chmod 600 {}",
            path.display(),
            meta.permissions().mode() & 0o777,
            path.display()
        );
    }
    let parsed = serde_json::from_str::<Stored>(&text);
    text.zeroize();
    let stored = parsed.map_err(|e| {
        Failure::Usage(format!("{} is not a login file ({e}); run agentholdctl login again", path.display()))
    })?;
    let token =
        crate::secret::parse_token(&stored.token).map_err(|e| Failure::Usage(format!("{}: {e}", path.display())))?;
    Ok(Some(Credentials { url: stored.url.clone(), token, ca_file: stored.ca_file.clone() }))
}

/// Writes the login file (replacing it atomically): the directory is made with mode 0700, the
/// file with mode 0600 before anything is written into it.
pub fn save(path: &Path, credentials: &Credentials) -> Result<(), Failure> {
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let existed = dir.exists();
    DirBuilder::new().recursive(true).mode(0o700).create(dir).with_context(|| format!("creating {}", dir.display()))?;
    if !existed {
        // The umask may have narrowed the mode further, never widened it; make it exact.
        fs::set_permissions(dir, fs::Permissions::from_mode(0o700))
            .with_context(|| format!("setting the mode of {}", dir.display()))?;
    }
    let stored = Stored {
        url: credentials.url.clone(),
        token: credentials.token.expose().to_owned(),
        ca_file: credentials.ca_file.clone(),
    };
    let mut text = serde_json::to_string_pretty(&stored).context("encoding the login file")?;
    text.push('\n');
    let file_name = path.file_name().and_then(|n| n.to_str()).unwrap_or("credentials");
    let temp = dir.join(format!(".{file_name}.{}.tmp", std::process::id()));
    let written = write_private(&temp, text.as_bytes());
    text.zeroize();
    written.with_context(|| format!("writing {}", temp.display()))?;
    fs::rename(&temp, path).with_context(|| format!("replacing {}", path.display())).inspect_err(|_| {
        fs::remove_file(&temp).ok();
    })?;
    Ok(())
}

fn write_private(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let mut file = OpenOptions::new().write(true).create_new(true).mode(0o600).open(path)?;
    file.set_permissions(fs::Permissions::from_mode(0o600))?;
    file.write_all(bytes)?;
    file.sync_all()
}

/// Deletes the login file; `false` when there was none.
pub fn remove(path: &Path) -> Result<bool, Failure> {
    match fs::remove_file(path) {
        Ok(()) => Ok(true),
        Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(error) => Err(anyhow::Error::new(error).context(format!("removing {}", path.display())).into()),
    }
}

#[cfg(test)]
#[expect(clippy::unwrap_used, reason = "tests fail loudly on unexpected values")]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("agentholdctl-{name}-{}", std::process::id()));
        fs::remove_dir_all(&dir).ok();
        dir
    }

    fn mode(path: &Path) -> u32 {
        fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn saves_with_private_modes_and_reads_back() {
        let root = scratch("creds");
        let path = root.join("config/agenthold/credentials");
        let credentials = Credentials {
            url: "https://agenthold.example:7700".into(),
            token: Token::new("ah_0123456789"),
            ca_file: Some(PathBuf::from("/etc/ca.pem")),
        };
        save(&path, &credentials).unwrap();
        assert_eq!(mode(&path), 0o600);
        assert_eq!(mode(path.parent().unwrap()), 0o700);
        assert_eq!(load(&path).unwrap(), Some(credentials.clone()));
        // Saving again replaces the file and keeps the modes, also when someone widened them.
        fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).unwrap();
        let other = Credentials { token: Token::new("ah_other"), ca_file: None, ..credentials };
        save(&path, &other).unwrap();
        assert_eq!(mode(&path), 0o600);
        assert_eq!(load(&path).unwrap(), Some(other));
        assert!(!format!("{:?}", load(&path).unwrap()).contains("ah_other"));
        let leftovers: Vec<_> = fs::read_dir(path.parent().unwrap()).unwrap().collect();
        assert_eq!(leftovers.len(), 1, "no temporary file left behind");
        assert!(remove(&path).unwrap());
        assert!(!remove(&path).unwrap());
        assert_eq!(load(&path).unwrap(), None);
        fs::remove_dir_all(&root).ok();
    }

    #[test]
    fn a_broken_file_is_a_clear_error() {
        let root = scratch("broken");
        fs::create_dir_all(&root).unwrap();
        let path = root.join("credentials");
        fs::write(&path, "{not json").unwrap();
        assert!(matches!(load(&path), Err(Failure::Usage(m)) if m.contains("login again")));
        fs::write(&path, r#"{"url":"http://x","token":"  "}"#).unwrap();
        assert!(matches!(load(&path), Err(Failure::Usage(_))));
        fs::remove_dir_all(&root).ok();
    }
}
