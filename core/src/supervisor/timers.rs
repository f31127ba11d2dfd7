//! Time in the core: the earliest deadline ([`Core::poll_timeout`]) and what fires when it is
//! due ([`Core::handle_timeout`]), and the harness's delayed stdout acknowledgement.

use std::time::Instant;

use super::{Core, Effect, FailureCode, LinkState, Now, Outbound, Timer, ToSandboxd};

impl Core {
    /// The earliest deadline and why.
    pub fn poll_timeout(&self) -> Option<(Instant, Timer)> {
        let mut due: Vec<(Instant, Timer)> = Vec::new();
        if self.link == LinkState::Down
            && !self.database_down
            && let Some(at) = self.reconnect_at
        {
            due.push((at, Timer::Reconnect));
        }
        if let Some(harness) = &self.harness {
            if let Some(at) = harness.stdout.ack_due()
                && self.current_link().is_some()
            {
                due.push((at, Timer::Ack));
            }
            if let Some(at) = harness.start_deadline {
                due.push((at, Timer::HarnessStart));
            }
            if let Some(at) = harness.pending.values().filter_map(|p| p.deadline).min() {
                due.push((at, Timer::Request));
            }
        }
        if let Some(at) = self.turns.iter().filter_map(|t| t.kill_at.or(t.deadline)).min() {
            due.push((at, Timer::Turn));
        }
        due.into_iter().min_by_key(|(at, timer)| (*at, *timer as u8))
    }

    /// Fires what is due at `now` (in [`Timer`] order); a no-op when nothing is.
    pub fn handle_timeout(&mut self, now: Now) {
        if self.is_destroyed() {
            return;
        }
        if self.link == LinkState::Down && !self.database_down && self.reconnect_at.is_some_and(|at| at <= now.mono) {
            self.reconnect_at = None;
            self.on_reconnect_expired(now);
        }
        if self.harness.as_ref().and_then(|h| h.start_deadline).is_some_and(|at| at <= now.mono) {
            self.harness_failed(FailureCode::HarnessTimeout, "the harness did not start in time", true, now);
        }
        let late = self.harness.as_ref().and_then(|h| {
            h.pending
                .iter()
                .filter(|(_, p)| p.deadline.is_some_and(|at| at <= now.mono))
                .map(|(id, p)| (id.clone(), p.what.clone()))
                .next()
        });
        if let Some((id, what)) = late {
            let text = format!("the harness did not answer in time ({what:?}, request {id})");
            self.harness_failed(FailureCode::HarnessTimeout, &text, true, now);
        }
        self.on_turn_deadlines(now);
        self.acknowledge(now);
        self.advance(now);
        self.orphaned.clear();
        self.reconcile_slots();
    }

    /// Tells sandboxd how far it may forget stdout, when the acknowledgement is due
    /// (`Stdout::acknowledge`: at once past a size, else after `Timeouts::ack_delay`).
    pub(super) fn acknowledge(&mut self, now: Now) {
        if let Some(link) = self.current_link()
            && let Some(harness) = self.harness.as_mut()
            && let Some(offset) = harness.stdout.acknowledge(now.mono, self.timeouts.ack_delay)
        {
            let channel = harness.channel;
            self.effects.push_back(Effect::Send { link, out: Outbound::Control(ToSandboxd::Ack { channel, offset }) });
        }
    }
}
