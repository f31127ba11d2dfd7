//! What sandboxd holds (processes and terminals by channel) and how it answers each control
//! message, data frame and task event. The run loop owns the connection; this module only gets a
//! [`Link`] to send on, and sends live output only once the server has answered `Hello` with
//! `Resume`.

use std::collections::{BTreeMap, HashMap};
use std::ffi::OsString;

use tokio_tungstenite::tungstenite::Message;

use super::connection::Link;
use super::event::{BestEffort, Event, Key};
use super::log;
use super::process::{self, Process, Sinks, Spec};
use super::stdin;
use super::terminal::{self, Terminal};
use super::users::{self, Account, AccountFiles};
use crate::protocol::{Control, DataFrame, DataKind, PROTOCOL_VERSION, ProcessState, ResumeFrom};

/// SIGKILL.
const SIGKILL: i32 = 9;

/// The link, if output may flow on it now.
fn live(link: Option<&mut Link>) -> Option<&mut Link> {
    link.filter(|link| link.live && !link.broken)
}

/// Everything sandboxd runs and holds.
pub struct State {
    /// Cap on unacknowledged stdout bytes per process.
    buffer_bytes: usize,
    /// sandboxd is root inside a sandbox: missing users may be created.
    may_create_users: bool,
    /// The account databases.
    accounts: AccountFiles,
    /// The image's environment (sandboxd's own less `AGENTHOLD_*`), under every process's.
    image_env: Vec<(OsString, OsString)>,
    /// Where spawned tasks report.
    sinks: Sinks,
    /// Next spawn id.
    next_id: u64,
    /// Processes by channel.
    processes: BTreeMap<u32, Process>,
    /// Terminals by channel.
    terminals: BTreeMap<u32, Terminal>,
}

impl State {
    /// Empty state.
    pub fn new(
        buffer_bytes: usize,
        may_create_users: bool,
        accounts: AccountFiles,
        image_env: Vec<(OsString, OsString)>,
        sinks: Sinks,
    ) -> Self {
        Self {
            buffer_bytes,
            may_create_users,
            accounts,
            image_env,
            sinks,
            next_id: 1,
            processes: BTreeMap::new(),
            terminals: BTreeMap::new(),
        }
    }

    /// Sends `Hello` on a new connection.
    pub async fn hello(&self, link: &mut Link) {
        let processes = self
            .processes
            .iter()
            .map(|(&channel, p)| ProcessState {
                channel,
                pid: Some(p.pid).filter(|&pid| pid != 0),
                stdout_acked: p.buffer.acked(),
                stdout_end: p.buffer.end(),
                stdin_written: p.stdin.written(),
                stdin_accepted: p.stdin_accepted,
                exit: p.exit(),
            })
            .collect();
        let hello =
            Control::Hello { protocol: PROTOCOL_VERSION, version: env!("CARGO_PKG_VERSION").to_owned(), processes };
        link.control(&hello).await;
    }

    /// Handles one WebSocket message from the server.
    pub async fn on_message(&mut self, message: Message, link: &mut Link) {
        match message {
            Message::Text(text) => match serde_json::from_str::<Control>(&text) {
                Ok(control) => self.on_control(control, link).await,
                Err(err) => log(format_args!("ignoring a bad control message: {err}")),
            },
            Message::Binary(bytes) => match DataFrame::decode(bytes) {
                Ok(frame) => self.on_data(frame, link).await,
                Err(err) => log(format_args!("ignoring a bad data frame: {err}")),
            },
            Message::Ping(_) | Message::Pong(_) | Message::Close(_) | Message::Frame(_) => {}
        }
    }

    fn spawn_key(&mut self, channel: u32) -> Key {
        let id = self.next_id;
        self.next_id += 1;
        Key { channel, id }
    }

    /// Resolves who a process runs as: `(account to switch to, account for HOME/USER)`.
    fn accounts_for(&self, user: Option<&str>) -> Result<(Option<Account>, Option<Account>), String> {
        match user {
            Some(user) => {
                let account = users::resolve(&self.accounts, user, self.may_create_users)
                    .map_err(|err| format!("user {user}: {err}"))?;
                Ok((Some(account.clone()), Some(account)))
            }
            None => {
                let own = self.accounts.by_uid(rustix::process::getuid().as_raw()).ok().flatten();
                Ok((None, own))
            }
        }
    }

