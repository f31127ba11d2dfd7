//! The tunnel's wire protocol, shared by the server and sandboxd.
//!
//! sandboxd dials the server's tunnel listener (`GET /tunnel`, WebSocket) with
//! `Authorization: Bearer <sandbox token>`. Over that one connection:
//!
//! - **Text frames** carry [`Control`] messages as JSON, tagged by `"type"`.
//! - **Binary frames** carry bytes of one channel: a 13-byte header ([`DataFrame`]) — kind (u8),
//!   channel (u32, big-endian), offset (u64, big-endian: the byte position of the first payload
//!   byte in that channel's stream) — followed by the payload.
//!
//! Channels are numbered by the server. A *process* channel carries one process's stdin (server →
//! sandboxd), stdout and stderr (sandboxd → server). A *terminal* channel carries a PTY's input and
//! output in both directions.
//!
//! Delivery of process **stdout** survives reconnects: sandboxd keeps every stdout byte until the
//! server acknowledges it ([`Control::Ack`]) *after storing what it carried*. On a new connection
//! sandboxd says which processes it has ([`Control::Hello`]), the server answers with the offset
//! it wants each stdout resent from ([`Control::Resume`]), and sandboxd resends from there. stdin
//! is written in whole frames; sandboxd reports how many stdin bytes it has written, so a server
//! that lost a frame in flight can tell. stderr and terminal output are best effort.

use serde::{Deserialize, Serialize};

/// Path of the tunnel's WebSocket endpoint on the tunnel listener.
pub const TUNNEL_PATH: &str = "/tunnel";

/// Version of this protocol; sandboxd sends it in [`Control::Hello`] and the server refuses a
/// connection that speaks another one. 2: `stdin_accepted` in [`ProcessState`],
/// [`Control::StdinRejected`], pings every [`PING_INTERVAL_SECS`].
pub const PROTOCOL_VERSION: u32 = 2;

/// sandboxd sends a WebSocket ping this often; the server drops a tunnel silent for three times
/// as long (a half-open connection is noticed within [`SILENT_TUNNEL_SECS`]).
pub const PING_INTERVAL_SECS: u64 = 15;

/// How long the server waits without any message from sandboxd before it drops the tunnel.
pub const SILENT_TUNNEL_SECS: u64 = 3 * PING_INTERVAL_SECS;

/// Most stdin bytes sandboxd holds for one process that it has accepted but not yet written;
/// a frame past that is rejected ([`Control::StdinRejected`]). The server keeps its own window
/// of unconfirmed stdin well below this.
pub const MAX_STDIN_QUEUED_BYTES: u64 = 16 << 20;

/// Length of the binary data frame header.
pub const DATA_HEADER_LEN: usize = 13;

/// What a binary frame carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DataKind {
    /// A process's stdout (sandboxd → server), acknowledged and resent on reconnect.
    Stdout = 1,
    /// A process's stderr (sandboxd → server), best effort: as it comes, in frames of at most
    /// 16 KiB and at most 32 KiB a second per process (after a 64 KiB burst); what is over that,
    /// or written while the server is away, is dropped, and the offsets still count it (a gap
    /// between frames is what was dropped). The newest bytes are kept for the next frame, so the
    /// end of what a process said arrives.
    Stderr = 2,
    /// A process's stdin (server → sandboxd).
    Stdin = 3,
    /// A terminal's output (sandboxd → server).
    TerminalOutput = 4,
    /// A terminal's input (server → sandboxd).
    TerminalInput = 5,
}

impl DataKind {
    fn from_u8(byte: u8) -> Option<Self> {
        Some(match byte {
            1 => Self::Stdout,
            2 => Self::Stderr,
            3 => Self::Stdin,
            4 => Self::TerminalOutput,
            5 => Self::TerminalInput,
            _ => return None,
        })
    }
}

/// One binary frame: bytes of one channel at a given offset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DataFrame {
    /// What the bytes are.
    pub kind: DataKind,
    /// The channel they belong to.
    pub channel: u32,
    /// Position of the first payload byte in the channel's stream of this kind.
    pub offset: u64,
    /// The bytes.
    pub payload: bytes::Bytes,
}

