//! The limits on running turns, shared by every supervisor of this process: the server's
//! (`AGENTHOLD_MAX_RUNNING_TURNS`), each workspace's (`…_PER_WORKSPACE`) and each user's
//! (`…_PER_USER`: the turns of the agents a user made), and a fair queue of turns waiting for a
//! slot.
//!
//! A turn takes a slot before its prompt is sent and gives it back when it ends — or while a
//! question of its session waits for a person (waiting costs nothing, seed 001). A turn that
//! already runs in its harness (one answered, one found running after a restart) takes its slot
//! back at once even past the limits: the harness is already working and holding the answer would
//! add a second wait; only new prompts queue.
//!
//! Fair: a freed slot goes to the waiting turn whose workspace runs the fewest turns (first come
//! first served between turns of equally busy workspaces), so one workspace with many long turns
//! does not queue every other workspace behind it; a turn whose workspace or user is at its own
//! limit waits without holding up turns of others. The queue holds one entry per waiting turn
//! (turns are rows in the database, created by authorized prompts), never bytes from outside.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use parking_lot::Mutex;
use tokio::sync::oneshot;
use uuid::Uuid;

pub use super::core::SlotScope;

/// Whose turn it is: its agent's workspace and the user who made the agent (`None`: nobody
/// now — the turn counts only against its workspace and the server).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Claimant {
    /// The agent's workspace.
    pub workspace: Uuid,
    /// The agent's maker.
    pub user: Option<Uuid>,
}

/// The limits (each `0`: none).
#[derive(Clone, Copy, Debug, Default)]
pub struct SlotLimits {
    /// Running turns in this server process.
    pub server: usize,
    /// Running turns of one workspace's agents.
    pub per_workspace: usize,
    /// Running turns of the agents one user made.
    pub per_user: usize,
}

/// The shared counters.
#[derive(Debug)]
pub struct TurnSlots {
    limits: SlotLimits,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    running: usize,
    workspaces: HashMap<Uuid, usize>,
    users: HashMap<Uuid, usize>,
    queue: VecDeque<Waiter>,
}

#[derive(Debug)]
struct Waiter {
    claimant: Claimant,
    reply: oneshot::Sender<Slot>,
}

/// A running turn's slot; dropping it gives the slot back (to the queue).
#[derive(Debug)]
pub struct Slot {
    slots: Arc<TurnSlots>,
    claimant: Claimant,
}

/// No slot was free: the turn is queued.
#[derive(Debug)]
pub struct Queued {
    /// Resolves with the slot once it is this turn's turn; dropping it leaves the queue.
    pub ticket: oneshot::Receiver<Slot>,
    /// Turns running under the limit it waits for (the server's, its workspace's or its user's).
    pub running: usize,
    /// Turns queued before it.
    pub ahead: usize,
    /// The limit it waits for.
    pub limit: usize,
    /// Which limit that is.
    pub scope: SlotScope,
}

fn count<K: std::hash::Hash + Eq>(map: &HashMap<K, usize>, key: &K) -> usize {
    map.get(key).copied().unwrap_or(0)
}

impl State {
    /// The limit that keeps `claimant` from a slot now, with its count and value.
    fn blocked(&self, limits: SlotLimits, claimant: Claimant) -> Option<(SlotScope, usize, usize)> {
        let over = |limit: usize, running: usize| limit != 0 && running >= limit;
        let in_workspace = count(&self.workspaces, &claimant.workspace);
        let of_user = claimant.user.map_or(0, |user| count(&self.users, &user));
        if over(limits.per_user, of_user) && claimant.user.is_some() {
            Some((SlotScope::User, of_user, limits.per_user))
        } else if over(limits.per_workspace, in_workspace) {
            Some((SlotScope::Workspace, in_workspace, limits.per_workspace))
        } else if over(limits.server, self.running) {
            Some((SlotScope::Server, self.running, limits.server))
        } else {
            None
        }
    }

    fn add(&mut self, claimant: Claimant) {
        self.running += 1;
        *self.workspaces.entry(claimant.workspace).or_insert(0) += 1;
        if let Some(user) = claimant.user {
            *self.users.entry(user).or_insert(0) += 1;
        }
    }

    fn remove(&mut self, claimant: Claimant) {
        self.running = self.running.saturating_sub(1);
        fn down(map: &mut HashMap<Uuid, usize>, key: Uuid) {
            if let Some(n) = map.get_mut(&key) {
                *n = n.saturating_sub(1);
                if *n == 0 {
                    map.remove(&key);
                }
            }
        }
        down(&mut self.workspaces, claimant.workspace);
        if let Some(user) = claimant.user {
            down(&mut self.users, user);
        }
    }

