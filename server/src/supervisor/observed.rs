//! The agents' observed sandbox states, as their supervisors last published them (each after
//! every input it takes), for the API to read without asking the supervisors. An agent without a
//! running supervisor has no entry: nothing of its sandbox is connected to this server, so it is
//! asleep unless the host counts it awake (a wake in flight before its supervisor published).

use std::collections::HashMap;
use std::sync::Mutex;

use super::core::Observed;
use crate::ids::AgentId;

/// The published states.
#[derive(Debug, Default)]
pub struct Observations {
    states: Mutex<HashMap<AgentId, Observed>>,
}

impl Observations {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<AgentId, Observed>> {
        self.states.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Records `agent`'s state (a no-op when unchanged).
    pub fn publish(&self, agent: AgentId, state: &Observed) {
        let mut states = self.lock();
        if states.get(&agent) != Some(state) {
            states.insert(agent, state.clone());
        }
    }

    /// Forgets `agent` (its supervisor ended).
    pub fn forget(&self, agent: AgentId) {
        self.lock().remove(&agent);
    }

    /// `agent`'s last published state.
    pub fn get(&self, agent: AgentId) -> Option<Observed> {
        self.lock().get(&agent).cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn publishes_replace_and_forget_removes() {
        let observations = Observations::default();
        let (a, b) = (AgentId::new(), AgentId::new());
        assert_eq!(observations.get(a), None);
        observations.publish(a, &Observed::Starting);
        observations.publish(b, &Observed::Error("no image".to_owned()));
        observations.publish(a, &Observed::Awake);
        assert_eq!(observations.get(a), Some(Observed::Awake));
        assert_eq!(observations.get(b), Some(Observed::Error("no image".to_owned())));
        observations.forget(a);
        assert_eq!(observations.get(a), None);
    }
}
