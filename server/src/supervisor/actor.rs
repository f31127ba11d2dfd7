//! The supervisor task of one agent: its loop, the sandbox lifecycle (wake, sleep, destroy),
//! taking over a harness after a (re)connect, and driving waiting turns forward.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Instant;

use agenthold_sandboxd::protocol::{Control, DataKind, ProcessState, ResumeFrom};
use futures_util::future::BoxFuture;
use rand::RngCore;
use tokio::sync::{mpsc, oneshot};

use super::harness::{Harness, Pending, Phase, SessionPhase};
use super::turns::{Turn, TurnState};
use super::{Command, Deps, LifecycleError, TerminalAccess};
use crate::acp::messages::{self, method};
use crate::acp::wire;
use crate::ids::{AgentId, TurnId};
use crate::sandbox::{SandboxSpec, SandboxStatus};
use crate::secret::Secret;
use crate::store;
use crate::tunnel::link::{Incoming, Link};

/// An acknowledgement waiting for its commit: (channel, stdout offset, stored?).
pub(super) type PendingAck = BoxFuture<'static, (u32, u64, bool)>;

/// The supervisor's state.
pub struct Actor {
    pub(super) agent_id: AgentId,
    pub(super) deps: Arc<Deps>,
    pub(super) link: Option<Link>,
    inbox: Option<mpsc::Receiver<Incoming>>,
    pub(super) harness: Option<Harness>,
    pub(super) turns: Vec<Turn>,
    terminal_waiters: Vec<oneshot::Sender<Result<TerminalAccess, LifecycleError>>>,
    /// Acknowledgements in stdout order; each is sent once its events are committed.
    pub(super) acks: VecDeque<PendingAck>,
    /// When a disconnected sandbox must be back.
    connect_deadline: Option<Instant>,
    /// The last attempt to wake the sandbox failed: don't retry until a new command.
    wake_failed: bool,
}

/// Runs an agent's supervisor until the agent is destroyed or the registry drops it.
pub async fn run(agent_id: AgentId, deps: Arc<Deps>, mut commands: mpsc::Receiver<Command>) {
    let mut actor = Actor {
        agent_id,
        deps,
        link: None,
        inbox: None,
        harness: None,
        turns: Vec::new(),
        terminal_waiters: Vec::new(),
        acks: VecDeque::new(),
        connect_deadline: None,
        wake_failed: false,
    };
    if let Err(error) = actor.reload_turns().await {
        tracing::error!(%error, agent.id = %agent_id, "loading open turns");
    }
    if actor.turns.iter().any(|t| matches!(t.state, TurnState::Sent { .. })) {
        actor.connect_deadline = Some(Instant::now() + actor.deps.timeouts.reconnect_grace);
    }
    loop {
        let deadline = actor.next_deadline();
        tokio::select! {
            command = commands.recv() => match command {
                None => break,
                Some(Command::Destroy { reply }) => {
                    let outcome = actor.destroy().await;
                    let _ = reply.send(outcome);
                    break;
                }
                Some(command) => actor.on_command(command).await,
            },
            incoming = next_incoming(&mut actor.inbox) => match incoming {
                Some(incoming) => actor.on_incoming(incoming).await,
                None => actor.on_disconnect(),
            },
            Some((channel, offset, stored)) = next_ack(&mut actor.acks) => actor.on_ack(channel, offset, stored),
            () = sleep_until(deadline) => actor.on_deadline().await,
        }
        actor.advance().await;
    }
}

async fn next_incoming(inbox: &mut Option<mpsc::Receiver<Incoming>>) -> Option<Incoming> {
    match inbox {
        Some(inbox) => inbox.recv().await,
        None => std::future::pending().await,
    }
}

async fn next_ack(acks: &mut VecDeque<PendingAck>) -> Option<(u32, u64, bool)> {
    match acks.front_mut() {
        Some(front) => {
            let done = front.await;
            acks.pop_front();
            Some(done)
        }
        None => std::future::pending().await,
    }
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline.into()).await,
        None => std::future::pending().await,
    }
}

