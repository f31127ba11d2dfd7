//! What one host holds: which agents' sandboxes are awake (bounded by `AGENTHOLD_MAX_AWAKE`), when
//! each was last used, and which have a terminal open. Wakes take a slot before any container is
//! made or started, and wait for one when the host is full; sleeps, deletions and containers that
//! stop on their own give it back. Auto-sleep reads the idle times from here.
//!
//! In memory: after a restart the supervisors learn again which sandboxes run (a wake finding its
//! container running takes its slot without waiting).

use std::collections::HashMap;
use std::time::Instant;

use parking_lot::Mutex;
use tokio::sync::Notify;

use crate::ids::AgentId;

/// One awake (or waking) sandbox.
#[derive(Debug, Clone, Copy)]
struct Awake {
    /// The last time it was used (woken, prompted, its terminal closed, a stream opened).
    last_used: Instant,
    /// Terminals open on it.
    terminals: u32,
}

/// The host's awake sandboxes.
#[derive(Debug)]
pub struct Host {
    /// At most this many awake at once (`None`: no limit).
    max_awake: Option<usize>,
    awake: Mutex<HashMap<AgentId, Awake>>,
    /// Woken whenever a slot is given back.
    freed: Notify,
}

impl Host {
    /// A host allowing `max_awake` awake sandboxes (`None`: any number).
    pub fn new(max_awake: Option<usize>) -> Self {
        Self { max_awake, awake: Mutex::default(), freed: Notify::new() }
    }

    /// Takes a slot for `agent` if it has none and one is free; whether it has one now.
    pub fn try_take(&self, agent: AgentId, now: Instant) -> bool {
        let mut awake = self.awake.lock();
        if let Some(entry) = awake.get_mut(&agent) {
            entry.last_used = now;
            return true;
        }
        if self.max_awake.is_some_and(|max| awake.len() >= max) {
            return false;
        }
        awake.insert(agent, Awake { last_used: now, terminals: 0 });
        crate::metrics::sandboxes_awake(awake.len());
        true
    }

    /// Whether `agent` is awake or a slot is free for it (a wake would not wait).
    pub fn has_room_for(&self, agent: AgentId) -> bool {
        let awake = self.awake.lock();
        awake.contains_key(&agent) || self.max_awake.is_none_or(|max| awake.len() < max)
    }

    /// Free slots (`None`: no limit).
    pub fn free(&self) -> Option<usize> {
        let awake = self.awake.lock().len();
        self.max_awake.map(|max| max.saturating_sub(awake))
    }

    /// Takes a slot even past the limit (a sandbox found running: it is awake whatever the limit).
    pub fn take_running(&self, agent: AgentId, now: Instant) {
        let mut awake = self.awake.lock();
        awake.entry(agent).or_insert(Awake { last_used: now, terminals: 0 });
        crate::metrics::sandboxes_awake(awake.len());
    }

    /// Takes a slot for `agent`, waiting for one to be given back when the host is full;
    /// `on_wait` runs once, when it first has to wait.
    pub async fn take(&self, agent: AgentId, on_wait: impl FnOnce()) {
        let mut on_wait = Some(on_wait);
        loop {
            // Registered before the check, so a slot given back in between is not missed.
            let freed = self.freed.notified();
            tokio::pin!(freed);
            freed.as_mut().enable();
            if self.try_take(agent, Instant::now()) {
                return;
            }
            if let Some(on_wait) = on_wait.take() {
                on_wait();
            }
            freed.await;
        }
    }

    /// Gives `agent`'s slot back (it slept, was deleted, or its container stopped).
    pub fn give_back(&self, agent: AgentId) {
        let mut awake = self.awake.lock();
        if awake.remove(&agent).is_some() {
            crate::metrics::sandboxes_awake(awake.len());
            drop(awake);
            self.freed.notify_waiters();
        }
    }

    /// `agent` was used now (only counts while it is awake).
    pub fn touch(&self, agent: AgentId, now: Instant) {
        if let Some(entry) = self.awake.lock().get_mut(&agent) {
            entry.last_used = now;
        }
    }

    /// A terminal opened on `agent`'s sandbox.
    pub fn terminal_opened(&self, agent: AgentId, now: Instant) {
        if let Some(entry) = self.awake.lock().get_mut(&agent) {
            entry.terminals += 1;
            entry.last_used = now;
        }
    }

    /// A terminal on `agent`'s sandbox closed.
    pub fn terminal_closed(&self, agent: AgentId, now: Instant) {
        if let Some(entry) = self.awake.lock().get_mut(&agent) {
            entry.terminals = entry.terminals.saturating_sub(1);
            entry.last_used = now;
        }
    }

    /// The awake agents with no terminal open, and when each was last used.
    pub fn idle_candidates(&self) -> Vec<(AgentId, Instant)> {
        self.awake.lock().iter().filter(|(_, a)| a.terminals == 0).map(|(id, a)| (*id, a.last_used)).collect()
    }

    /// Whether `agent` holds a slot (awake or waking).
    pub fn is_awake(&self, agent: AgentId) -> bool {
        self.awake.lock().contains_key(&agent)
    }

    /// How many are awake.
    pub fn awake(&self) -> usize {
        self.awake.lock().len()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;

    #[test]
    fn slots_are_bounded_and_given_back() {
        let host = Host::new(Some(2));
        let (a, b, c) = (AgentId::new(), AgentId::new(), AgentId::new());
        let now = Instant::now();
        assert!(host.try_take(a, now) && host.try_take(b, now));
        assert!(host.try_take(a, now), "an awake agent keeps its slot");
        assert!(!host.try_take(c, now), "full");
        assert!(!host.has_room_for(c) && host.has_room_for(a));
        host.take_running(c, now);
        assert_eq!(host.awake(), 3, "a running sandbox counts whatever the limit");
        host.give_back(a);
        host.give_back(c);
        assert!(host.try_take(c, now));
        assert!(Host::new(None).try_take(a, now));
    }

    #[test]
    fn terminals_keep_an_agent_out_of_the_idle_candidates() {
        let host = Host::new(None);
        let (a, b) = (AgentId::new(), AgentId::new());
        let start = Instant::now();
        host.try_take(a, start);
        host.try_take(b, start);
        host.terminal_opened(a, start);
        assert_eq!(host.idle_candidates().iter().map(|(id, _)| *id).collect::<Vec<_>>(), vec![b]);
        let later = start + Duration::from_secs(5);
        host.terminal_closed(a, later);
        host.touch(b, later);
        assert!(host.idle_candidates().iter().all(|(_, at)| *at == later));
        host.touch(AgentId::new(), later); // asleep: ignored
        assert_eq!(host.awake(), 2);
    }

    #[tokio::test]
    async fn a_wake_waits_for_a_slot_and_says_so_once() {
        let host = Arc::new(Host::new(Some(1)));
        let (a, b) = (AgentId::new(), AgentId::new());
        host.take(a, || panic!("a free slot needs no wait")).await;
        let waited = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let waiter = {
            let (host, waited) = (Arc::clone(&host), Arc::clone(&waited));
            tokio::spawn(async move {
                host.take(b, || {
                    waited.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                })
                .await;
            })
        };
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!waiter.is_finished(), "the host is full");
        host.give_back(a);
        tokio::time::timeout(Duration::from_secs(5), waiter).await.expect("woken").expect("task");
        assert_eq!(waited.load(std::sync::atomic::Ordering::SeqCst), 1);
        assert_eq!(host.idle_candidates().iter().map(|(id, _)| *id).collect::<Vec<_>>(), vec![b]);
    }
}
