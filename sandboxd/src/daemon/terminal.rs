//! Terminals: a program (a shell) on a PTY, as the session leader of its own session with the
//! PTY as its controlling terminal (pty-process does `setsid` + `TIOCSCTTY`), so its pid is also
//! its process group. Output is best effort and never buffered for resend; input and resizes go
//! through one queue, in order, bounded by [`INPUT_BOUND`] bytes.
//!
//! Input past the bound is dropped, with a log line per run of drops (see [`Terminal::input`]):
//! a shell that does not read its PTY must not grow sandboxd, and closing the terminal instead
//! would kill whatever the user runs in it over a paste into a busy shell. Terminal input is a
//! person typing; the terminal protocol carries no acknowledgement to resend from anyway.

use std::time::Duration;

use bytes::Bytes;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::task::AbortHandle;

use super::event::{BestEffort, Key};
use super::log;
use super::process::{CHUNK_MAX, Sinks, Spec, signal_group, track};
use super::queue::{self, Refused};

/// Most input bytes held for a terminal that were not yet written to its PTY.
pub const INPUT_BOUND: usize = 1 << 20;

/// How long after `CloseTerminal`'s SIGHUP the group gets a SIGKILL.
const HANGUP_GRACE: Duration = Duration::from_secs(2);

/// How long output is still drained after the shell exited (a background job may hold the PTY).
const DRAIN_AFTER_EXIT: Duration = Duration::from_millis(500);

/// One open terminal.
pub struct Terminal {
    /// Spawn id (see [`Key`]).
    pub id: u64,
    /// The shell's pid (and process group).
    pub pid: u32,
    /// Queue to the input task.
    input: queue::Sender,
    /// Input bytes dropped since the queue was last found full (logged when it has room again).
    dropped: u64,
    /// Its tasks, aborted when it is dropped.
    pub tasks: Vec<AbortHandle>,
}

impl Drop for Terminal {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

impl Terminal {
    /// Queues input; drops it (logging the first drop of a run) when the queue is full.
    pub fn input(&mut self, channel: u32, bytes: &[u8]) {
        match self.input.push_data(bytes) {
            Ok(()) if self.dropped > 0 => {
                log(format_args!("terminal {channel}: input flows again after {} dropped bytes", self.dropped));
                self.dropped = 0;
            }
            Ok(()) => {}
            Err(Refused::Full { held, .. }) => {
                if self.dropped == 0 {
                    log(format_args!(
                        "terminal {channel}: the shell does not read its input ({held} bytes waiting); dropping input"
                    ));
                }
                self.dropped += bytes.len() as u64;
            }
            Err(Refused::Closed) => log(format_args!("terminal {channel}: input after the pty closed; dropped")),
        }
    }

    /// Queues a resize (in order with the input).
    pub fn resize(&mut self, channel: u32, cols: u16, rows: u16) {
        if let Err(err) = self.input.push_resize(cols, rows) {
            log(format_args!("terminal {channel}: resize dropped: {err:?}"));
        }
    }

    /// Hangs up the shell's group, and kills it if it is still there after a grace period.
    pub fn hang_up(&mut self) {
        if let Err(err) = signal_group(self.pid, 1) {
            log(format_args!("terminal: {err}"));
        }
        let pid = self.pid;
        self.tasks.push(
            tokio::spawn(async move {
                tokio::time::sleep(HANGUP_GRACE).await;
                let _ = signal_group(pid, 9);
            })
            .abort_handle(),
        );
    }
}

/// Opens a PTY of the given size and spawns `spec` on it, with its tasks.
pub fn open(key: Key, spec: &Spec<'_>, cols: u16, rows: u16, sinks: &Sinks) -> Result<Terminal, String> {
    let Some((program, args)) = spec.argv.split_first() else {
        return Err("empty argv".into());
    };
    let (pty, pts) = pty_process::open().map_err(|err| format!("opening a pty: {err}"))?;
    pty.resize(pty_process::Size::new(rows, cols)).map_err(|err| format!("sizing the pty: {err}"))?;
    let mut cmd = pty_process::Command::new(program)
        .args(args)
        .env_clear()
        .envs(spec.env.iter().map(|(k, v)| (k, v)))
        .current_dir(spec.cwd)
        .kill_on_drop(false);
    if let Some(account) = spec.account {
        cmd = cmd.uid(account.uid).gid(account.gid);
    }
    let mut child = cmd.spawn(pts).map_err(|err| err.to_string())?;
    let pid = child.id().unwrap_or(0);
    // Recorded before the next await, so the reaper (same thread) never sees it untracked.
    track(&sinks.children, pid, true);

    let (mut reader, mut writer) = pty.into_split();
    let (input, mut queue) = queue::bounded(INPUT_BOUND);
    let input_task = tokio::spawn(async move {
        while let Some(item) = queue.next().await {
            let result = match &item {
                queue::Item::Data(bytes) => writer.write_all(bytes).await.map_err(|err| err.to_string()),
                queue::Item::Resize { cols, rows } => {
                    writer.resize(pty_process::Size::new(*rows, *cols)).map_err(|err| err.to_string())
                }
            };
            queue.done(&item, result.is_ok());
            if let Err(err) = result {
                log(format_args!("terminal {}: {err}", key.channel));
            }
        }
    });

    let sinks = sinks.clone();
    let main_task = tokio::spawn(async move {
        let best = sinks.best.clone();
        let output = async move {
            let mut buf = vec![0u8; CHUNK_MAX];
            let mut offset = 0u64;
            // Ends with EIO once every handle on the PTY's other side is closed.
            while let Ok(read) = reader.read(&mut buf).await {
                if read == 0 {
                    break;
                }
                let chunk = Bytes::copy_from_slice(&buf[..read]);
                if best.send(BestEffort::TerminalOutput(key, offset, chunk)).await.is_err() {
                    break;
                }
                offset += read as u64;
            }
        };
        tokio::pin!(output);
        let exited_first = tokio::select! {
            () = &mut output => false,
            _ = child.wait() => true,
        };
        if exited_first {
            track(&sinks.children, pid, false);
            let _ = tokio::time::timeout(DRAIN_AFTER_EXIT, output).await;
        } else {
            let _ = child.wait().await;
            track(&sinks.children, pid, false);
        }
        let _ = sinks.best.send(BestEffort::TerminalClosed(key)).await;
    });
    Ok(Terminal {
        id: key.id,
        pid,
        input,
        dropped: 0,
        tasks: vec![input_task.abort_handle(), main_task.abort_handle()],
    })
}