impl Actor {
    async fn on_command(&mut self, command: Command) {
        self.wake_failed = false;
        match command {
            Command::Attach { link, hello, inbox } => self.attach(link, hello, inbox).await,
            Command::Prompt => {
                if let Err(error) = self.reload_turns().await {
                    tracing::error!(%error, "loading open turns");
                }
            }
            Command::Cancel { session_id, reply } => {
                let cancelled = self.cancel(session_id).await;
                let _ = reply.send(cancelled);
            }
            Command::Sleep { reply } => {
                let outcome = self.sleep().await;
                let _ = reply.send(outcome);
            }
            Command::Wake { reply } => {
                let outcome = self.wake().await;
                let _ = reply.send(outcome);
            }
            Command::Terminal { reply } => self.terminal_waiters.push(reply),
            Command::Destroy { .. } => {}
        }
    }

    async fn on_incoming(&mut self, incoming: Incoming) {
        match incoming {
            Incoming::Data(frame) => match frame.kind {
                DataKind::Stdout => self.on_stdout(frame.channel, frame.offset, &frame.payload).await,
                DataKind::Stderr => self.on_stderr(frame.channel, &frame.payload),
                _ => {}
            },
            Incoming::Control(control) => match control {
                Control::Started { channel, .. } => self.on_started(channel),
                Control::StartFailed { channel, message } => {
                    if self.harness.as_ref().is_some_and(|h| h.channel == channel) {
                        let text = format!("the harness could not start: {message}");
                        self.harness_failed("HARNESS_START_FAILED", &text, false).await;
                    }
                }
                Control::Exited { channel, status, stdout_end } => {
                    match self.harness.as_mut().filter(|h| h.channel == channel) {
                        Some(harness) => harness.exited = Some((status, stdout_end)),
                        None => {
                            if let Some(link) = &self.link {
                                link.send(&Control::Forget { channel });
                            }
                        }
                    }
                    self.finish_exit_if_drained().await;
                }
                Control::StdinWritten { channel, offset } => self.on_stdin_written(channel, offset).await,
                other => tracing::debug!(agent.id = %self.agent_id, ?other, "unexpected control message"),
            },
        }
    }

    fn on_started(&mut self, channel: u32) {
        let Some(harness) = self.harness.as_mut().filter(|h| h.channel == channel && h.phase == Phase::Starting) else {
            return;
        };
        harness.phase = Phase::Initializing;
        harness.start_deadline = None;
        let deadline = Some(Instant::now() + self.deps.timeouts.harness_request);
        self.send_request(method::INITIALIZE, &messages::initialize(), Pending::Initialize, deadline);
    }

    fn on_ack(&mut self, channel: u32, offset: u64, stored: bool) {
        let Some(link) = &self.link else { return };
        if stored {
            link.send(&Control::Ack { channel, offset });
        } else {
            // Storing failed: drop the connection; sandboxd reconnects and resends from the
            // last acknowledged byte, and the takeover resumes from what the database holds.
            tracing::error!(agent.id = %self.agent_id, "events could not be stored; reconnecting the sandbox");
            self.link = None;
            self.inbox = None;
        }
    }

    fn on_disconnect(&mut self) {
        self.link = None;
        self.inbox = None;
        self.connect_deadline = Some(Instant::now() + self.deps.timeouts.reconnect_grace);
    }

    fn next_deadline(&self) -> Option<Instant> {
        let harness = self
            .harness
            .iter()
            .flat_map(|h| h.pending.values().filter_map(|(_, deadline)| *deadline).chain(h.start_deadline));
        let connect = self.connect_deadline.filter(|_| self.link.is_none());
        harness.chain(connect).min()
    }

    async fn on_deadline(&mut self) {
        let now = Instant::now();
        if self.link.is_none() && self.connect_deadline.is_some_and(|d| d <= now) {
            self.connect_deadline = None;
            if !self.turns.is_empty() || self.harness.is_some() {
                self.harness = None;
                let text = "the sandbox did not connect back in time (was it stopped or deleted?)";
                self.fail_turns(|_| true, "SANDBOX_UNREACHABLE", text).await;
                self.fail_terminal_waiters(text);
            }
            return;
        }
        let Some(harness) = self.harness.as_ref() else { return };
        let start_late = harness.start_deadline.is_some_and(|d| d <= now);
        let late =
            harness.pending.values().find(|(_, deadline)| deadline.is_some_and(|d| d <= now)).map(|(p, _)| p.clone());
        match (start_late, late) {
            (true, _) => self.harness_failed("HARNESS_TIMEOUT", "the harness did not start in time", true).await,
            (false, Some(Pending::Prompt { .. })) => {
                self.harness_failed("TURN_TIMEOUT", "the turn took longer than the turn time limit", true).await
            }
            (false, Some(pending)) => {
                let text = format!("the harness did not answer in time ({pending:?})");
                self.harness_failed("HARNESS_TIMEOUT", &text, true).await
            }
            (false, None) => {}
        }
    }

