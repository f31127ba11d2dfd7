//! The harness's stdout as the core sees it: bytes at offsets in, complete lines out (each byte
//! scanned once), and the acknowledgement FIFO — sandboxd may forget a byte only once every line
//! before it is either stored or had nothing to store. Acknowledgements are coalesced: one goes
//! out at once when [`ACK_EAGER_BYTES`] have become forgettable, else a delay
//! (`Timeouts::ack_delay`) after the first that waits — a harness streaming a line every few
//! milliseconds costs one message back per delay, not one per line. sandboxd holds up to 64 MiB
//! unacknowledged, so the delay never stalls its reader.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use super::PersistId;

/// Forgettable bytes that are acknowledged at once.
pub const ACK_EAGER_BYTES: u64 = 256 << 10;

/// Longest line a harness may print; a longer one is a protocol error (documented in
/// docs/design.md: it bounds the server's memory per harness).
pub const MAX_LINE_BYTES: usize = 16 << 20;

/// stdout that cannot be read on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StdoutError {
    /// A frame started past the bytes received: bytes in between were lost.
    Gap {
        /// Where the frame started.
        offset: u64,
        /// What was expected.
        expected: u64,
    },
    /// A line grew past [`MAX_LINE_BYTES`].
    LineTooLong,
}

/// One complete line (without its newline) and the offset just past its newline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    /// The bytes.
    pub bytes: Vec<u8>,
    /// The offset of its first byte.
    pub start: u64,
    /// The offset just past its newline.
    pub end: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Entry {
    /// Lines up to `end` need nothing more.
    Done { end: u64 },
    /// The line ending at `end` waits for its persist.
    Storing { end: u64, persist: PersistId },
}

/// Framing and acknowledgement state of one harness's stdout.
#[derive(Debug)]
pub struct Stdout {
    /// Bytes seen (including the partial last line).
    received: u64,
    /// The partial last line.
    partial: Vec<u8>,
    /// Lines in offset order whose acknowledgement is not yet sent.
    entries: VecDeque<Entry>,
    /// Where the done prefix ends: what sandboxd may forget.
    acked: u64,
    /// What sandboxd was last told it may forget.
    ack_sent: u64,
    /// When the acknowledgement of `ack_sent..acked` is sent at the latest.
    ack_due: Option<Instant>,
    /// The end of the last line handed to a persist: the stored offset the next persisted line
    /// chains from.
    persisted_to: u64,
}

impl Stdout {
    /// stdout read from `from` (everything before is stored or acknowledged); `stored` is the
    /// offset the database holds.
    pub fn new(from: u64, stored: u64) -> Self {
        Self {
            received: from,
            partial: Vec::new(),
            entries: VecDeque::new(),
            acked: from,
            ack_sent: from,
            ack_due: None,
            persisted_to: stored,
        }
    }

    /// Bytes received so far.
    pub fn received(&self) -> u64 {
        self.received
    }

    /// The acknowledged offset.
    pub fn acked(&self) -> u64 {
        self.acked
    }

    /// Whether every received complete line is acknowledged (nothing in flight).
    pub fn settled(&self) -> bool {
        self.entries.is_empty()
    }

    /// Takes a frame; returns the lines it completes. Resent bytes already received are skipped.
    pub fn push(&mut self, offset: u64, payload: &[u8]) -> Result<Vec<Line>, StdoutError> {
        let end = offset + payload.len() as u64;
        if end <= self.received {
            return Ok(Vec::new());
        }
        if offset > self.received {
            return Err(StdoutError::Gap { offset, expected: self.received });
        }
        let skip = usize::try_from(self.received - offset).unwrap_or(usize::MAX).min(payload.len());
        let fresh = &payload[skip..];
        let mut lines = Vec::new();
        let mut line_start = self.received - self.partial.len() as u64;
        let mut rest = fresh;
        while let Some(newline) = rest.iter().position(|b| *b == b'\n') {
            let mut bytes = std::mem::take(&mut self.partial);
            bytes.extend_from_slice(&rest[..newline]);
            if bytes.len() > MAX_LINE_BYTES {
                return Err(StdoutError::LineTooLong);
            }
            let line_end = line_start + bytes.len() as u64 + 1;
            lines.push(Line { bytes, start: line_start, end: line_end });
            line_start = line_end;
            rest = &rest[newline + 1..];
        }
        if self.partial.len() + rest.len() > MAX_LINE_BYTES {
            return Err(StdoutError::LineTooLong);
        }
        self.partial.extend_from_slice(rest);
        self.received = end;
        Ok(lines)
    }