/// A binary frame that does not parse.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum FrameError {
    /// Shorter than the header.
    #[error("data frame shorter than its {DATA_HEADER_LEN}-byte header")]
    TooShort,
    /// The kind byte is not one of [`DataKind`].
    #[error("unknown data frame kind {0}")]
    UnknownKind(u8),
}

impl DataFrame {
    /// Encodes the frame as the bytes of one binary WebSocket message.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(DATA_HEADER_LEN + self.payload.len());
        out.push(self.kind as u8);
        out.extend_from_slice(&self.channel.to_be_bytes());
        out.extend_from_slice(&self.offset.to_be_bytes());
        out.extend_from_slice(&self.payload);
        out
    }

    /// Decodes one binary WebSocket message.
    pub fn decode(mut frame: bytes::Bytes) -> Result<Self, FrameError> {
        if frame.len() < DATA_HEADER_LEN {
            return Err(FrameError::TooShort);
        }
        let header = frame.split_to(DATA_HEADER_LEN);
        let kind = DataKind::from_u8(header[0]).ok_or(FrameError::UnknownKind(header[0]))?;
        let mut channel = [0u8; 4];
        channel.copy_from_slice(&header[1..5]);
        let mut offset = [0u8; 8];
        offset.copy_from_slice(&header[5..13]);
        Ok(Self { kind, channel: u32::from_be_bytes(channel), offset: u64::from_be_bytes(offset), payload: frame })
    }
}

/// How a process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExitStatus {
    /// Exit code, when it exited normally.
    pub code: Option<i32>,
    /// Signal number, when a signal ended it.
    pub signal: Option<i32>,
}

/// What sandboxd knows about one process when it (re)connects.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessState {
    /// The process's channel.
    pub channel: u32,
    /// Its pid inside the sandbox.
    pub pid: Option<u32>,
    /// First stdout byte sandboxd still holds (everything before was acknowledged).
    pub stdout_acked: u64,
    /// One past the last stdout byte read so far.
    pub stdout_end: u64,
    /// stdin bytes written to the process so far.
    pub stdin_written: u64,
    /// stdin bytes sandboxd has accepted (written or queued to be written); the next stdin frame
    /// must start exactly here. The server resumes sending stdin from this offset.
    #[serde(default)]
    pub stdin_accepted: u64,
    /// Set once the process has exited and its stdout reached EOF.
    pub exit: Option<ExitStatus>,
}