    /// The next waiter to get a slot: of those no limit keeps, the one whose workspace runs the
    /// fewest turns, the earliest among equals.
    fn next_waiter(&self, limits: SlotLimits) -> Option<usize> {
        self.queue
            .iter()
            .enumerate()
            .filter(|(_, w)| !w.reply.is_closed() && self.blocked(limits, w.claimant).is_none())
            .min_by_key(|(index, w)| (count(&self.workspaces, &w.claimant.workspace), *index))
            .map(|(index, _)| index)
    }
}

impl TurnSlots {
    /// Counters under `limits`.
    pub fn new(limits: SlotLimits) -> Arc<Self> {
        Arc::new(Self { limits, state: Mutex::new(State::default()) })
    }

    /// A slot for a new turn, or its place in the queue.
    pub fn take(self: &Arc<Self>, claimant: Claimant) -> Result<Slot, Queued> {
        let mut state = self.state.lock();
        state.queue.retain(|waiter| !waiter.reply.is_closed());
        // Waiters that no limit keeps would have had the slot already (slots are handed out as
        // they come back), so only this turn's own limits decide.
        let Some((scope, running, limit)) = state.blocked(self.limits, claimant) else {
            state.add(claimant);
            crate::metrics::turns(state.running, state.queue.len());
            return Ok(Slot { slots: Arc::clone(self), claimant });
        };
        let (reply, ticket) = oneshot::channel();
        let ahead = state.queue.len();
        state.queue.push_back(Waiter { claimant, reply });
        crate::metrics::turns(state.running, state.queue.len());
        Err(Queued { ticket, running, ahead, limit, scope })
    }

    /// A slot for a turn already running in its harness, even past the limits.
    pub fn force(self: &Arc<Self>, claimant: Claimant) -> Slot {
        let mut state = self.state.lock();
        state.add(claimant);
        crate::metrics::turns(state.running, state.queue.len());
        drop(state);
        Slot { slots: Arc::clone(self), claimant }
    }

    /// Turns holding a slot now.
    pub fn running(&self) -> usize {
        self.state.lock().running
    }

    /// Turns waiting for one.
    pub fn queued(&self) -> usize {
        self.state.lock().queue.iter().filter(|w| !w.reply.is_closed()).count()
    }

    /// A slot came back: hand slots to the waiters the limits now allow, fairest first.
    fn release(self: &Arc<Self>, claimant: Claimant) {
        let mut handed = Vec::new();
        {
            let mut state = self.state.lock();
            state.remove(claimant);
            while let Some(index) = state.next_waiter(self.limits) {
                let Some(waiter) = state.queue.remove(index) else { break };
                state.add(waiter.claimant);
                handed.push(waiter);
            }
            state.queue.retain(|waiter| !waiter.reply.is_closed());
            crate::metrics::turns(state.running, state.queue.len());
        }
        // Sending cannot block; a waiter that left in between gives its slot back through
        // `Drop`, which needs the lock: it is released by now.
        for waiter in handed {
            let _ = waiter.reply.send(Slot { slots: Arc::clone(self), claimant: waiter.claimant });
        }
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.slots.release(self.claimant);
    }
}
#[cfg(test)]
mod tests {
    use super::*;

    fn server(limit: usize) -> Arc<TurnSlots> {
        TurnSlots::new(SlotLimits { server: limit, ..SlotLimits::default() })
    }

    fn of(workspace: u128, user: u128) -> Claimant {
        Claimant { workspace: Uuid::from_u128(workspace), user: Some(Uuid::from_u128(user)) }
    }

    const A: Claimant = Claimant { workspace: Uuid::from_u128(1), user: None };

    #[test]
    fn no_limit_never_queues() {
        let slots = server(0);
        let held: Vec<Slot> = (0..50).map(|_| slots.take(A).expect("a slot")).collect();
        assert_eq!(slots.running(), 50);
        drop(held);
        assert_eq!(slots.running(), 0);
    }

    #[tokio::test]
    async fn the_limit_queues_first_come_first_served_within_a_workspace() {
        let slots = server(2);
        let a = slots.take(A).expect("first");
        let _b = slots.take(A).expect("second");
        let first = slots.take(A).expect_err("third queues");
        assert_eq!((first.running, first.ahead, first.limit, first.scope), (2, 0, 2, SlotScope::Server));
        let second = slots.take(A).expect_err("fourth queues");
        assert_eq!(second.ahead, 1);
        drop(a);
        let got = first.ticket.await.expect("the first in the queue gets the slot");
        assert_eq!(slots.running(), 2);
        assert_eq!(slots.queued(), 1);
        drop(got);
        let _second = second.ticket.await.expect("then the second");
        assert_eq!(slots.running(), 2);
    }

    #[tokio::test]
    async fn a_waiter_that_left_is_skipped() {
        let slots = server(1);
        let a = slots.take(A).expect("first");
        let gone = slots.take(A).expect_err("queues");
        let next = slots.take(A).expect_err("queues");
        drop(gone.ticket);
        drop(a);
        let _next = next.ticket.await.expect("the live waiter gets it");
        assert_eq!(slots.running(), 1);
    }

