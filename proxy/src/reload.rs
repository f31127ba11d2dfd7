//! Reading the configuration file and following its changes: the file's identity (mtime, size,
//! inode) is polled every second; a change is parsed and compiled; a file that is missing,
//! malformed or inconsistent replaces the policy with [`PolicyState::Deny`]: nothing is allowed
//! until a good one arrives, never the previous allow-list.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tokio::sync::watch;

use crate::ca::Ca;
use crate::config::ConfigFile;
use crate::policy::{ConfigError, Policy};

/// How often the file is checked.
pub const POLL_INTERVAL: Duration = Duration::from_secs(1);

/// The policy in force.
#[derive(Debug)]
pub enum PolicyState {
    /// No valid configuration: every request is refused.
    Deny,
    /// A valid configuration.
    Ready(Arc<Policy>),
}

impl PolicyState {
    /// The policy, if there is one.
    pub fn policy(&self) -> Option<&Arc<Policy>> {
        match self {
            PolicyState::Deny => None,
            PolicyState::Ready(policy) => Some(policy),
        }
    }
}

/// What identifies a version of the file without reading it.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Stamp {
    modified: Option<SystemTime>,
    len: u64,
    inode: u64,
}

fn stamp(path: &Path) -> Option<Stamp> {
    let meta = std::fs::metadata(path).ok()?;
    #[cfg(unix)]
    let inode = std::os::unix::fs::MetadataExt::ino(&meta);
    #[cfg(not(unix))]
    let inode = 0;
    Some(Stamp { modified: meta.modified().ok(), len: meta.len(), inode })
}

/// Why the file could not be used. The parse error keeps only its position and category:
/// serde's message could quote a value from the file.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The file could not be read.
    #[error("cannot read the configuration file: {0}")]
    Read(std::io::ErrorKind),
    /// Not valid JSON or not the expected shape.
    #[error("the configuration is not valid ({category} at line {line}, column {column})")]
    Parse {
        /// syntax, data, eof, io.
        category: &'static str,
        /// Line.
        line: usize,
        /// Column.
        column: usize,
    },
    /// Inconsistent.
    #[error(transparent)]
    Invalid(#[from] ConfigError),
}

/// Reads and compiles the configuration at `path`.
pub fn load(path: &Path, previous_ca: Option<&Arc<Ca>>) -> Result<Policy, LoadError> {
    let bytes = std::fs::read(path).map_err(|e| LoadError::Read(e.kind()))?;
    let file: ConfigFile = serde_json::from_slice(&bytes).map_err(|e| LoadError::Parse {
        category: match e.classify() {
            serde_json::error::Category::Io => "io error",
            serde_json::error::Category::Syntax => "syntax error",
            serde_json::error::Category::Data => "wrong field or type",
            serde_json::error::Category::Eof => "unexpected end",
        },
        line: e.line(),
        column: e.column(),
    })?;
    Ok(Policy::compile(file, previous_ca)?)
}

fn apply(path: &Path, tx: &watch::Sender<Arc<PolicyState>>) {
    let previous_ca = tx.borrow().policy().map(|p| p.ca.clone());
    let state = match load(path, previous_ca.as_ref()) {
        Ok(policy) => {
            tracing::info!(
                config.version = policy.version,
                sandboxes = policy.sandbox_count(),
                "proxy configuration applied"
            );
            PolicyState::Ready(Arc::new(policy))
        }
        Err(error) => {
            tracing::error!(%error, "proxy configuration rejected; denying all access until a valid one arrives");
            PolicyState::Deny
        }
    };
    tx.send_replace(Arc::new(state));
}

/// Follows the configuration file: polled every [`POLL_INTERVAL`], and checked at once by a
/// connection whose credentials the policy in force does not know (the server may have just
/// written the sandbox in: a harness that starts right after must not wait for the next poll).
pub struct Follower {
    path: PathBuf,
    last: parking_lot::Mutex<Option<Stamp>>,
    tx: watch::Sender<Arc<PolicyState>>,
}

impl Follower {
    /// Applies the file if it changed since it was last seen; says whether it did. Blocking
    /// (a `stat`, and when changed a parse and compile).
    pub fn check(&self) -> bool {
        let mut last = self.last.lock();
        let now = stamp(&self.path);
        if now == *last {
            return false;
        }
        *last = now;
        apply(&self.path, &self.tx);
        true
    }
}

/// Loads the file once now, then follows it. Returns the receiver every connection reads, the
/// follower (for [`Follower::check`]) and the polling task (which ends when every receiver is
/// gone, or on abort).
pub fn follow(
    path: PathBuf,
) -> (watch::Receiver<Arc<PolicyState>>, Arc<Follower>, impl std::future::Future<Output = ()> + Send + 'static) {
    let (tx, rx) = watch::channel(Arc::new(PolicyState::Deny));
    let follower = Arc::new(Follower { last: parking_lot::Mutex::new(stamp(&path)), path, tx });
    apply(&follower.path, &follower.tx);
    let polled = Arc::clone(&follower);
    let task = async move {
        let mut interval = tokio::time::interval(POLL_INTERVAL);
        interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            interval.tick().await;
            if polled.tx.is_closed() {
                return;
            }
            // Parsing and minting leaves is CPU work: keep it off the reactor.
            let follower = Arc::clone(&polled);
            let _ = tokio::task::spawn_blocking(move || follower.check()).await;
        }
    };
    (rx, follower, task)
}
