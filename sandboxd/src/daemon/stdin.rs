//! A process's stdin: which part of a stdin frame is taken (exactly once, at its offset in the
//! stream), the byte bound on what is accepted but not yet written, and the task that writes it.
//!
//! `accepted` is the offset the next stdin byte must have. A frame entirely below it is a
//! resend and is ignored; one that overlaps it gives only its new tail; one that starts past it
//! (a gap), that would hold more than [`MAX_STDIN_QUEUED_BYTES`] unwritten, or that comes after
//! stdin was closed is refused whole, and the server is told ([`Control::StdinRejected`]).

use tokio::io::AsyncWriteExt as _;
use tokio::process::ChildStdin;
use tokio::sync::mpsc;

use super::event::{Event, Key};
use super::log;
use super::queue::{self, Refused};
use crate::protocol::{Control, MAX_STDIN_QUEUED_BYTES};

/// The queue bound, in bytes.
pub fn queue_limit() -> usize {
    usize::try_from(MAX_STDIN_QUEUED_BYTES).unwrap_or(usize::MAX)
}

/// Where a frame at `offset` of `len` bytes falls, given `accepted`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fit {
    /// Everything in it was accepted before: ignore it.
    Resend,
    /// Take this range of the payload (from 0 unless it overlaps what was accepted; cut where
    /// the stream would pass `u64::MAX`).
    Take(std::ops::Range<usize>),
    /// It starts past `accepted`: bytes in between are missing.
    Gap,
}

/// Classifies a frame. Never panics, whatever the numbers.
pub fn fit(accepted: u64, offset: u64, len: usize) -> Fit {
    let end = offset.saturating_add(len as u64);
    if offset > accepted {
        Fit::Gap
    } else if end <= accepted {
        Fit::Resend
    } else {
        // `offset <= accepted < end <= offset + len`: both numbers are at most `len`.
        let skip = usize::try_from(accepted - offset).unwrap_or(len);
        let take = usize::try_from(end - accepted).unwrap_or(0);
        Fit::Take(skip..skip.saturating_add(take).min(len))
    }
}

/// Accepts the new part of a stdin frame into `queue`, advancing `accepted`; or says why not
/// (the `StdinRejected` to send). Nothing of a refused frame is queued.
pub fn accept(
    channel: u32,
    queue: &queue::Sender,
    accepted: &mut u64,
    offset: u64,
    payload: &[u8],
) -> Result<(), Control> {
    let reject = |reason: String| Control::StdinRejected { channel, offset, expected: *accepted, reason };
    let tail = match fit(*accepted, offset, payload.len()) {
        Fit::Resend => return Ok(()),
        Fit::Gap => return Err(reject(format!("gap: the frame starts at {offset}, the stream is at {accepted}"))),
        Fit::Take(range) => payload.get(range).unwrap_or_default(),
    };
    match queue.push_data(tail) {
        Ok(()) => {
            *accepted = accepted.saturating_add(tail.len() as u64);
            Ok(())
        }
        Err(Refused::Full { held, limit }) => Err(reject(format!(
            "full: {held} bytes accepted and not yet written; {} more would pass the bound of {limit}",
            tail.len()
        ))),
        Err(Refused::Closed) => Err(reject("stdin is closed".into())),
    }
}

/// Writes what the queue holds, in order; reports the total written whenever the queue drains.
/// Ends when the queue is closed and drained (closing the pipe) or the pipe breaks.
pub async fn write(key: Key, mut pipe: ChildStdin, mut queue: queue::Receiver, events: mpsc::UnboundedSender<Event>) {
    while let Some(item) = queue.next().await {
        let queue::Item::Data(bytes) = &item else {
            queue.done(&item, false);
            continue;
        };
        if let Err(err) = pipe.write_all(bytes).await {
            log(format_args!("channel {}: writing stdin: {err}", key.channel));
            queue.done(&item, false);
            queue.fail();
            return;
        }
        let (written, drained) = queue.done(&item, true);
        if drained && events.send(Event::StdinWritten(key, written)).is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_are_placed_by_offset() {
        assert_eq!(fit(10, 0, 10), Fit::Resend, "entirely below");
        assert_eq!(fit(10, 4, 6), Fit::Resend, "ends exactly at accepted");
        assert_eq!(fit(10, 10, 0), Fit::Resend, "empty at accepted");
        assert_eq!(fit(10, 10, 5), Fit::Take(0..5), "exactly next");
        assert_eq!(fit(10, 6, 8), Fit::Take(4..8), "overlap: only the tail");
        assert_eq!(fit(10, 11, 1), Fit::Gap);
        assert_eq!(fit(10, 11, 0), Fit::Gap, "an empty frame past accepted is still a gap");
        assert_eq!(fit(0, u64::MAX, usize::MAX), Fit::Gap, "no overflow");
        assert_eq!(fit(u64::MAX - 3, u64::MAX - 4, 9), Fit::Take(1..4), "the stream ends at u64::MAX");
        assert_eq!(fit(u64::MAX, u64::MAX - 1, 5), Fit::Resend, "nothing fits past u64::MAX");
    }

    #[test]
    fn accept_takes_tails_and_refuses_whole() {
        let (tx, _rx) = queue::bounded(8);
        let mut accepted = 0;
        accept(1, &tx, &mut accepted, 0, b"abcd").expect("next");
        accept(1, &tx, &mut accepted, 0, b"abcd").expect("resend ignored");
        accept(1, &tx, &mut accepted, 2, b"cdef").expect("overlap");
        assert_eq!((accepted, tx.held()), (6, 6));
        let Err(Control::StdinRejected { offset, expected, reason, .. }) = accept(1, &tx, &mut accepted, 7, b"h")
        else {
            panic!("a gap is refused");
        };
        assert_eq!((offset, expected, reason.starts_with("gap")), (7, 6, true));
        let Err(Control::StdinRejected { expected, reason, .. }) = accept(1, &tx, &mut accepted, 6, b"ghi") else {
            panic!("past the bound is refused");
        };
        assert_eq!((expected, reason.starts_with("full")), (6, true));
        assert_eq!((accepted, tx.held()), (6, 6), "nothing of a refused frame was queued");
        accept(1, &tx, &mut accepted, 6, b"gh").expect("exactly to the bound");
        tx.close();
        let Err(Control::StdinRejected { reason, .. }) = accept(1, &tx, &mut accepted, 8, b"i") else {
            panic!("closed stdin refuses");
        };
        assert_eq!(reason, "stdin is closed");
    }
}