    fn fail_terminal_waiters(&mut self, message: &str) {
        for waiter in self.terminal_waiters.drain(..) {
            let _ = waiter.send(Err(LifecycleError::Failed(message.to_owned())));
        }
    }

    /// Moves waiting turns and terminal requests forward as far as the current state allows.
    async fn advance(&mut self) {
        let waiting: Vec<TurnId> = self.turns.iter().filter(|t| t.state == TurnState::Waiting).map(|t| t.id).collect();
        if waiting.is_empty() && self.terminal_waiters.is_empty() {
            return;
        }
        if self.link.is_none() {
            if !self.wake_failed
                && let Err(error) = self.wake().await
            {
                self.wake_failed = true;
                let text = error.to_string();
                self.fail_turns(|t| t.state == TurnState::Waiting, "SANDBOX_START_FAILED", &text).await;
                self.fail_terminal_waiters(&text);
            }
            return;
        }
        self.hand_out_terminals().await;
        if waiting.is_empty() {
            return;
        }
        let Some(harness) = self.harness.as_ref() else {
            self.start_harness().await;
            return;
        };
        if !matches!(harness.phase, Phase::Ready(_)) {
            return;
        }
        for turn_id in waiting {
            let Some(turn) = self.turns.iter().find(|t| t.id == turn_id) else { continue };
            let session_id = turn.session_id;
            match self.harness.as_ref().and_then(|h| h.sessions.get(&session_id)) {
                None => self.open_session(session_id).await,
                Some(SessionPhase::Opening) => {}
                Some(SessionPhase::Ready(_)) => self.send_prompt(turn_id).await,
            }
        }
    }

    async fn hand_out_terminals(&mut self) {
        let Some(link) = self.link.clone() else { return };
        for waiter in std::mem::take(&mut self.terminal_waiters) {
            let access = match store::sandboxes::allocate_channel(&self.deps.pool, self.agent_id).await {
                Ok(channel) => Ok(TerminalAccess {
                    link: link.clone(),
                    channel,
                    home_dir: self.deps.driver.home_dir(self.agent_id),
                    user: self.deps.driver.sandbox_user(),
                }),
                Err(error) => Err(LifecycleError::Failed(format!("allocating a terminal: {error}"))),
            };
            let _ = waiter.send(access);
        }
    }

    async fn start_harness(&mut self) {
        let Some(link) = self.link.clone() else { return };
        let agent = match store::agents::get(&self.deps.pool, self.agent_id).await {
            Ok(Some(agent)) => agent,
            Ok(None) => return,
            Err(error) => {
                tracing::error!(%error, "reading the agent");
                return;
            }
        };
        let tools_dir = self.deps.driver.tools_dir();
        let home_dir = self.deps.driver.home_dir(self.agent_id);
        let context = crate::harness::LaunchContext { agent: &agent, tools_dir: &tools_dir, home_dir: &home_dir };
        let launch = match crate::harness::adapter(&agent.harness).map(|a| a.launch(&context)) {
            Some(Ok(launch)) => launch,
            Some(Err(message)) => return self.fail_turns(|_| true, "HARNESS_START_FAILED", &message).await,
            None => return self.fail_turns(|_| true, "HARNESS_START_FAILED", "unknown harness").await,
        };
        let env = crate::harness::environment(&launch, &agent, &home_dir);
        let pool = &self.deps.pool;
        let started = async {
            let channel = store::sandboxes::allocate_channel(pool, self.agent_id).await?;
            let generation = store::sandboxes::start_harness(pool, self.agent_id, channel).await?;
            Ok::<_, sqlx::Error>((channel, generation))
        };
        let (channel, generation) = match started.await {
            Ok(started) => started,
            Err(error) => {
                tracing::error!(%error, "recording a harness start");
                return;
            }
        };
        let mut harness = Harness::new(generation, channel, Phase::Starting, 0, 0);
        harness.start_deadline = Some(Instant::now() + self.deps.timeouts.harness_request);
        self.harness = Some(harness);
        tracing::info!(agent.id = %self.agent_id, channel, generation, argv = ?launch.argv, "starting the harness");
        link.send(&Control::Start {
            channel,
            argv: launch.argv,
            env,
            cwd: home_dir,
            user: self.deps.driver.sandbox_user(),
        });
    }

