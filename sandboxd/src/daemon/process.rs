//! Processes started by [`Control::Start`](crate::protocol::Control::Start): spawning (user,
//! environment, own process group), and the tasks that pump stdout into the resend buffer (with
//! backpressure), forward stderr and wait for the exit. stdin is [`super::stdin`]'s.

use std::collections::HashSet;
use std::ffi::OsString;
use std::os::unix::process::ExitStatusExt as _;
use std::process::Stdio;
use std::sync::Arc;

use bytes::Bytes;
use parking_lot::Mutex;
use tokio::io::{AsyncRead, AsyncReadExt as _};
use tokio::process::Child;
use tokio::sync::{Semaphore, mpsc};
use tokio::task::AbortHandle;

use super::buffer::ResendBuffer;
use super::event::{BestEffort, Event, Key};
use super::users::Account;
use super::{log, queue, stdin};
use crate::protocol::ExitStatus;

/// Largest chunk read from a pipe or PTY at once.
pub const CHUNK_MAX: usize = 64 * 1024;

/// Pids of the children sandboxd spawned and tokio still waits on; the reaper leaves them alone.
pub type Children = Arc<Mutex<HashSet<u32>>>;

/// Adds or removes a pid from [`Children`].
pub fn track(children: &Children, pid: u32, alive: bool) {
    let mut set = children.lock();
    if alive {
        set.insert(pid);
    } else {
        set.remove(&pid);
    }
}

/// Where a spawned process's tasks report.
#[derive(Clone)]
pub struct Sinks {
    /// Lossless events.
    pub events: mpsc::UnboundedSender<Event>,
    /// Best-effort output.
    pub best: mpsc::Sender<BestEffort>,
    /// Live children, for the reaper.
    pub children: Children,
}

/// What the caller asks for.
pub struct Spec<'a> {
    /// Program and arguments.
    pub argv: &'a [String],
    /// Complete environment.
    pub env: &'a [(OsString, OsString)],
    /// Working directory.
    pub cwd: &'a str,
    /// User to run as (`None`: sandboxd's own).
    pub account: Option<&'a Account>,
}

/// One process the server started.
pub struct Process {
    /// Spawn id (see [`Key`]).
    pub id: u64,
    /// Its pid, also its process group id.
    pub pid: u32,
    /// Unacknowledged stdout.
    pub buffer: ResendBuffer,
    /// Free room in the resend buffer, in bytes; the stdout reader takes, acks give back.
    pub room: Arc<Semaphore>,
    /// Queue to the stdin writer (bounded by [`stdin::queue_limit`]); closed by `CloseStdin`.
    pub stdin: queue::Sender,
    /// stdin bytes accepted for writing (the stream offset the next frame must have).
    pub stdin_accepted: u64,
    /// stdout reached end of file.
    pub stdout_eof: bool,
    /// How it ended, once it did.
    pub status: Option<ExitStatus>,
    /// Its tasks, aborted when the process is forgotten.
    pub tasks: Vec<AbortHandle>,
}

impl Process {
    /// The exit to report: set once the process exited and its stdout reached EOF.
    pub fn exit(&self) -> Option<ExitStatus> {
        self.status.filter(|_| self.stdout_eof)
    }

