//! The re-check of open WebSockets' credentials, shared: every open stream, inbox and terminal
//! asks every couple of seconds whether its token or browser session still holds; sockets of the
//! same credential (a script's token watching thirty sessions, a browser's tabs) share one
//! answer for [`FRESH`], so the database sees one query per credential, not one per socket.

use std::collections::HashMap;
use std::sync::{LazyLock, Mutex};
use std::time::{Duration, Instant};

use super::Credential;

/// How long an answer is shared. Shorter than the sockets' check interval, so a revocation
/// closes every socket within that interval plus this.
pub const FRESH: Duration = Duration::from_secs(1);

/// Answers kept at most; past it the stale ones are dropped, and if all are fresh the oldest.
const MAX_ENTRIES: usize = 4096;

static RECENT: LazyLock<Mutex<HashMap<Credential, (Instant, bool)>>> = LazyLock::new(Mutex::default);

/// A fresh answer for `credential`, if one was recorded within [`FRESH`] of `now`.
pub fn recent(credential: Credential, now: Instant) -> Option<bool> {
    let recent = RECENT.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    recent.get(&credential).filter(|(at, _)| now.duration_since(*at) < FRESH).map(|(_, valid)| *valid)
}

/// Records an answer read from the database at `now`.
pub fn record(credential: Credential, valid: bool, now: Instant) {
    let mut recent = RECENT.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    if recent.len() >= MAX_ENTRIES {
        recent.retain(|_, (at, _)| now.duration_since(*at) < FRESH);
        if recent.len() >= MAX_ENTRIES
            && let Some(oldest) = recent.iter().min_by_key(|(_, (at, _))| *at).map(|(key, _)| *key)
        {
            recent.remove(&oldest);
        }
    }
    recent.insert(credential, (now, valid));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_is_shared_while_fresh_then_asked_again() {
        let credential = Credential::Token(uuid::Uuid::new_v4());
        let now = Instant::now();
        assert_eq!(recent(credential, now), None);
        record(credential, false, now);
        assert_eq!(recent(credential, now + FRESH / 2), Some(false));
        assert_eq!(recent(credential, now + FRESH), None);
        assert_eq!(recent(Credential::Session(uuid::Uuid::new_v4()), now), None, "per credential");
    }

    #[test]
    fn the_table_stays_bounded() {
        let now = Instant::now();
        for _ in 0..MAX_ENTRIES + 10 {
            record(Credential::Token(uuid::Uuid::new_v4()), true, now);
        }
        assert!(RECENT.lock().map(|r| r.len()).unwrap_or(0) <= MAX_ENTRIES);
    }
}