    /// sandboxd (re)connected: take over whatever harness it still runs, from what the
    /// database holds, and tell it where to resend from.
    async fn attach(&mut self, link: Link, hello: Control, inbox: mpsc::Receiver<Incoming>) {
        // Let commits in flight land, so the stored stdout offset is current.
        while let Some(front) = self.acks.pop_front() {
            front.await;
        }
        let Control::Hello { processes, .. } = hello else { return };
        self.link = Some(link.clone());
        self.inbox = Some(inbox);
        self.connect_deadline = None;
        self.harness = None;
        if let Err(error) = self.take_over(&link, &processes).await {
            // Without the database we cannot tell what to resume: drop the connection (the
            // processes keep running) and let sandboxd dial again.
            tracing::error!(%error, agent.id = %self.agent_id, "taking over the sandbox; dropping its connection");
            self.harness = None;
            self.on_disconnect();
        }
    }

    async fn take_over(&mut self, link: &Link, processes: &[ProcessState]) -> sqlx::Result<()> {
        let pool = self.deps.pool.clone();
        let pool = &pool;
        if let Some(highest) = processes.iter().map(|p| p.channel).max() {
            store::sandboxes::bump_next_channel(pool, self.agent_id, highest).await?;
        }
        self.turns.clear();
        self.reload_turns().await?;
        let Some(row) = store::sandboxes::get(pool, self.agent_id).await? else { return Ok(()) };
        let running = row.harness_channel.and_then(|channel| {
            let channel = u32::try_from(channel).ok()?;
            processes.iter().find(|p| p.channel == channel)
        });
        let capabilities = row.harness_init.as_ref().and_then(|init| messages::parse_initialize(init).ok());
        let mut resume = Vec::new();
        let mut stdin_written = None;
        match (running, capabilities) {
            (Some(process), Some(capabilities)) => {
                let from = u64::try_from(row.harness_stdout_offset).unwrap_or(0).max(process.stdout_acked);
                let mut harness = Harness::new(
                    row.harness_generation,
                    process.channel,
                    Phase::Ready(capabilities),
                    from,
                    process.stdin_written,
                );
                harness.exited = process.exit.map(|status| (status, process.stdout_end));
                for session_id in &row.harness_sessions {
                    if let Some(acp_id) = store::sessions::get(pool, *session_id).await?.and_then(|s| s.acp_session_id)
                    {
                        harness.sessions.insert(*session_id, SessionPhase::Ready(acp_id));
                    }
                }
                for turn in &self.turns {
                    if let TurnState::Sent { request_id, generation, .. } = &turn.state
                        && *generation == harness.generation
                    {
                        harness.pending.insert(
                            request_id.clone(),
                            (Pending::Prompt { turn_id: turn.id }, Some(Instant::now() + self.deps.timeouts.turn)),
                        );
                    }
                }
                tracing::info!(agent.id = %self.agent_id, channel = process.channel, from, "took over the running harness");
                resume.push(ResumeFrom { channel: process.channel, offset: from });
                self.harness = Some(harness);
                stdin_written = Some(process.stdin_written);
            }
            _ => {
                if row.harness_channel.is_some() {
                    store::sandboxes::clear_harness(pool, self.agent_id, row.harness_generation).await?;
                }
            }
        }
        link.send(&Control::Resume { channels: resume });
        // After the resume: sandboxd takes stdin for a process once it knows the server keeps it.
        if let Some(stdin_written) = stdin_written {
            self.resend_undelivered_prompts(stdin_written);
        }
        let generation = self.harness.as_ref().map(|h| h.generation);
        let lost = |t: &Turn| matches!(&t.state, TurnState::Sent { generation: g, .. } if Some(*g) != generation);
        self.fail_turns(lost, "HARNESS_LOST", "the harness process was lost (the sandbox restarted)").await;
        self.finish_exit_if_drained().await;
        Ok(())
    }