    #[test]
    fn a_new_turn_does_not_jump_the_queue() {
        let slots = server(1);
        let a = slots.take(A).expect("first");
        let queued = slots.take(A).expect_err("queues");
        drop(a);
        // The slot went to the queued turn, not to whoever asks next.
        assert!(slots.take(A).is_err());
        drop(queued);
    }

    #[test]
    fn forced_slots_count_and_come_back() {
        let slots = server(1);
        let a = slots.take(A).expect("first");
        let forced = slots.force(A);
        assert_eq!(slots.running(), 2);
        let queued = slots.take(A).expect_err("over the limit: queues");
        drop(forced);
        // Still at the limit (a is running): the queued turn keeps waiting.
        assert_eq!(slots.running(), 1);
        assert_eq!(slots.queued(), 1);
        drop(a);
        assert_eq!(slots.running(), 1, "handed to the queued turn");
        drop(queued);
    }

    #[test]
    fn a_slot_handed_to_a_waiter_that_just_left_goes_to_the_next() {
        let slots = server(1);
        let a = slots.take(A).expect("first");
        let mut left = slots.take(A).expect_err("queues");
        let mut next = slots.take(A).expect_err("queues");
        left.ticket.close();
        drop(a);
        assert!(next.ticket.try_recv().is_ok());
        drop(left);
    }

    #[test]
    fn a_busy_workspace_waits_behind_one_that_runs_less() {
        let slots = server(4);
        let (busy, quiet) = (of(1, 10), of(2, 20));
        let mut held: Vec<Slot> = (0..3).map(|_| slots.take(busy).expect("busy")).collect();
        let quiet_running = slots.take(quiet).expect("quiet");
        // The server is full; the busy workspace queues first, then the quiet one.
        let mut busy_waits: Vec<Queued> = (0..3).map(|_| slots.take(busy).expect_err("queues")).collect();
        let mut quiet_waits = slots.take(quiet).expect_err("queues");
        drop(held.pop());
        // The freed slot goes to the quiet workspace (1 running) before the busy one (2 running),
        // though the busy one queued first.
        let _quiet_second = quiet_waits.ticket.try_recv().expect("the quiet workspace's turn got the slot");
        assert!(busy_waits.iter_mut().all(|q| q.ticket.try_recv().is_err()));
        drop(quiet_running);
        // Now the busy workspace (2) is the only one waiting: first come, first served.
        let _busy_third = busy_waits[0].ticket.try_recv().expect("the first busy waiter");
        assert!(busy_waits[1].ticket.try_recv().is_err());
        assert_eq!(slots.running(), 4);
    }

    #[test]
    fn a_workspace_at_its_limit_waits_without_holding_up_others() {
        let slots = TurnSlots::new(SlotLimits { server: 10, per_workspace: 2, per_user: 0 });
        let (a, b) = (of(1, 10), of(2, 20));
        let first = slots.take(a).expect("a 1");
        let _second = slots.take(a).expect("a 2");
        let mut third = slots.take(a).expect_err("a is at its workspace's limit");
        assert_eq!((third.scope, third.running, third.limit), (SlotScope::Workspace, 2, 2));
        // Another workspace is not behind it.
        let _b = slots.take(b).expect("b runs at once");
        drop(first);
        let _third = third.ticket.try_recv().expect("a's own turn ended: its waiter runs");
        assert_eq!(slots.running(), 3);
    }

    #[test]
    fn a_user_at_its_limit_waits_while_others_in_the_workspace_run() {
        let slots = TurnSlots::new(SlotLimits { server: 10, per_workspace: 10, per_user: 1 });
        let (alice, bob) = (of(1, 10), of(1, 20));
        let held = slots.take(alice).expect("alice");
        let mut waits = slots.take(alice).expect_err("alice is at her limit");
        assert_eq!((waits.scope, waits.limit), (SlotScope::User, 1));
        let _bob = slots.take(bob).expect("bob runs at once");
        // A turn of a nobody-made agent counts only against its workspace and the server.
        let _nobody = slots.take(Claimant { workspace: Uuid::from_u128(1), user: None }).expect("no user");
        drop(held);
        let _second = waits.ticket.try_recv().expect("her first ended: her second runs");
        assert_eq!(slots.running(), 3);
    }

    #[test]
    fn forced_slots_count_against_workspace_and_user() {
        let slots = TurnSlots::new(SlotLimits { server: 0, per_workspace: 1, per_user: 0 });
        let forced = slots.force(of(1, 10));
        let _second = slots.force(of(1, 10));
        let waits = slots.take(of(1, 11)).expect_err("the workspace holds two, over its limit");
        assert_eq!((waits.scope, waits.running), (SlotScope::Workspace, 2));
        drop(forced);
        assert_eq!(slots.queued(), 1, "still at the limit: one forced slot holds it");
    }
}