    async fn on_control(&mut self, control: Control, link: &mut Link) {
        match control {
            Control::Resume { channels } => self.resume(&channels, link).await,
            Control::Start { channel, argv, env, cwd, user } => {
                let reply = match self.start(channel, &argv, env, &cwd, user.as_deref()) {
                    Ok(pid) => Control::Started { channel, pid },
                    Err(message) => {
                        log(format_args!("channel {channel}: start failed: {message}"));
                        Control::StartFailed { channel, message }
                    }
                };
                link.control(&reply).await;
            }
            Control::Ack { channel, offset } => match self.processes.get_mut(&channel) {
                Some(p) => {
                    if offset > p.buffer.end() {
                        log(format_args!("channel {channel}: ack {offset} past the end {}", p.buffer.end()));
                    }
                    let freed = p.buffer.ack(offset);
                    p.room.add_permits(usize::try_from(freed).unwrap_or(usize::MAX));
                }
                None => log(format_args!("ack for unknown channel {channel}")),
            },
            Control::Signal { channel, signal } => match self.processes.get(&channel) {
                Some(p) => {
                    if let Err(err) = process::signal_group(p.pid, signal) {
                        log(format_args!("channel {channel}: {err}"));
                    }
                }
                None => log(format_args!("signal for unknown channel {channel}")),
            },
            Control::CloseStdin { channel } => match self.processes.get_mut(&channel) {
                Some(p) => p.stdin.close(),
                None => log(format_args!("close_stdin for unknown channel {channel}")),
            },
            Control::Forget { channel } => match self.processes.remove(&channel) {
                Some(p) => {
                    if p.running() {
                        log(format_args!("channel {channel}: forgotten while running; killing it"));
                        let _ = process::signal_group(p.pid, SIGKILL);
                    }
                }
                None => log(format_args!("forget for unknown channel {channel}")),
            },
            Control::OpenTerminal { channel, cols, rows, argv, env, cwd, user } => {
                if let Err(message) = self.open_terminal(channel, cols, rows, &argv, env, &cwd, user.as_deref()) {
                    log(format_args!("terminal {channel}: open failed: {message}"));
                    link.control(&Control::StartFailed { channel, message }).await;
                }
            }
            Control::Resize { channel, cols, rows } => match self.terminals.get_mut(&channel) {
                Some(t) => t.resize(channel, cols, rows),
                None => log(format_args!("resize for unknown terminal {channel}")),
            },
            Control::CloseTerminal { channel } => match self.terminals.get_mut(&channel) {
                Some(t) => t.hang_up(),
                None => log(format_args!("close_terminal for unknown terminal {channel}")),
            },
            Control::Hello { .. }
            | Control::Started { .. }
            | Control::StartFailed { .. }
            | Control::Exited { .. }
            | Control::TerminalClosed { .. }
            | Control::StdinWritten { .. }
            | Control::StdinRejected { .. } => {
                log(format_args!("ignoring a sandboxd-to-server message from the server"))
            }
        }
    }

    /// Resends what the server asks for, then goes live; kills and forgets unlisted processes.
    async fn resume(&mut self, channels: &[ResumeFrom], link: &mut Link) {
        let wanted: HashMap<u32, u64> = channels.iter().map(|r| (r.channel, r.offset)).collect();
        for channel in wanted.keys().filter(|c| !self.processes.contains_key(c)) {
            log(format_args!("resume names unknown channel {channel}"));
        }
        let held: Vec<u32> = self.processes.keys().copied().collect();
        for channel in held {
            let Some(&offset) = wanted.get(&channel) else {
                if let Some(p) = self.processes.remove(&channel) {
                    log(format_args!("channel {channel}: unknown to the server; killing and forgetting it"));
                    if p.running() {
                        let _ = process::signal_group(p.pid, SIGKILL);
                    }
                }
                continue;
            };
            let Some(p) = self.processes.get_mut(&channel) else {
                continue;
            };
            if offset < p.buffer.acked() || offset > p.buffer.end() {
                log(format_args!(
                    "channel {channel}: resume from {offset}, but held stdout is {}..{}",
                    p.buffer.acked(),
                    p.buffer.end()
                ));
            }
            let freed = p.buffer.ack(offset);
            p.room.add_permits(usize::try_from(freed).unwrap_or(usize::MAX));
            for (at, payload) in p.buffer.frames_from(offset) {
                link.data(&DataFrame { kind: DataKind::Stdout, channel, offset: at, payload }).await;
            }
            if let Some(status) = p.exit() {
                link.control(&Control::Exited { channel, status, stdout_end: p.buffer.end() }).await;
            }
        }
        link.live = true;
    }

    fn start(
        &mut self,
        channel: u32,
        argv: &[String],
        env: Vec<(String, String)>,
        cwd: &str,
        user: Option<&str>,
    ) -> Result<u32, String> {
        if self.processes.contains_key(&channel) {
            return Err(format!("channel {channel} is in use"));
        }
        let (run_as, env_account) = self.accounts_for(user)?;
        let env = users::environment(&self.image_env, env, env_account.as_ref());
        let key = self.spawn_key(channel);
        let spec = Spec { argv, env: &env, cwd, account: run_as.as_ref() };
        let program = argv.first().map_or("", String::as_str);
        let p = process::spawn(key, &spec, self.buffer_bytes, &self.sinks)
            .map_err(|err| format!("cannot run {program:?} in {cwd:?}: {err}"))?;
        let pid = p.pid;
        self.processes.insert(channel, p);
        Ok(pid)
    }

