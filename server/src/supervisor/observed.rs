//! The agents' observed sandbox states, as their supervisors last published them (each after
//! every input it takes), for the API to read without asking the supervisors. An agent without a
//! running supervisor has no entry: nothing of its sandbox is connected to this server, so it is
//! asleep unless the host counts it awake (a wake in flight before its supervisor published).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;

use super::core::Observed;
use crate::ids::AgentId;

/// Which run of an agent's supervisor published (a supervisor that ends must not forget what
/// the next one, started meanwhile, published).
pub type Publisher = u64;

/// The published states.
#[derive(Debug, Default)]
pub struct Observations {
    states: Mutex<HashMap<AgentId, (Publisher, Observed)>>,
    next: AtomicU64,
}

impl Observations {
    /// A new supervisor run's name.
    pub fn publisher(&self) -> Publisher {
        self.next.fetch_add(1, Ordering::Relaxed)
    }

    /// Records `agent`'s state as `by` observes it (a no-op when unchanged).
    pub fn publish(&self, agent: AgentId, by: Publisher, state: &Observed) {
        let mut states = self.states.lock();
        if states.get(&agent).is_none_or(|(old_by, old)| *old_by != by || old != state) {
            states.insert(agent, (by, state.clone()));
        }
    }

    /// Forgets what `by` published of `agent` (its supervisor ended); a later run's stays.
    pub fn forget(&self, agent: AgentId, by: Publisher) {
        let mut states = self.states.lock();
        if states.get(&agent).is_some_and(|(owner, _)| *owner == by) {
            states.remove(&agent);
        }
    }

    /// `agent`'s last published state.
    pub fn get(&self, agent: AgentId) -> Option<Observed> {
        self.states.lock().get(&agent).map(|(_, state)| state.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn publishes_replace_and_forget_removes_only_its_own() {
        let observations = Observations::default();
        let (a, b) = (AgentId::new(), AgentId::new());
        let (first, second) = (observations.publisher(), observations.publisher());
        assert_ne!(first, second);
        assert_eq!(observations.get(a), None);
        observations.publish(a, first, &Observed::Starting);
        observations.publish(b, first, &Observed::Error("no image".to_owned()));
        observations.publish(a, first, &Observed::Awake);
        assert_eq!(observations.get(a), Some(Observed::Awake));
        assert_eq!(observations.get(b), Some(Observed::Error("no image".to_owned())));
        observations.forget(a, first);
        assert_eq!(observations.get(a), None);
        // A supervisor that ends after the next one started leaves the next one's state.
        observations.publish(b, second, &Observed::Asleep);
        observations.forget(b, first);
        assert_eq!(observations.get(b), Some(Observed::Asleep));
    }
}