    /// Whether anything of it may still run (its group may outlive it, but that is its business
    /// once it exited and closed its stdout).
    pub fn running(&self) -> bool {
        self.exit().is_none()
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

/// Spawns a process in its own process group with piped stdio, and its tasks.
pub fn spawn(key: Key, spec: &Spec<'_>, buffer_bytes: usize, sinks: &Sinks) -> std::io::Result<Process> {
    let Some((program, args)) = spec.argv.split_first() else {
        return Err(std::io::Error::new(std::io::ErrorKind::InvalidInput, "empty argv"));
    };
    let mut cmd = tokio::process::Command::new(program);
    cmd.args(args)
        .env_clear()
        .envs(spec.env.iter().map(|(k, v)| (k, v)))
        .current_dir(spec.cwd)
        .process_group(0)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(false);
    if let Some(account) = spec.account {
        cmd.uid(account.uid).gid(account.gid);
    }
    let mut child = cmd.spawn()?;
    let pid = child.id().unwrap_or(0);
    // Recorded before the next await, so the reaper (same thread) never sees it untracked.
    track(&sinks.children, pid, true);

    let buffer_bytes = buffer_bytes.clamp(1, Semaphore::MAX_PERMITS);
    let chunk = CHUNK_MAX.min(buffer_bytes);
    let room = Arc::new(Semaphore::new(buffer_bytes));
    let mut tasks = Vec::new();
    if let Some(stdout) = child.stdout.take() {
        tasks.push(tokio::spawn(pump_stdout(key, stdout, room.clone(), chunk, sinks.events.clone())).abort_handle());
    }
    if let Some(stderr) = child.stderr.take() {
        tasks.push(tokio::spawn(pump_stderr(key, stderr, sinks.best.clone())).abort_handle());
    }
    let (stdin, queue) = queue::bounded(stdin::queue_limit());
    if let Some(pipe) = child.stdin.take() {
        tasks.push(tokio::spawn(stdin::write(key, pipe, queue, sinks.events.clone())).abort_handle());
    }
    // Not aborted with the others: it ends when the child does, and keeps the pid tracked (and
    // away from the reaper) until tokio has reaped it.
    tokio::spawn(wait(key, pid, child, sinks.clone()));
    Ok(Process {
        id: key.id,
        pid,
        buffer: ResendBuffer::default(),
        room,
        stdin,
        stdin_accepted: 0,
        stdout_eof: false,
        status: None,
        tasks,
    })
}

/// Reads stdout in chunks of at most `chunk` bytes, each no larger than the free room in the
/// resend buffer (taken before the read): when the buffer is full the process blocks on its
/// stdout, and nothing is lost.
async fn pump_stdout(
    key: Key,
    mut stdout: impl AsyncRead + Unpin,
    room: Arc<Semaphore>,
    chunk: usize,
    events: mpsc::UnboundedSender<Event>,
) {
    let mut buf = vec![0u8; chunk];
    loop {
        match room.acquire().await {
            Ok(first) => first.forget(),
            Err(_) => return,
        }
        let mut taken = 1;
        let more = room.available_permits().min(chunk - 1);
        if let Ok(extra) = room.try_acquire_many(u32::try_from(more).unwrap_or(0)) {
            taken += extra.num_permits();
            extra.forget();
        }
        let read = match stdout.read(&mut buf[..taken]).await {
            Ok(read) => read,
            Err(err) => {
                log(format_args!("channel {}: reading stdout: {err}", key.channel));
                0
            }
        };
        room.add_permits(taken - read);
        let event =
            if read == 0 { Event::StdoutEof(key) } else { Event::Stdout(key, Bytes::copy_from_slice(&buf[..read])) };
        if events.send(event).is_err() || read == 0 {
            return;
        }
    }
}

/// Largest stderr frame sent to the server (also the most stderr held back per process while
/// over the rate limit: the newest bytes).
pub const STDERR_FRAME_MAX: usize = 16 * 1024;

/// stderr bytes per second sent per process, after a first burst of [`STDERR_BURST`].
pub const STDERR_RATE: u64 = 32 * 1024;

/// stderr bytes a process may send at once before the rate applies.
pub const STDERR_BURST: u64 = 64 * 1024;

/// A token bucket of bytes.
struct Bucket {
    tokens: u64,
    at: tokio::time::Instant,
}

impl Bucket {
    fn refill(&mut self, now: tokio::time::Instant) {
        let earned = now.saturating_duration_since(self.at).as_millis() as u64 * STDERR_RATE / 1000;
        if earned > 0 {
            self.tokens = (self.tokens + earned).min(STDERR_BURST);
            self.at = now;
        }
    }

    /// How long until `bytes` tokens are there.
    fn wait_for(&self, bytes: u64) -> std::time::Duration {
        let missing = bytes.saturating_sub(self.tokens);
        std::time::Duration::from_millis((missing * 1000).div_ceil(STDERR_RATE).max(1))
    }
}

/// Forwards stderr as it comes, in frames of at most [`STDERR_FRAME_MAX`] bytes and at most
/// [`STDERR_RATE`] bytes a second (after a burst of [`STDERR_BURST`]). Never blocks the child: it
/// reads all the time, and what is over the rate is dropped from the middle — the newest
/// [`STDERR_FRAME_MAX`] bytes wait for the next frame, so the end of what a harness said before
/// it failed always arrives. Frames carry stderr offsets: the server counts a gap as dropped.
/// A frame the best-effort queue has no room for is dropped as well (its bytes still count).
async fn pump_stderr(key: Key, mut stderr: impl AsyncRead + Unpin, best: mpsc::Sender<BestEffort>) {
    let mut buf = vec![0u8; CHUNK_MAX];
    // The bytes not sent yet (after a read, at most one read more than a frame), and the stderr
    // offset of the first of them.
    let mut pending: Vec<u8> = Vec::with_capacity(STDERR_FRAME_MAX + CHUNK_MAX);
    let mut pending_at = 0u64;
    let mut bucket = Bucket { tokens: STDERR_BURST, at: tokio::time::Instant::now() };
    let mut eof = false;
    loop {
        bucket.refill(tokio::time::Instant::now());
        // Whole frames while the rate allows; at the end, what is left goes out whatever the rate.
        while !pending.is_empty() {
            let len = pending.len().min(STDERR_FRAME_MAX);
            if !eof && bucket.tokens < len as u64 {
                break;
            }
            bucket.tokens = bucket.tokens.saturating_sub(len as u64);
            let chunk = Bytes::copy_from_slice(&pending[..len]);
            pending.drain(..len);
            if let Err(mpsc::error::TrySendError::Closed(_)) = best.try_send(BestEffort::Stderr(key, pending_at, chunk))
            {
                return;
            }
            pending_at += len as u64;
        }
        if eof {
            return;
        }
        // Over the rate: only the newest bytes wait.
        let over = pending.len().saturating_sub(STDERR_FRAME_MAX);
        if over > 0 {
            pending.drain(..over);
            pending_at += over as u64;
        }
        let wait = (!pending.is_empty()).then(|| bucket.wait_for(pending.len() as u64));
        tokio::select! {
            read = stderr.read(&mut buf) => match read {
                Ok(0) | Err(_) => eof = true,
                Ok(read) => pending.extend_from_slice(&buf[..read]),
            },
            () = tokio::time::sleep(wait.unwrap_or_default()), if wait.is_some() => {}
        }
    }
}

/// Waits for the exit, untracks the pid for the reaper and reports the status.
async fn wait(key: Key, pid: u32, mut child: Child, sinks: Sinks) {
    let status = child.wait().await;
    track(&sinks.children, pid, false);
    let status = match status {
        Ok(status) => ExitStatus { code: status.code(), signal: status.signal() },
        Err(err) => {
            log(format_args!("channel {}: waiting for pid {pid}: {err}", key.channel));
            ExitStatus { code: None, signal: None }
        }
    };
    let _ = sinks.events.send(Event::Exited(key, status));
}

/// Sends `signal` to the process group `pgid`.
pub fn signal_group(pgid: u32, signal: i32) -> Result<(), String> {
    let sig = rustix::process::Signal::from_named_raw(signal).ok_or_else(|| format!("unknown signal {signal}"))?;
    let pid = i32::try_from(pgid).ok().and_then(rustix::process::Pid::from_raw).ok_or("no pid")?;
    rustix::process::kill_process_group(pid, sig).map_err(|err| format!("signal {signal} to group {pgid}: {err}"))
}

#[cfg(test)]
mod tests {
    use tokio::io::AsyncWriteExt as _;

    use super::*;

    fn frames(rx: &mut mpsc::Receiver<BestEffort>) -> Vec<(u64, Bytes)> {
        let mut out = Vec::new();
        while let Ok(BestEffort::Stderr(_, offset, bytes)) = rx.try_recv() {
            out.push((offset, bytes));
        }
        out
    }

    /// A flood of stderr is sent in small frames at the rate, what is over it is dropped from
    /// the middle, and the last bytes written always arrive.
    #[tokio::test]
    async fn stderr_is_chunked_rate_limited_and_keeps_its_end() {
        let (mut writer, reader) = tokio::io::duplex(64 * 1024);
        let (tx, mut rx) = mpsc::channel(4096);
        let started = std::time::Instant::now();
        let pump = tokio::spawn(pump_stderr(Key { channel: 1, id: 1 }, reader, tx));
        let total = 4 * 1024 * 1024;
        let line = b"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcde\n";
        for _ in 0..total / line.len() {
            writer.write_all(line).await.expect("write");
        }
        writer.write_all(b"the end\n").await.expect("write");
        drop(writer);
        pump.await.expect("pump");
        let elapsed_ms = started.elapsed().as_millis() as u64;
        let frames = frames(&mut rx);
        let sent: u64 = frames.iter().map(|(_, b)| b.len() as u64).sum();
        assert!(frames.iter().all(|(_, b)| b.len() <= STDERR_FRAME_MAX), "a frame over the maximum");
        let allowed = STDERR_BURST + STDERR_RATE * elapsed_ms / 1000 + STDERR_FRAME_MAX as u64;
        assert!(sent <= allowed, "sent {sent} bytes in {elapsed_ms} ms, allowed {allowed}");
        assert!(frames.windows(2).all(|w| w[0].0 + w[0].1.len() as u64 <= w[1].0), "offsets go forward");
        let (offset, last) = frames.last().expect("a frame");
        assert!(last.ends_with(b"the end\n"), "the end arrives");
        assert_eq!(offset + last.len() as u64, (total / line.len() * line.len() + 8) as u64);
        assert!(frames[0].0 == 0 && frames[0].1.starts_with(b"0123"), "the start arrives");
    }
}