/// Control messages, both directions (text frames, JSON).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Control {
    // ---- sandboxd → server ----
    /// First message on every connection.
    Hello {
        /// [`PROTOCOL_VERSION`].
        protocol: u32,
        /// sandboxd's own version (the crate version).
        version: String,
        /// Processes sandboxd runs or holds output or an exit status for.
        processes: Vec<ProcessState>,
    },
    /// A process was started for a [`Control::Start`].
    Started {
        /// Its channel.
        channel: u32,
        /// Its pid.
        pid: u32,
    },
    /// A [`Control::Start`] or [`Control::OpenTerminal`] failed.
    StartFailed {
        /// The channel it was for.
        channel: u32,
        /// Why, for people.
        message: String,
    },
    /// A process exited; sent after its last stdout byte (`stdout_end`). sandboxd repeats it in
    /// every `Hello` until the server sends [`Control::Forget`].
    Exited {
        /// Its channel.
        channel: u32,
        /// How it ended.
        status: ExitStatus,
        /// Total stdout bytes it wrote.
        stdout_end: u64,
    },
    /// A terminal's shell ended.
    TerminalClosed {
        /// Its channel.
        channel: u32,
    },
    /// Whole stdin frames written to a process so far (answers [`Control::Stdin`] data in bulk).
    StdinWritten {
        /// Its channel.
        channel: u32,
        /// stdin bytes written so far.
        offset: u64,
    },

    /// A stdin frame was not accepted: it did not start at `expected` (the next offset sandboxd
    /// takes), or it would overflow [`MAX_STDIN_QUEUED_BYTES`]. Nothing of it was queued. The
    /// server must resend from `expected` (or drop the connection); it is never a silent drop.
    StdinRejected {
        /// Its channel.
        channel: u32,
        /// The offset of the rejected frame.
        offset: u64,
        /// The offset sandboxd takes next (`stdin_accepted`).
        expected: u64,
        /// Why, for logs.
        reason: String,
    },

    // ---- server → sandboxd ----
    /// Answer to `Hello`: resend each listed stdout from the given offset. Processes not listed
    /// are unknown to the server and sandboxd kills them.
    Resume {
        /// `(channel, offset)` pairs.
        channels: Vec<ResumeFrom>,
    },
    /// Start a process on a new channel.
    Start {
        /// The channel the server chose for it.
        channel: u32,
        /// Program and arguments.
        argv: Vec<String>,
        /// Environment added to the image's (sandboxd's own environment less its `AGENTHOLD_*`
        /// variables); these win. HOME, USER and LOGNAME follow `user`.
        env: Vec<(String, String)>,
        /// Working directory (absolute).
        cwd: String,
        /// User to run as (`agent`); `None` keeps sandboxd's own user.
        user: Option<String>,
    },
    /// stdout of a channel is stored up to this offset; sandboxd may drop it.
    Ack {
        /// The channel.
        channel: u32,
        /// Everything before this offset is stored.
        offset: u64,
    },
    /// Send a signal to a process (its process group).
    Signal {
        /// The channel.
        channel: u32,
        /// The signal number (9 = SIGKILL, 15 = SIGTERM).
        signal: i32,
    },
    /// Close a process's stdin.
    CloseStdin {
        /// The channel.
        channel: u32,
    },
    /// The server has taken the exit of this process; sandboxd forgets the channel.
    Forget {
        /// The channel.
        channel: u32,
    },
    /// Open a terminal (PTY) running a login shell as `user` in `cwd`.
    OpenTerminal {
        /// The channel the server chose for it.
        channel: u32,
        /// Columns.
        cols: u16,
        /// Rows.
        rows: u16,
        /// Program and arguments (a shell).
        argv: Vec<String>,
        /// Environment.
        env: Vec<(String, String)>,
        /// Working directory.
        cwd: String,
        /// User to run as.
        user: Option<String>,
    },
    /// Resize a terminal.
    Resize {
        /// The channel.
        channel: u32,
        /// Columns.
        cols: u16,
        /// Rows.
        rows: u16,
    },
    /// Close a terminal (hang up its shell).
    CloseTerminal {
        /// The channel.
        channel: u32,
    },
}

/// One entry of [`Control::Resume`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResumeFrom {
    /// The channel.
    pub channel: u32,
    /// Resend stdout from this offset.
    pub offset: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_frame_round_trips() {
        let frame = DataFrame {
            kind: DataKind::Stdout,
            channel: 7,
            offset: 1 << 40,
            payload: bytes::Bytes::from_static(b"{\"jsonrpc\":\"2.0\"}\n"),
        };
        let decoded = DataFrame::decode(frame.encode().into()).expect("decodes");
        assert_eq!(decoded, frame);
    }

    #[test]
    fn bad_frames_are_errors_not_panics() {
        assert_eq!(DataFrame::decode(bytes::Bytes::from_static(b"\x01\x00")), Err(FrameError::TooShort));
        let mut bad = vec![9u8];
        bad.extend_from_slice(&[0; 12]);
        assert_eq!(DataFrame::decode(bad.into()), Err(FrameError::UnknownKind(9)));
    }

    #[test]
    fn control_messages_are_tagged_json() {
        let msg = Control::Ack { channel: 3, offset: 42 };
        let text = serde_json::to_string(&msg).expect("serializes");
        assert_eq!(text, r#"{"type":"ack","channel":3,"offset":42}"#);
        assert_eq!(serde_json::from_str::<Control>(&text).expect("parses"), msg);
    }
}
