//! Reaping orphans when sandboxd is PID 1 in a container.
//!
//! Orphaned processes are re-parented to PID 1, and their zombies stay until PID 1 waits for
//! them. sandboxd must reap those, but must not steal the exit status of its own children, which
//! tokio waits for by pid. So on every SIGCHLD (and every few seconds, in case one was
//! coalesced) it lists `/proc`, and reaps with `waitpid(pid, WNOHANG)` exactly the zombies whose
//! parent is sandboxd and whose pid is not in [`Children`] (the pids sandboxd spawned and tokio has
//! not reaped yet; inserted on the same thread right after the spawn, before any await, removed
//! right after tokio's wait returns).
//!
//! Why not `waitid(P_ALL, WNOHANG | WNOWAIT)`: it reports one zombie at a time, the same one
//! until it is reaped, so a zombie of our own that tokio has not collected yet would hide the
//! orphans behind it. Naming each pid avoids that.

use std::time::Duration;

use rustix::process::{Pid, WaitOptions, waitpid};
use tokio::signal::unix::{SignalKind, signal};

use super::log;
use super::process::Children;

/// Starts the reaper if this process is PID 1; the task runs for the life of the runtime.
pub fn start(children: Children) -> Option<tokio::task::JoinHandle<()>> {
    if !rustix::process::getpid().is_init() {
        return None;
    }
    let mut sigchld = match signal(SignalKind::child()) {
        Ok(sigchld) => sigchld,
        Err(err) => {
            log(format_args!("reaper: cannot watch SIGCHLD: {err}"));
            return None;
        }
    };
    Some(tokio::spawn(async move {
        loop {
            let _ = tokio::time::timeout(Duration::from_secs(5), sigchld.recv()).await;
            reap_orphans(&children);
        }
    }))
}

/// Reaps every zombie child of ours that is not in `children`.
fn reap_orphans(children: &Children) {
    let me = rustix::process::getpid().as_raw_pid();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return;
    };
    for entry in entries.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|name| name.parse::<i32>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let Some((state, ppid)) = parse_stat(&stat) else {
            continue;
        };
        if state != 'Z' || ppid != me {
            continue;
        }
        let ours = u32::try_from(pid).map(|pid| children.lock().contains(&pid)).unwrap_or(true);
        if ours {
            continue;
        }
        if let Some(pid) = Pid::from_raw(pid) {
            let _ = waitpid(Some(pid), WaitOptions::NOHANG);
        }
    }
}

/// State letter and parent pid from `/proc/<pid>/stat` (the command name may hold spaces and
/// parentheses, so fields are counted after the last `)`).
fn parse_stat(stat: &str) -> Option<(char, i32)> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let ppid = fields.next()?.parse().ok()?;
    Some((state, ppid))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_stat_with_odd_command_names() {
        assert_eq!(parse_stat("42 (sh) Z 1 42 42 0 -1"), Some(('Z', 1)));
        assert_eq!(parse_stat("43 (a) b) (c) S 7 43 43 0 -1"), Some(('S', 7)));
        assert_eq!(parse_stat("garbage"), None);
    }
}
