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

/// Forwards stderr, dropping chunks when the best-effort queue is full: never blocks the child.
async fn pump_stderr(key: Key, mut stderr: impl AsyncRead + Unpin, best: mpsc::Sender<BestEffort>) {
    let mut buf = vec![0u8; CHUNK_MAX];
    let mut offset = 0u64;
    loop {
        match stderr.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(read) => {
                let chunk = Bytes::copy_from_slice(&buf[..read]);
                if let Err(mpsc::error::TrySendError::Closed(_)) = best.try_send(BestEffort::Stderr(key, offset, chunk))
                {
                    return;
                }
                offset += read as u64;
            }
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
