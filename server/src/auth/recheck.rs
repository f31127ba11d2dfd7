//! The re-check of open WebSockets, shared: every open stream, inbox and terminal asks every
//! couple of seconds whether its token or browser session still holds, and whether its user still
//! has the role the socket needs in the resource's workspace. Sockets of the same credential (a
//! script's token watching thirty sessions, a browser's tabs) and of the same user and workspace
//! share one answer for [`FRESH`], so the database sees one query per credential and per
//! membership, not one per socket.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::LazyLock;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use super::Credential;
use crate::store::users::Role;

/// How long an answer is shared. Shorter than the sockets' check interval, so a revocation or a
/// removal closes every socket within that interval plus this.
pub const FRESH: Duration = Duration::from_secs(1);

/// Answers kept at most per table; past it the stale ones are dropped, and if all are fresh the
/// oldest.
const MAX_ENTRIES: usize = 4096;

/// Recent answers by key.
struct Answers<K, V>(LazyLock<Mutex<HashMap<K, (Instant, V)>>>);

impl<K: Eq + Hash + Copy, V: Copy> Answers<K, V> {
    const fn new() -> Self {
        Self(LazyLock::new(Mutex::default))
    }

    fn recent(&self, key: K, now: Instant) -> Option<V> {
        let recent = self.0.lock();
        recent.get(&key).filter(|(at, _)| now.duration_since(*at) < FRESH).map(|(_, value)| *value)
    }

    fn record(&self, key: K, value: V, now: Instant) {
        let mut recent = self.0.lock();
        if recent.len() >= MAX_ENTRIES {
            recent.retain(|_, (at, _)| now.duration_since(*at) < FRESH);
            if recent.len() >= MAX_ENTRIES
                && let Some(oldest) = recent.iter().min_by_key(|(_, (at, _))| *at).map(|(key, _)| *key)
            {
                recent.remove(&oldest);
            }
        }
        recent.insert(key, (now, value));
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.0.lock().len()
    }
}

static CREDENTIALS: Answers<Credential, bool> = Answers::new();
static ROLES: Answers<(uuid::Uuid, uuid::Uuid), Option<Role>> = Answers::new();

/// A fresh answer for `credential`, if one was recorded within [`FRESH`] of `now`.
pub fn recent(credential: Credential, now: Instant) -> Option<bool> {
    CREDENTIALS.recent(credential, now)
}

/// Records an answer read from the database at `now`.
pub fn record(credential: Credential, valid: bool, now: Instant) {
    CREDENTIALS.record(credential, valid, now);
}

/// A fresh answer for the role of `user` in `workspace` (`Some(None)`: not a member).
pub fn recent_role(user: uuid::Uuid, workspace: uuid::Uuid, now: Instant) -> Option<Option<Role>> {
    ROLES.recent((user, workspace), now)
}

/// Records the role of `user` in `workspace` read at `now`.
pub fn record_role(user: uuid::Uuid, workspace: uuid::Uuid, role: Option<Role>, now: Instant) {
    ROLES.record((user, workspace), role, now);
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
        let (user, workspace) = (uuid::Uuid::new_v4(), uuid::Uuid::new_v4());
        assert_eq!(recent_role(user, workspace, now), None);
        record_role(user, workspace, None, now);
        assert_eq!(recent_role(user, workspace, now), Some(None), "not a member, remembered");
        assert_eq!(recent_role(user, uuid::Uuid::new_v4(), now), None, "per workspace");
        assert_eq!(recent_role(user, workspace, now + FRESH), None);
    }

    #[test]
    fn the_table_stays_bounded() {
        let now = Instant::now();
        for _ in 0..MAX_ENTRIES + 10 {
            record(Credential::Token(uuid::Uuid::new_v4()), true, now);
        }
        assert!(CREDENTIALS.len() <= MAX_ENTRIES);
    }
}