    #[expect(clippy::too_many_arguments, reason = "the fields of Control::OpenTerminal")]
    fn open_terminal(
        &mut self,
        channel: u32,
        cols: u16,
        rows: u16,
        argv: &[String],
        env: Vec<(String, String)>,
        cwd: &str,
        user: Option<&str>,
    ) -> Result<(), String> {
        if self.terminals.contains_key(&channel) {
            return Err(format!("terminal channel {channel} is in use"));
        }
        let (run_as, env_account) = self.accounts_for(user)?;
        let env = users::environment(&self.image_env, env, env_account.as_ref());
        let key = self.spawn_key(channel);
        let spec = Spec { argv, env: &env, cwd, account: run_as.as_ref() };
        let t = terminal::open(key, &spec, cols, rows, &self.sinks)?;
        self.terminals.insert(channel, t);
        Ok(())
    }

    /// A binary frame from the server: stdin (placed exactly by offset, or refused with
    /// `StdinRejected`; see [`stdin`]) or terminal input.
    async fn on_data(&mut self, frame: DataFrame, link: &mut Link) {
        let channel = frame.channel;
        match frame.kind {
            DataKind::Stdin => {
                let Some(p) = self.processes.get_mut(&channel) else {
                    log(format_args!("stdin for unknown channel {channel}"));
                    return;
                };
                if let Err(rejected) =
                    stdin::accept(channel, &p.stdin, &mut p.stdin_accepted, frame.offset, &frame.payload)
                {
                    if let Control::StdinRejected { reason, .. } = &rejected {
                        log(format_args!("channel {channel}: stdin frame at {} rejected: {reason}", frame.offset));
                    }
                    link.control(&rejected).await;
                }
            }
            DataKind::TerminalInput => match self.terminals.get_mut(&channel) {
                Some(t) => t.input(channel, &frame.payload),
                None => log(format_args!("input for unknown terminal {channel}")),
            },
            DataKind::Stdout | DataKind::Stderr | DataKind::TerminalOutput => {
                log(format_args!("ignoring an output frame from the server (channel {channel})"));
            }
        }
    }

    fn process_for(&mut self, key: Key) -> Option<&mut Process> {
        self.processes.get_mut(&key.channel).filter(|p| p.id == key.id)
    }

    /// A task's lossless event.
    pub async fn on_event(&mut self, event: Event, link: Option<&mut Link>) {
        match event {
            Event::Stdout(key, chunk) => {
                let Some(p) = self.process_for(key) else {
                    return;
                };
                let offset = p.buffer.push(chunk.clone());
                if let Some(link) = live(link) {
                    link.data(&DataFrame { kind: DataKind::Stdout, channel: key.channel, offset, payload: chunk })
                        .await;
                }
            }
            Event::StdoutEof(key) | Event::Exited(key, _) => {
                let Some(p) = self.process_for(key) else {
                    return;
                };
                match event {
                    Event::Exited(_, status) => p.status = Some(status),
                    _ => p.stdout_eof = true,
                }
                if let (Some(status), Some(link)) = (p.exit(), live(link)) {
                    let exited = Control::Exited { channel: key.channel, status, stdout_end: p.buffer.end() };
                    link.control(&exited).await;
                }
            }
            Event::StdinWritten(key, offset) => {
                if self.process_for(key).is_none() {
                    return;
                }
                if let Some(link) = live(link) {
                    link.control(&Control::StdinWritten { channel: key.channel, offset }).await;
                }
            }
            Event::TerminalClosed(key) => {
                if self.terminals.get(&key.channel).is_some_and(|t| t.id == key.id) {
                    self.terminals.remove(&key.channel);
                    if let Some(link) = live(link) {
                        link.control(&Control::TerminalClosed { channel: key.channel }).await;
                    }
                }
            }
        }
    }

    /// Best-effort output: sent when live, dropped otherwise.
    pub async fn on_best(&mut self, output: BestEffort, link: Option<&mut Link>) {
        if let BestEffort::TerminalClosed(key) = output {
            return self.on_event(Event::TerminalClosed(key), link).await;
        }
        let Some(link) = live(link) else { return };
        let frame = match output {
            BestEffort::Stderr(key, offset, payload) => {
                if self.process_for(key).is_none() {
                    return;
                }
                DataFrame { kind: DataKind::Stderr, channel: key.channel, offset, payload }
            }
            BestEffort::TerminalOutput(key, offset, payload) => {
                if self.terminals.get(&key.channel).is_none_or(|t| t.id != key.id) {
                    return;
                }
                DataFrame { kind: DataKind::TerminalOutput, channel: key.channel, offset, payload }
            }
            BestEffort::TerminalClosed(_) => return,
        };
        link.data(&frame).await;
    }

    /// Signals every running process group and terminal (shutdown).
    pub fn signal_all(&self, signal: i32) {
        let pids = self.processes.values().filter(|p| p.running()).map(|p| p.pid);
        for pid in pids.chain(self.terminals.values().map(|t| t.pid)) {
            let _ = process::signal_group(pid, signal);
        }
    }

    /// Nothing runs any more.
    pub fn all_done(&self) -> bool {
        self.terminals.is_empty() && self.processes.values().all(|p| !p.running())
    }
}