    /// Prompts whose bytes sandboxd never wrote (lost in flight with a dropped connection) are
    /// sent again with the same request id.
    fn resend_undelivered_prompts(&mut self, stdin_written: u64) {
        let lost: Vec<(String, serde_json::Value, crate::ids::SessionId)> = self
            .turns
            .iter()
            .filter_map(|t| match &t.state {
                TurnState::Sent { request_id, stdin_end, delivered: false, .. } if *stdin_end > stdin_written => {
                    Some((request_id.clone(), t.prompt.clone(), t.session_id))
                }
                _ => None,
            })
            .collect();
        for (request_id, prompt, session_id) in lost {
            let Some(SessionPhase::Ready(acp_id)) =
                self.harness.as_ref().and_then(|h| h.sessions.get(&session_id)).cloned()
            else {
                continue;
            };
            let blocks = serde_json::from_value(prompt).unwrap_or_default();
            tracing::info!(agent.id = %self.agent_id, %request_id, "resending a prompt lost in flight");
            self.write_stdin(wire::request(&request_id, method::SESSION_PROMPT, &messages::prompt(&acp_id, blocks)));
        }
    }

    /// Makes sure the sandbox exists and runs (recreating it, with the same home, if it was
    /// deleted behind the server's back). sandboxd then dials in.
    async fn wake(&mut self) -> Result<(), LifecycleError> {
        if self.link.is_some() {
            return Ok(());
        }
        let failed =
            |e: crate::sandbox::DriverError| LifecycleError::Failed(format!("the sandbox could not start: {e}"));
        let driver = Arc::clone(&self.deps.driver);
        let began = Instant::now();
        let status = driver.status(self.agent_id).await.map_err(failed)?;
        if status == SandboxStatus::Missing {
            let agent = store::agents::get(&self.deps.pool, self.agent_id)
                .await
                .map_err(|e| LifecycleError::Failed(e.to_string()))?
                .ok_or_else(|| LifecycleError::Failed("the agent was deleted".to_owned()))?;
            let token = mint_token();
            let hash = store::tokens::hash_token(token.expose());
            store::sandboxes::set_token(&self.deps.pool, self.agent_id, &hash)
                .await
                .map_err(|e| LifecycleError::Failed(e.to_string()))?;
            let spec = SandboxSpec {
                agent_id: self.agent_id,
                image: agent.image,
                tunnel_url: self.deps.tunnel_url.clone(),
                token,
                cpus: agent.cpus,
                memory_mib: agent.memory_mib,
                pids_limit: agent.pids_limit,
            };
            let handle = driver.create(spec).await.map_err(failed)?;
            let _ = store::sandboxes::set_handle(&self.deps.pool, self.agent_id, Some(&handle)).await;
        }
        let created = Instant::now();
        if status != SandboxStatus::Running {
            driver.start(self.agent_id).await.map_err(failed)?;
        }
        tracing::info!(
            agent.id = %self.agent_id,
            was = ?status,
            create_ms = (created - began).as_millis() as u64,
            start_ms = created.elapsed().as_millis() as u64,
            "sandbox started"
        );
        if self.connect_deadline.is_none_or(|d| d < Instant::now()) {
            self.connect_deadline = Some(Instant::now() + self.deps.timeouts.reconnect_grace);
        }
        Ok(())
    }

    async fn sleep(&mut self) -> Result<(), LifecycleError> {
        if !self.turns.is_empty() {
            return Err(LifecycleError::Busy);
        }
        self.deps
            .driver
            .stop(self.agent_id)
            .await
            .map_err(|e| LifecycleError::Failed(format!("the sandbox could not stop: {e}")))?;
        if let Some(harness) = self.harness.take() {
            let _ = store::sandboxes::clear_harness(&self.deps.pool, self.agent_id, harness.generation).await;
        }
        self.link = None;
        self.inbox = None;
        self.connect_deadline = None;
        Ok(())
    }

    async fn destroy(&mut self) -> Result<(), LifecycleError> {
        self.link = None;
        self.inbox = None;
        self.deps
            .driver
            .destroy(self.agent_id)
            .await
            .map_err(|e| LifecycleError::Failed(format!("the sandbox could not be removed: {e}")))
    }
}

/// A fresh sandbox token: 32 random bytes, hex.
fn mint_token() -> Secret {
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    Secret::new(bytes.iter().map(|b| format!("{b:02x}")).collect::<String>())
}