    /// A line that stores nothing: acknowledged once the lines before it are.
    pub fn nothing_to_store(&mut self, end: u64) {
        match self.entries.back_mut() {
            Some(Entry::Done { end: last }) => *last = end,
            _ => self.entries.push_back(Entry::Done { end }),
        }
    }

    /// A line whose events go to `persist`; returns the stored offset it chains from.
    pub fn storing(&mut self, end: u64, persist: PersistId) -> u64 {
        self.entries.push_back(Entry::Storing { end, persist });
        std::mem::replace(&mut self.persisted_to, end)
    }

    /// The next line, ending at `end`, joins `persist`, the last line's (see
    /// `supervisor::joined`): `false`, changing nothing, unless the last entry is that persist's.
    pub fn join_storing(&mut self, persist: PersistId, end: u64) -> bool {
        match self.entries.back_mut() {
            Some(Entry::Storing { end: last, persist: p }) if *p == persist => {
                *last = end;
                self.persisted_to = end;
                true
            }
            _ => false,
        }
    }

    /// A persist committed. Commits mostly arrive in order, so the entry is found near the front.
    pub fn stored(&mut self, persist: PersistId) {
        if let Some(entry) =
            self.entries.iter_mut().find(|e| matches!(e, Entry::Storing { persist: p, .. } if *p == persist))
            && let Entry::Storing { end, .. } = *entry
        {
            *entry = Entry::Done { end };
        }
    }

    /// A line's persist was replaced by another.
    pub fn replace(&mut self, old: PersistId, new: PersistId) {
        if let Some(Entry::Storing { persist, .. }) =
            self.entries.iter_mut().find(|e| matches!(e, Entry::Storing { persist: p, .. } if *p == old))
        {
            *persist = new;
        }
    }

    /// Whether a persist belongs to a line of this stdout still waiting.
    pub fn waits_for(&self, persist: PersistId) -> bool {
        self.entries.iter().any(|e| matches!(e, Entry::Storing { persist: p, .. } if *p == persist))
    }

    /// Moves the acknowledgement over the done prefix; `Some(offset)` when one is to be sent now:
    /// [`ACK_EAGER_BYTES`] or more are forgettable since the last one sent, or the first that
    /// waits has waited `delay` (see [`Self::ack_due`]).
    pub fn acknowledge(&mut self, now: Instant, delay: Duration) -> Option<u64> {
        while let Some(Entry::Done { end }) = self.entries.front().copied() {
            self.acked = end;
            self.entries.pop_front();
        }
        if self.acked <= self.ack_sent {
            return None;
        }
        let due = *self.ack_due.get_or_insert(now + delay);
        if self.acked - self.ack_sent < ACK_EAGER_BYTES && now < due {
            return None;
        }
        self.ack_sent = self.acked;
        self.ack_due = None;
        Some(self.acked)
    }

