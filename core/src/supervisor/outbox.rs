//! The harness's stdin as the core sends it: every frame gets its offset when it is made, waits
//! for the persist that journals it (record, then send), goes out in offset order within a window
//! of unconfirmed bytes, and is kept until sandboxd reports it written — so a dropped link, a
//! rejected frame or a restart resends the same bytes at the same offsets, never a gap.

use std::collections::VecDeque;

use bytes::Bytes;

use super::PersistId;

/// Most stdin bytes sent but not yet confirmed written (well below sandboxd's own bound).
pub const STDIN_WINDOW_BYTES: u64 = 4 << 20;

#[derive(Debug, Clone)]
struct Frame {
    offset: u64,
    bytes: Bytes,
    /// The persist journaling it; `None` once committed.
    gate: Option<PersistId>,
    sent: bool,
}

impl Frame {
    fn end(&self) -> u64 {
        self.offset + self.bytes.len() as u64
    }
}

/// A frame to send now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Release {
    /// Its offset.
    pub offset: u64,
    /// Its bytes.
    pub bytes: Bytes,
}

/// stdin frames of one harness.
#[derive(Debug, Default)]
pub struct Outbox {
    /// The offset of the next frame.
    next: u64,
    /// What sandboxd confirmed written.
    written: u64,
    frames: VecDeque<Frame>,
}

impl Outbox {
    /// An outbox whose next frame starts at `next`, sandboxd having written `written`.
    pub fn new(next: u64, written: u64) -> Self {
        Self { next, written, frames: VecDeque::new() }
    }

    /// Queues a frame journaled by `gate`; returns its offset.
    pub fn push(&mut self, bytes: Bytes, gate: Option<PersistId>) -> u64 {
        let offset = self.next;
        self.next += bytes.len() as u64;
        self.frames.push_back(Frame { offset, bytes, gate, sent: false });
        offset
    }

    /// Queues a frame that is already journaled at `offset` (a takeover's resend).
    pub fn restore(&mut self, offset: u64, bytes: Bytes) {
        self.next = self.next.max(offset + bytes.len() as u64);
        self.frames.push_back(Frame { offset, bytes, gate: None, sent: false });
    }

    /// The offset just past the last frame.
    pub fn end(&self) -> u64 {
        self.next
    }

    /// What sandboxd confirmed written.
    pub fn written(&self) -> u64 {
        self.written
    }

    /// The journaling persist committed.
    pub fn committed(&mut self, persist: PersistId) {
        for frame in &mut self.frames {
            if frame.gate == Some(persist) {
                frame.gate = None;
            }
        }
    }

    /// Frames waiting for `old` wait for `new` instead; returns them (to journal again).
    pub fn regate(&mut self, old: PersistId, new: PersistId) -> Vec<(u64, Bytes)> {
        let mut moved = Vec::new();
        for frame in &mut self.frames {
            if frame.gate == Some(old) {
                frame.gate = Some(new);
                moved.push((frame.offset, frame.bytes.clone()));
            }
        }
        moved
    }

    /// Whether a frame waits for this persist.
    pub fn waits_for(&self, persist: PersistId) -> bool {
        self.frames.iter().any(|f| f.gate == Some(persist))
    }

    /// sandboxd wrote stdin up to `offset`.
    pub fn confirm_written(&mut self, offset: u64) {
        self.written = self.written.max(offset);
        while self.frames.front().is_some_and(|f| f.end() <= self.written) {
            self.frames.pop_front();
        }
    }

    /// sandboxd takes `expected` next: everything from there goes again. `false` when this
    /// outbox no longer holds the bytes at `expected` (the link must be dropped).
    pub fn rewind(&mut self, expected: u64) -> bool {
        if expected > self.next || self.frames.front().is_some_and(|f| f.offset > expected) {
            return false;
        }
        if self.frames.is_empty() && expected != self.next {
            return false;
        }
        for frame in &mut self.frames {
            if frame.end() > expected {
                frame.sent = false;
            }
        }
        true
    }

    /// Marks every frame unsent (a new link).
    pub fn unsend_all(&mut self) {
        for frame in &mut self.frames {
            frame.sent = false;
        }
    }

    /// Frames that may go now: in order, committed, within the window.
    pub fn release(&mut self) -> Vec<Release> {
        let mut out = Vec::new();
        for frame in &mut self.frames {
            if frame.sent {
                continue;
            }
            if frame.gate.is_some() {
                break;
            }
            let in_flight = frame.offset.saturating_sub(self.written);
            if in_flight > 0 && in_flight + frame.bytes.len() as u64 > STDIN_WINDOW_BYTES {
                break;
            }
            frame.sent = true;
            out.push(Release { offset: frame.offset, bytes: frame.bytes.clone() });
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(text: &'static str) -> Bytes {
        Bytes::from_static(text.as_bytes())
    }

    #[test]
    fn frames_wait_for_their_journal_and_go_in_order() {
        let mut outbox = Outbox::new(0, 0);
        assert_eq!(outbox.push(b("aaaa"), Some(1)), 0);
        assert_eq!(outbox.push(b("bb"), Some(2)), 4);
        outbox.committed(2);
        assert!(outbox.release().is_empty(), "the second frame waits behind the first");
        outbox.committed(1);
        let released = outbox.release();
        assert_eq!(released, vec![Release { offset: 0, bytes: b("aaaa") }, Release { offset: 4, bytes: b("bb") }]);
        assert!(outbox.release().is_empty(), "sent once");
    }

    #[test]
    fn a_rejected_frame_goes_again_from_the_expected_offset() {
        let mut outbox = Outbox::new(0, 0);
        outbox.push(b("aaaa"), None);
        outbox.push(b("bb"), None);
        assert_eq!(outbox.release().len(), 2);
        outbox.confirm_written(4);
        assert!(outbox.rewind(4));
        assert_eq!(outbox.release(), vec![Release { offset: 4, bytes: b("bb") }]);
        assert!(!outbox.rewind(9), "bytes it never had");
        assert!(!outbox.rewind(1), "bytes already confirmed and dropped");
    }

    #[test]
    fn the_window_bounds_unconfirmed_bytes() {
        let mut outbox = Outbox::new(0, 0);
        let big = Bytes::from(vec![b'x'; (STDIN_WINDOW_BYTES / 2) as usize]);
        for _ in 0..4 {
            outbox.push(big.clone(), None);
        }
        assert_eq!(outbox.release().len(), 2);
        outbox.confirm_written(STDIN_WINDOW_BYTES / 2);
        assert_eq!(outbox.release().len(), 1);
    }
}
