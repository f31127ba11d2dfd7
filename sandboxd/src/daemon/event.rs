//! What the per-process and per-terminal tasks tell the run loop.
//!
//! Every task tags its messages with a [`Key`]: the channel *and* a spawn id unique within this
//! sandboxd, so a message from an old, forgotten process can never be taken for one of a newer
//! process the server started on the same channel number.

use bytes::Bytes;

use crate::protocol::ExitStatus;

/// Identifies one spawned process or terminal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Key {
    /// The server's channel number.
    pub channel: u32,
    /// Unique per spawn within this sandboxd.
    pub id: u64,
}

/// Messages that must not be lost. The queue has no slot limit but is bounded by construction:
/// stdout chunks by the resend buffer's permits (bytes), `StdoutEof`/`Exited` once per process,
/// `StdinWritten` at most once per stdin write, and stdin writes only happen for frames the run
/// loop accepted (bounded by `MAX_STDIN_QUEUED_BYTES`).
#[derive(Debug)]
pub enum Event {
    /// A chunk of stdout, in order.
    Stdout(Key, Bytes),
    /// stdout reached end of file (after the last [`Event::Stdout`]).
    StdoutEof(Key),
    /// The process exited.
    Exited(Key, ExitStatus),
    /// stdin bytes written to the process so far.
    StdinWritten(Key, u64),
    /// A terminal's shell ended and its output was drained.
    TerminalClosed(Key),
}

/// Best-effort output (bounded queue: stderr is dropped when it is full, terminal output waits).
#[derive(Debug)]
pub enum BestEffort {
    /// A chunk of a process's stderr at the given offset (dropped chunks still count).
    Stderr(Key, u64, Bytes),
    /// A chunk of a terminal's output at the given offset.
    TerminalOutput(Key, u64, Bytes),
    /// The terminal's shell ended and its output was drained. Sent on this queue, behind the
    /// output, so that the close is never handled before the last output chunks.
    TerminalClosed(Key),
}