    /// When a waiting acknowledgement is due.
    pub fn ack_due(&self) -> Option<Instant> {
        self.ack_due
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ACK_DELAY: Duration = Duration::from_millis(50);

    #[test]
    fn frames_split_anywhere_give_the_same_lines() {
        let text = b"{\"a\":1}\n\n{\"b\":2}\nrest";
        for cut in 0..text.len() {
            let mut stdout = Stdout::new(0, 0);
            let mut lines = stdout.push(0, &text[..cut]).expect("first part");
            lines.extend(stdout.push(cut as u64, &text[cut..]).expect("second part"));
            let got: Vec<_> = lines.iter().map(|l| (l.bytes.clone(), l.start, l.end)).collect();
            assert_eq!(got, vec![(b"{\"a\":1}".to_vec(), 0, 8), (Vec::new(), 8, 9), (b"{\"b\":2}".to_vec(), 9, 17)]);
            assert_eq!(stdout.received(), text.len() as u64);
        }
    }

    #[test]
    fn resent_bytes_are_skipped_and_a_gap_is_an_error() {
        let mut stdout = Stdout::new(0, 0);
        assert_eq!(stdout.push(0, b"ab").expect("ok").len(), 0);
        let lines = stdout.push(0, b"abc\n").expect("overlap");
        assert_eq!(lines[0].bytes, b"abc");
        assert!(stdout.push(0, b"abc\n").expect("duplicate").is_empty());
        assert_eq!(stdout.push(9, b"x"), Err(StdoutError::Gap { offset: 9, expected: 4 }));
    }

    #[test]
    fn a_line_over_the_limit_is_an_error() {
        let mut stdout = Stdout::new(0, 0);
        let chunk = vec![b'x'; 1 << 20];
        let mut offset = 0;
        let result = loop {
            match stdout.push(offset, &chunk) {
                Ok(_) => offset += chunk.len() as u64,
                Err(error) => break error,
            }
        };
        assert_eq!(result, StdoutError::LineTooLong);
        assert!(offset <= MAX_LINE_BYTES as u64);
    }

    #[test]
    fn acks_follow_the_committed_prefix_whatever_the_completion_order() {
        let now = Instant::now();
        let later = now + ACK_DELAY;
        let mut stdout = Stdout::new(0, 0);
        assert_eq!(stdout.storing(10, 1), 0);
        stdout.nothing_to_store(11);
        assert_eq!(stdout.storing(20, 2), 10);
        assert_eq!(stdout.storing(30, 3), 20);
        stdout.stored(3);
        assert_eq!(stdout.acknowledge(later, ACK_DELAY), None);
        assert_eq!(stdout.ack_due(), None, "nothing forgettable: nothing waits");
        stdout.stored(1);
        assert_eq!(stdout.acknowledge(now, ACK_DELAY), None, "small: waits");
        assert_eq!(stdout.ack_due(), Some(later));
        assert_eq!(stdout.acknowledge(later, ACK_DELAY), Some(11));
        stdout.stored(2);
        assert_eq!(stdout.acknowledge(later, ACK_DELAY), None);
        assert_eq!(stdout.acknowledge(later + ACK_DELAY, ACK_DELAY), Some(30));
        assert!(stdout.settled());
        assert_eq!(stdout.ack_due(), None);
    }

    #[test]
    fn a_waiting_ack_keeps_its_first_deadline_and_a_large_one_goes_at_once() {
        let now = Instant::now();
        let mut stdout = Stdout::new(0, 0);
        stdout.nothing_to_store(100);
        assert_eq!(stdout.acknowledge(now, ACK_DELAY), None);
        // More arrives later: the deadline stays the first one's, so acks flow under a stream.
        stdout.nothing_to_store(200);
        assert_eq!(stdout.acknowledge(now + ACK_DELAY / 2, ACK_DELAY), None);
        assert_eq!(stdout.ack_due(), Some(now + ACK_DELAY));
        stdout.nothing_to_store(200 + ACK_EAGER_BYTES);
        assert_eq!(
            stdout.acknowledge(now + ACK_DELAY / 2, ACK_DELAY),
            Some(200 + ACK_EAGER_BYTES),
            "past the size: at once"
        );
        assert_eq!(stdout.ack_due(), None);
    }

    #[test]
    fn a_line_joins_only_the_persist_of_the_last_entry() {
        let now = Instant::now();
        let mut stdout = Stdout::new(0, 0);
        assert_eq!(stdout.storing(10, 1), 0);
        assert!(stdout.join_storing(1, 20));
        assert!(!stdout.join_storing(2, 30), "another persist's");
        stdout.nothing_to_store(25);
        assert!(!stdout.join_storing(1, 30), "a blank line came between");
        assert_eq!(stdout.storing(30, 2), 20, "the joined line moved the stored chain's end");
        stdout.stored(1);
        assert_eq!(stdout.acknowledge(now, Duration::ZERO), Some(25), "the joined line is acknowledged with it");
    }

    #[test]
    fn blank_lines_coalesce_into_one_entry() {
        let now = Instant::now();
        let mut stdout = Stdout::new(0, 0);
        stdout.storing(5, 1);
        for end in 6..100_000 {
            stdout.nothing_to_store(end);
        }
        assert_eq!(stdout.entries.len(), 2);
        stdout.stored(1);
        assert_eq!(stdout.acknowledge(now, Duration::ZERO), Some(99_999));
    }
}
