//! What the core hears from sandboxd and says to it about the harness process: the core's own
//! copy of the tunnel protocol's process messages (`agenthold_sandboxd::protocol`), so the core
//! needs nothing of sandboxd's crate (an async daemon). The shell translates both ways
//! (`supervisor::wire`); terminals and the connection's hello are the shell's.

/// How a process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExitStatus {
    /// Exit code, when it exited normally.
    pub code: Option<i32>,
    /// Signal number, when a signal ended it.
    pub signal: Option<i32>,
}

/// What sandboxd knows about one process when it (re)connects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessState {
    /// The process's channel.
    pub channel: u32,
    /// First stdout byte sandboxd still holds (everything before was acknowledged).
    pub stdout_acked: u64,
    /// One past the last stdout byte read so far.
    pub stdout_end: u64,
    /// stdin bytes written to the process so far.
    pub stdin_written: u64,
    /// stdin bytes sandboxd has accepted (written or queued); the next stdin frame must start
    /// exactly here.
    pub stdin_accepted: u64,
    /// Set once the process has exited and its stdout reached EOF.
    pub exit: Option<ExitStatus>,
}

/// What sandboxd reports about a process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FromSandboxd {
    /// A process was started for a [`ToSandboxd::Start`].
    Started {
        /// Its channel.
        channel: u32,
    },
    /// A [`ToSandboxd::Start`] failed.
    StartFailed {
        /// The channel it was for.
        channel: u32,
        /// Why, for people.
        message: String,
    },
    /// A process exited, after its last stdout byte (`stdout_end`).
    Exited {
        /// Its channel.
        channel: u32,
        /// How it ended.
        status: ExitStatus,
        /// Total stdout bytes it wrote.
        stdout_end: u64,
    },
    /// Whole stdin frames written to a process so far.
    StdinWritten {
        /// Its channel.
        channel: u32,
        /// stdin bytes written so far.
        offset: u64,
    },
    /// A stdin frame was not accepted: it did not start at `expected`, or it would overflow
    /// sandboxd's queue.
    StdinRejected {
        /// Its channel.
        channel: u32,
        /// The offset of the rejected frame.
        offset: u64,
        /// The offset sandboxd takes next.
        expected: u64,
        /// Why, for logs.
        reason: String,
    },
}

/// A process to start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessStart {
    /// The channel the server chose for it.
    pub channel: u32,
    /// Program and arguments.
    pub argv: Vec<String>,
    /// Environment added to the image's.
    pub env: Vec<(String, String)>,
    /// Working directory (absolute).
    pub cwd: String,
    /// User to run as; `None` keeps sandboxd's own user.
    pub user: Option<String>,
}

/// One entry of [`ToSandboxd::Resume`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResumeFrom {
    /// The channel.
    pub channel: u32,
    /// Resend stdout from this offset.
    pub offset: u64,
}

/// What the core tells sandboxd.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToSandboxd {
    /// Answer to its hello: resend each listed stdout from the given offset (processes not
    /// listed are killed).
    Resume {
        /// `(channel, offset)` pairs.
        channels: Vec<ResumeFrom>,
    },
    /// Start the harness process.
    Start(ProcessStart),
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
        /// The signal number (9 = SIGKILL).
        signal: i32,
    },
    /// The server has taken the exit of this process; sandboxd forgets the channel.
    Forget {
        /// The channel.
        channel: u32,
    },
}
