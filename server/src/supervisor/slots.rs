//! The server-wide limit on running turns (`AGENTHOLD_MAX_RUNNING_TURNS`): a counter of slots
//! shared by every supervisor, and a first-come queue of turns waiting for one.
//!
//! A turn takes a slot before its prompt is sent and gives it back when it ends — or while a
//! question of its session waits for a person (waiting costs nothing, seed 001). A turn that
//! already runs in its harness (one answered, one found running after a restart) takes its slot
//! back at once even past the limit: the harness is already working and holding the answer would
//! add a second wait; only new prompts queue. The queue holds one entry per waiting turn (turns
//! are rows in the database, created by authorized prompts), never bytes from outside.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use tokio::sync::oneshot;

/// The shared counter. `limit == 0` means no limit.
#[derive(Debug)]
pub struct TurnSlots {
    limit: usize,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    running: usize,
    queue: VecDeque<oneshot::Sender<Slot>>,
}

/// A running turn's slot; dropping it gives the slot back (to the first turn in the queue).
#[derive(Debug)]
pub struct Slot {
    slots: Arc<TurnSlots>,
}

/// No slot was free: the turn is queued.
#[derive(Debug)]
pub struct Queued {
    /// Resolves with the slot once the turns ahead took theirs; dropping it leaves the queue.
    pub ticket: oneshot::Receiver<Slot>,
    /// Turns running when it queued.
    pub running: usize,
    /// Turns queued ahead of it.
    pub ahead: usize,
    /// The limit.
    pub limit: usize,
}

impl TurnSlots {
    /// A counter allowing `limit` running turns (0: no limit).
    pub fn new(limit: usize) -> Arc<Self> {
        Arc::new(Self { limit, state: Mutex::new(State::default()) })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic while holding this lock leaves only plain counters behind: keep going.
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A slot for a new turn, or its place in the queue (behind every turn already queued).
    pub fn take(self: &Arc<Self>) -> Result<Slot, Queued> {
        let mut state = self.lock();
        state.queue.retain(|waiter| !waiter.is_closed());
        if self.limit == 0 || (state.queue.is_empty() && state.running < self.limit) {
            state.running += 1;
            crate::metrics::turns(state.running, state.queue.len());
            return Ok(Slot { slots: Arc::clone(self) });
        }
        let (tx, ticket) = oneshot::channel();
        let ahead = state.queue.len();
        state.queue.push_back(tx);
        crate::metrics::turns(state.running, state.queue.len());
        Err(Queued { ticket, running: state.running, ahead, limit: self.limit })
    }

    /// A slot for a turn already running in its harness, even past the limit.
    pub fn force(self: &Arc<Self>) -> Slot {
        let mut state = self.lock();
        state.running += 1;
        crate::metrics::turns(state.running, state.queue.len());
        drop(state);
        Slot { slots: Arc::clone(self) }
    }

    /// Turns holding a slot now.
    pub fn running(&self) -> usize {
        self.lock().running
    }

    /// Turns waiting for one.
    pub fn queued(&self) -> usize {
        self.lock().queue.iter().filter(|w| !w.is_closed()).count()
    }

    /// A slot came back: hand it to the first live waiter, if the limit allows.
    fn release(self: &Arc<Self>) {
        let mut state = self.lock();
        state.running = state.running.saturating_sub(1);
        crate::metrics::turns(state.running, state.queue.len());
        while self.limit == 0 || state.running < self.limit {
            let Some(waiter) = state.queue.pop_front() else { break };
            if waiter.is_closed() {
                continue;
            }
            state.running += 1;
            // Sending cannot block; a waiter that left in between gives the slot back through
            // `Drop`, which needs the lock: release it first.
            drop(state);
            let _ = waiter.send(Slot { slots: Arc::clone(self) });
            return;
        }
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.slots.release();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_limit_never_queues() {
        let slots = TurnSlots::new(0);
        let held: Vec<Slot> = (0..50).map(|_| slots.take().expect("a slot")).collect();
        assert_eq!(slots.running(), 50);
        drop(held);
        assert_eq!(slots.running(), 0);
    }

    #[tokio::test]
    async fn the_limit_queues_first_come_first_served() {
        let slots = TurnSlots::new(2);
        let a = slots.take().expect("first");
        let _b = slots.take().expect("second");
        let first = slots.take().expect_err("third queues");
        assert_eq!((first.running, first.ahead, first.limit), (2, 0, 2));
        let second = slots.take().expect_err("fourth queues");
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
        let slots = TurnSlots::new(1);
        let a = slots.take().expect("first");
        let gone = slots.take().expect_err("queues");
        let next = slots.take().expect_err("queues");
        drop(gone.ticket);
        drop(a);
        let _next = next.ticket.await.expect("the live waiter gets it");
        assert_eq!(slots.running(), 1);
    }

    #[test]
    fn a_new_turn_does_not_jump_the_queue() {
        let slots = TurnSlots::new(1);
        let a = slots.take().expect("first");
        let queued = slots.take().expect_err("queues");
        drop(a);
        // The slot went to the queued turn, not to whoever asks next.
        assert!(slots.take().is_err());
        drop(queued);
    }

    #[test]
    fn forced_slots_count_and_come_back() {
        let slots = TurnSlots::new(1);
        let a = slots.take().expect("first");
        let forced = slots.force();
        assert_eq!(slots.running(), 2);
        let queued = slots.take().expect_err("over the limit: queues");
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
        let slots = TurnSlots::new(1);
        let a = slots.take().expect("first");
        let mut left = slots.take().expect_err("queues");
        let mut next = slots.take().expect_err("queues");
        left.ticket.close();
        drop(a);
        assert!(next.ticket.try_recv().is_ok());
        drop(left);
    }
}
