//! Which turns hold a slot under the server's limit on running turns (the counter itself is
//! `supervisor::slots`, shared by every supervisor). Declarative: after each input the core
//! compares what each turn needs with what it holds and asks, takes or gives back the
//! difference.
//!
//! - A turn not yet sent asks for a slot; its prompt goes out only once it holds one.
//! - A turn already in its harness (found running after a restart, or whose question was just
//!   answered) takes one at once, even past the limit.
//! - A turn whose session has a question waiting for a person gives its slot back: waiting costs
//!   nothing.
//! - A turn that ended gives it back (or leaves the queue).

use super::types::{Effect, Now, SlotChange, SlotScope};
use super::{Core, Purpose, TurnState};
use crate::events::{NewEvent, NoticeCode};
use crate::ids::TurnId;

/// Where a queued turn stands (from [`super::Input::SlotQueued`]).
#[derive(Debug, Clone, Copy)]
pub(super) struct Queue {
    pub running: usize,
    pub ahead: usize,
    pub limit: usize,
    pub scope: SlotScope,
}

/// Where a turn stands with its slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlotState {
    /// Asked; it is granted, or the turn waits in the queue.
    Asked,
    /// Held.
    Held,
}

impl Core {
    /// Whether the turn may send its prompt (it holds a slot).
    pub(super) fn holds_slot(&self, turn_id: TurnId) -> bool {
        self.slots.get(&turn_id) == Some(&SlotState::Held)
    }

    /// Asks, takes and gives back slots so that each turn holds what it needs.
    pub(super) fn reconcile_slots(&mut self) {
        let mut changes = Vec::new();
        for turn in &self.turns {
            let waits_for_person =
                self.harness.as_ref().is_some_and(|h| h.questions.values().any(|q| q.session_id == turn.session_id));
            let ending = self.ending.contains_key(&turn.id);
            let needs = !waits_for_person && !ending;
            match (self.slots.get(&turn.id), needs) {
                (None, true) if turn.state == TurnState::Waiting => changes.push(SlotChange::Ask(turn.id)),
                (None, true) => changes.push(SlotChange::Take(turn.id)),
                (Some(SlotState::Held), false) => changes.push(SlotChange::Release(turn.id)),
                _ => {}
            }
        }
        for turn_id in self.slots.keys() {
            if !self.turns.iter().any(|t| t.id == *turn_id) {
                changes.push(SlotChange::Release(*turn_id));
            }
        }
        // A stable order, so that a replay of the same inputs gives the same effects.
        changes.sort_by_key(|c| match c {
            SlotChange::Release(id) => (0, id.0),
            SlotChange::Take(id) => (1, id.0),
            SlotChange::Ask(id) => (2, id.0),
        });
        for change in changes {
            match change {
                SlotChange::Ask(id) => self.slots.insert(id, SlotState::Asked),
                SlotChange::Take(id) => self.slots.insert(id, SlotState::Held),
                SlotChange::Release(id) => self.slots.remove(&id),
            };
            self.effects.push_back(Effect::Slot(change));
        }
    }

    /// The turn got its slot (one that ended meanwhile gives it back at once).
    pub(super) fn on_slot_granted(&mut self, turn_id: TurnId) {
        match self.slots.get_mut(&turn_id) {
            Some(state) => *state = SlotState::Held,
            None => self.effects.push_back(Effect::Slot(SlotChange::Release(turn_id))),
        }
    }

    /// The turn waits for a slot: a `notice` in its session says so, and which limit holds it.
    pub(super) fn on_slot_queued(&mut self, turn_id: TurnId, queue: Queue, _now: Now) {
        let Some(turn) = self.turns.iter().find(|t| t.id == turn_id) else { return };
        let Queue { running, ahead, limit, scope } = queue;
        let whose = match scope {
            SlotScope::Server => {
                format!("the server runs {running} turns, its limit (AGENTHOLD_MAX_RUNNING_TURNS={limit})")
            }
            SlotScope::Workspace => format!(
                "this workspace's agents run {running} turns, its limit (AGENTHOLD_MAX_RUNNING_TURNS_PER_WORKSPACE={limit})"
            ),
            SlotScope::User => format!(
                "the agents of this agent's maker run {running} turns, the limit per user \
                 (AGENTHOLD_MAX_RUNNING_TURNS_PER_USER={limit})"
            ),
        };
        let message = format!("{whose}; this prompt waits for one to end ({ahead} queued before it)");
        let mut event = NewEvent::notice(turn.session_id, NoticeCode::TurnQueued, message);
        if let Some(payload) = event.payload.value_mut().as_object_mut() {
            payload.insert("turn_id".to_owned(), serde_json::json!(turn_id));
            payload.insert("running".to_owned(), serde_json::json!(running));
            payload.insert("ahead".to_owned(), serde_json::json!(ahead));
            payload.insert("limit".to_owned(), serde_json::json!(limit));
            payload.insert("scope".to_owned(), serde_json::json!(scope.as_str()));
        }
        self.persist(Purpose::Other, vec![event], Vec::new());
    }
}
