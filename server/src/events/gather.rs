//! When a small batch waits for company before it is stored — the appender's version of
//! Postgres's `commit_delay` with `commit_siblings`. Many agents trickling (each a few events
//! a second) give the appender batches of two or three events, and each batch costs a statement,
//! a commit and its hand-offs however small it is; waiting [`GATHER_WAIT`] for the others'
//! events, when [`SIBLINGS`] or more sessions have been storing events lately, makes the commits
//! fewer and larger. A lone agent (or two or three) never waits: its events go out at once.
//!
//! Pure: the appender tells it what it stored and when, and asks it before each batch.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use crate::ids::SessionId;

/// How long a small batch waits for more, from its first request's arrival.
pub const GATHER_WAIT: Duration = Duration::from_millis(2);
/// A batch of fewer events than this may wait; a larger one is stored at once.
pub const SMALL_BATCH_EVENTS: usize = 16;
/// Sessions that must have stored events within [`RECENT`] before a small batch waits.
pub const SIBLINGS: usize = 5;
/// How long a session counts as storing after its last stored event.
pub const RECENT: Duration = Duration::from_millis(100);

/// The sessions that stored events lately.
#[derive(Debug, Default)]
pub struct Siblings {
    last_stored: HashMap<SessionId, Instant>,
    last_pruned: Option<Instant>,
}

impl Siblings {
    /// Notes the sessions of a stored batch.
    pub fn stored(&mut self, sessions: impl IntoIterator<Item = SessionId>, now: Instant) {
        let mut previous = None;
        for session in sessions {
            // A flood's batch is thousands of one session's events: noted once.
            if previous != Some(session) {
                self.last_stored.insert(session, now);
                previous = Some(session);
            }
        }
        // Pruned at most twice per RECENT: a thousand sessions are not walked every commit.
        if self.last_pruned.is_none_or(|at| now.saturating_duration_since(at) >= RECENT / 2) {
            self.last_stored.retain(|_, at| now.saturating_duration_since(*at) < RECENT);
            self.last_pruned = Some(now);
        }
    }

    /// Whether a batch of `events` events should wait for more before it is stored.
    pub fn should_wait(&self, events: usize, now: Instant) -> bool {
        events < SMALL_BATCH_EVENTS
            && self
                .last_stored
                .values()
                .filter(|at| now.saturating_duration_since(**at) < RECENT)
                .nth(SIBLINGS - 1)
                .is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sessions(n: usize) -> Vec<SessionId> {
        (0..n).map(|_| SessionId::new()).collect()
    }

    #[test]
    fn a_lone_agent_or_a_few_never_wait() {
        let mut siblings = Siblings::default();
        let now = Instant::now();
        assert!(!siblings.should_wait(1, now), "nothing stored yet");
        let few = sessions(SIBLINGS - 1);
        for step in 0..50u32 {
            let at = now + Duration::from_millis(u64::from(step));
            siblings.stored(few.iter().copied(), at);
            assert!(!siblings.should_wait(1, at), "{} sessions streaming", SIBLINGS - 1);
        }
    }

    #[test]
    fn many_sessions_streaming_make_a_small_batch_wait_but_not_a_large_one() {
        let mut siblings = Siblings::default();
        let now = Instant::now();
        siblings.stored(sessions(SIBLINGS), now);
        assert!(siblings.should_wait(1, now));
        assert!(siblings.should_wait(SMALL_BATCH_EVENTS - 1, now));
        assert!(!siblings.should_wait(SMALL_BATCH_EVENTS, now), "a large batch goes at once");
    }

    #[test]
    fn sessions_that_stopped_storing_stop_counting() {
        let mut siblings = Siblings::default();
        let now = Instant::now();
        siblings.stored(sessions(SIBLINGS), now);
        let later = now + RECENT;
        assert!(!siblings.should_wait(1, later), "none stored within RECENT");
        // A new one storing then prunes the old ones away.
        siblings.stored(sessions(1), later);
        assert_eq!(siblings.last_stored.len(), 1);
        assert!(!siblings.should_wait(1, later));
    }
}
