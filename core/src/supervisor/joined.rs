//! Consecutive lines of one stdout frame stored by one persist. A harness streaming fast sends
//! many `session/update` lines per tunnel frame; each stored by a persist of its own costs a
//! request to the appender, a commit to wait for and an entry to acknowledge, per line. A line
//! that stores only events joins the persist of the line before it while that persist is still
//! the last effect queued (not yet handed to the shell: the same frame) and stores only events
//! and its stdout range: the range grows, the events are appended, and one commit stores and
//! acknowledges them all, in order.
//!
//! A joined persist the database refuses (one of its lines cannot be stored: a data exception)
//! must not take its good lines with it. Its lines are read again one by one: the connection is
//! dropped (nothing of the range was stored, so the takeover reads from its start), and until the
//! takeover's reading passes the range's end no line joins another — the refused line alone then
//! becomes an error event in its place, as a single line's refusal always did
//! ([`Core::line_rejected`]).

use super::{Core, Effect, Purpose};
use crate::events::NewEvent;
use crate::events::side_effects::SideEffect;

/// Most lines one persist stores (a frame holds at most 1 MiB of stdout; this bounds the
/// events of one appender request when the lines are short).
pub(super) const MAX_JOINED_LINES: u32 = 512;

impl Core {
    /// Adds the events of the line ending at `end` to the persist queued last, when it stores
    /// lines of the current harness up to this line's start and nothing but their events and
    /// range; `false`, changing nothing, when it cannot (the line gets a persist of its own).
    pub(super) fn join_last_persist(&mut self, end: u64, events: &mut Vec<NewEvent>) -> bool {
        let Some(harness) = self.harness.as_mut() else { return false };
        let generation = harness.generation;
        if self.read_singly.is_some_and(|(g, until)| g == generation && end <= until) {
            return false;
        }
        let Some(Effect::Persist { id, events: joined, side, ended }) = self.effects.back_mut() else { return false };
        let [SideEffect::StdoutStored { generation: stored_generation, to, .. }] = side.as_mut_slice() else {
            return false;
        };
        if *stored_generation != generation || !ended.is_empty() {
            return false;
        }
        let Some(Purpose::Line { generation: g, end: last_end, sessions, lines, .. }) = self.in_flight.get_mut(id)
        else {
            return false;
        };
        if *g != generation || *lines >= MAX_JOINED_LINES || !harness.stdout.join_storing(*id, end) {
            return false;
        }
        for event in events.iter() {
            if sessions.last() != Some(&event.session_id) {
                sessions.push(event.session_id);
            }
        }
        joined.append(events);
        *to = end;
        *last_end = end;
        *lines += 1;
        true
    }

    /// A joined persist of harness `generation`'s lines up to `end` was refused: they are read
    /// again, one persist each, from the stored offset (see the module's doc).
    pub(super) fn read_again_singly(&mut self, generation: i64, end: u64) {
        self.read_singly = Some((generation, end));
        self.drop_link("the event log refused a persist of several harness lines; reading them again one by one");
    }
}
