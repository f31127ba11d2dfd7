//! The harness process as the supervisor sees it: its phase, the requests we are waiting on,
//! the sessions it knows, and its stdout turned line by line into events. Each line's events
//! are committed together with the stdout offset just past the line, and sandboxd is told it
//! may drop those bytes only after that commit — so a restarted server resumes exactly where
//! the stored log ends: nothing lost, nothing repeated.

use std::collections::{HashMap, VecDeque};
use std::time::Instant;

use agenthold_sandboxd::protocol::{Control, DataKind, ExitStatus};
use serde_json::{Value, json};

use super::actor::Actor;
use super::turns::{TurnState, ending};
use crate::acp::messages::{self, Capabilities, method};
use crate::acp::wire::{self, FromHarness, RpcId};
use crate::events::appender::SideEffect;
use crate::events::{EventKind, NewEvent};
use crate::ids::{SessionId, TurnId};
use crate::store;

/// Longest line a harness may print (a bigger one is a protocol error).
const MAX_LINE_BYTES: usize = 64 << 20;
/// stderr kept for error events.
const STDERR_TAIL_BYTES: usize = 2048;

/// Where the harness process is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// `Start` sent; waiting for `Started`.
    Starting,
    /// `initialize` sent.
    Initializing,
    /// Initialized with these capabilities.
    Ready(Capabilities),
}

/// What a request we sent was for.
#[derive(Debug, Clone)]
pub enum Pending {
    /// `initialize`.
    Initialize,
    /// `session/new`; `reset` when it replaces a session the harness could not restore.
    NewSession { session_id: SessionId, reset: bool },
    /// `session/load` or `session/resume`.
    Restore { session_id: SessionId },
    /// `session/prompt` of a turn.
    Prompt { turn_id: TurnId },
}

/// A session as the current harness knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionPhase {
    /// Being created, loaded or resumed (updates replayed meanwhile are not stored).
    Opening,
    /// Known under this ACP id.
    Ready(String),
}

/// The current harness process.
pub struct Harness {
    /// Bumped on every start; offsets belong to one generation.
    pub generation: i64,
    /// Its tunnel channel.
    pub channel: u32,
    /// Where it is.
    pub phase: Phase,
    /// stdout bytes received (including a partial last line).
    pub received: u64,
    /// stdout bytes through the last complete line handled.
    pub consumed: u64,
    /// The partial last line.
    pub partial: Vec<u8>,
    /// stdin bytes sent.
    pub stdin: u64,
    /// Our requests awaiting an answer, with their deadlines.
    pub pending: HashMap<String, (Pending, Option<Instant>)>,
    /// Sessions it knows or is opening.
    pub sessions: HashMap<SessionId, SessionPhase>,
    /// When it should have answered `Start`.
    pub start_deadline: Option<Instant>,
    /// Its exit, once sandboxd reported it: status and total stdout.
    pub exited: Option<(ExitStatus, u64)>,
    /// The end of its stderr.
    pub stderr_tail: VecDeque<u8>,
}

impl Harness {
    /// A harness just started (or taken over) on `channel`.
    pub fn new(generation: i64, channel: u32, phase: Phase, stdout_from: u64, stdin: u64) -> Self {
        Self {
            generation,
            channel,
            phase,
            received: stdout_from,
            consumed: stdout_from,
            partial: Vec::new(),
            stdin,
            pending: HashMap::new(),
            sessions: HashMap::new(),
            start_deadline: None,
            exited: None,
            stderr_tail: VecDeque::new(),
        }
    }

    /// The session with this ACP id, if ready.
    pub fn session_by_acp(&self, acp_id: &str) -> Option<(SessionId, &SessionPhase)> {
        self.sessions.iter().find_map(|(id, phase)| match phase {
            SessionPhase::Ready(known) if known == acp_id => Some((*id, phase)),
            _ => None,
        })
    }

    /// The end of stderr as text.
    pub fn stderr_text(&self) -> String {
        let bytes: Vec<u8> = self.stderr_tail.iter().copied().collect();
        String::from_utf8_lossy(&bytes).trim().to_owned()
    }
}

impl Actor {
    /// Writes one line to the harness's stdin; returns the stdin offset just past it.
    pub(super) fn write_stdin(&mut self, line: Vec<u8>) -> Option<u64> {
        let (harness, link) = (self.harness.as_mut()?, self.link.as_ref()?);
        let offset = harness.stdin;
        harness.stdin += line.len() as u64;
        link.send_data(DataKind::Stdin, harness.channel, offset, line.into());
        Some(harness.stdin)
    }

    /// Sends a request we wait for; returns its id.
    pub(super) fn send_request(
        &mut self,
        method: &str,
        params: &Value,
        pending: Pending,
        deadline: Option<Instant>,
    ) -> String {
        let id = wire::new_request_id();
        self.write_stdin(wire::request(&id, method, params));
        if let Some(harness) = self.harness.as_mut() {
            harness.pending.insert(id.clone(), (pending, deadline));
        }
        id
    }

    /// Sends `session/cancel` for a session the harness knows.
    pub(super) fn send_cancel(&mut self, session_id: SessionId) {
        let acp_id = match self.harness.as_ref().and_then(|h| h.sessions.get(&session_id)) {
            Some(SessionPhase::Ready(acp_id)) => acp_id.clone(),
            _ => return,
        };
        self.write_stdin(wire::notification(method::SESSION_CANCEL, &messages::cancel(&acp_id)));
    }

    /// Handles stdout bytes of the harness (resends after a reconnect are trimmed).
    pub(super) async fn on_stdout(&mut self, channel: u32, offset: u64, payload: &[u8]) {
        let Some(harness) = self.harness.as_mut().filter(|h| h.channel == channel) else { return };
        let end = offset + payload.len() as u64;
        if end <= harness.received {
            return;
        }
        if offset > harness.received {
            tracing::error!(agent.id = %self.agent_id, offset, expected = harness.received, "gap in harness stdout");
        }
        let skip = usize::try_from(harness.received.saturating_sub(offset)).unwrap_or(usize::MAX).min(payload.len());
        let mut buffer = std::mem::take(&mut harness.partial);
        buffer.extend_from_slice(&payload[skip..]);
        harness.received = end;
        let generation = harness.generation;

        let mut start = 0;
        while let Some(newline) = buffer[start..].iter().position(|b| *b == b'\n') {
            let line = &buffer[start..start + newline];
            start += newline + 1;
            let Some(harness) = self.harness.as_mut().filter(|h| h.generation == generation) else { return };
            harness.consumed += (newline + 1) as u64;
            let consumed = harness.consumed;
            self.on_line(line, consumed).await;
        }
        let Some(harness) = self.harness.as_mut().filter(|h| h.generation == generation) else { return };
        harness.partial = buffer.split_off(start);
        if harness.partial.len() > MAX_LINE_BYTES {
            self.harness_failed("HARNESS_PROTOCOL_ERROR", "the harness printed a line over 64 MiB", true).await;
            return;
        }
        self.finish_exit_if_drained().await;
    }

    /// Keeps the end of the harness's stderr for error events.
    pub(super) fn on_stderr(&mut self, channel: u32, payload: &[u8]) {
        let Some(harness) = self.harness.as_mut().filter(|h| h.channel == channel) else { return };
        tracing::debug!(agent.id = %self.agent_id, stderr = %String::from_utf8_lossy(payload).trim_end(), "harness stderr");
        harness.stderr_tail.extend(payload.iter().copied());
        while harness.stderr_tail.len() > STDERR_TAIL_BYTES {
            harness.stderr_tail.pop_front();
        }
    }

    /// One complete line; `end` is the stdout offset just past it.
    async fn on_line(&mut self, line: &[u8], end: u64) {
        if line.iter().all(u8::is_ascii_whitespace) {
            self.commit(Vec::new(), Vec::new(), end).await;
            return;
        }
        let message = match wire::parse_line(line) {
            Ok(message) => message,
            Err(garbage) => {
                let text = format!("the harness printed something that is not ACP (JSON-RPC): {}", garbage.excerpt);
                self.harness_failed("HARNESS_PROTOCOL_ERROR", &text, true).await;
                return;
            }
        };
        let mut events = Vec::new();
        let mut effects = Vec::new();
        match message {
            FromHarness::Notification { method, params } if method == method::SESSION_UPDATE => {
                if let Some(event) = self.update_event(&params) {
                    events.push(event);
                }
            }
            FromHarness::Notification { method, .. } => {
                tracing::debug!(agent.id = %self.agent_id, %method, "ignoring a harness notification");
            }
            FromHarness::Request { id, method, params } if method == method::REQUEST_PERMISSION => {
                events.extend(self.answer_permission(id, &params));
            }
            FromHarness::Request { id, method, .. } => {
                tracing::debug!(agent.id = %self.agent_id, %method, "refusing a harness request");
                self.write_stdin(wire::error_response(&id, -32601, &format!("method not found: {method}")));
            }
            FromHarness::Response { id, outcome } => {
                let pending = self.harness.as_mut().and_then(|h| h.pending.remove(&id));
                if let Some((pending, _)) = pending {
                    self.on_response(pending, outcome, &mut events, &mut effects).await;
                }
            }
        }
        self.commit(events, effects, end).await;
    }

    /// Stores a line's events with the stdout offset; queues the acknowledgement after it.
    async fn commit(&mut self, events: Vec<NewEvent>, mut effects: Vec<SideEffect>, end: u64) {
        let Some(harness) = self.harness.as_ref() else { return };
        let channel = harness.channel;
        if events.is_empty() && effects.is_empty() {
            self.acks.push_back(Box::pin(async move { (channel, end, true) }));
            return;
        }
        effects.push(SideEffect::StdoutStored {
            agent_id: self.agent_id,
            generation: harness.generation,
            offset: i64::try_from(end).unwrap_or(i64::MAX),
        });
        let committed = self.deps.appender.submit(events, effects).await;
        self.acks.push_back(Box::pin(async move {
            let stored = matches!(committed.await, Ok(Ok(_)));
            (channel, end, stored)
        }));
    }

    /// An `update` event for a `session/update`, unless its session is replaying history.
    fn update_event(&self, params: &Value) -> Option<NewEvent> {
        let acp_id = params.get("sessionId")?.as_str()?;
        let harness = self.harness.as_ref()?;
        let Some((session_id, _)) = harness.session_by_acp(acp_id) else {
            // Unknown, or still opening: history replayed during session/load is not stored again.
            return None;
        };
        let update = params.get("update").cloned().unwrap_or(Value::Null);
        Some(NewEvent::new(session_id, EventKind::Update, update))
    }

    /// Answers a permission request by the agent's policy (auto-approve): the `permission`
    /// and `permission_resolved` events.
    fn answer_permission(&mut self, id: RpcId, params: &Value) -> Vec<NewEvent> {
        let request = match messages::parse_permission_request(params) {
            Ok(request) => request,
            Err(message) => {
                self.write_stdin(wire::error_response(&id, -32602, &message));
                return Vec::new();
            }
        };
        let acp_id = request.session_id.0.to_string();
        let Some(session_id) = self.harness.as_ref().and_then(|h| h.session_by_acp(&acp_id)).map(|(s, _)| s) else {
            self.write_stdin(wire::error_response(&id, -32002, "unknown session"));
            return Vec::new();
        };
        let (answer, chosen) = messages::auto_approve(&request.options);
        self.write_stdin(wire::response(&id, &answer));
        let asked = json!({
            "request_id": id,
            "tool_call": params.get("toolCall"),
            "options": params.get("options"),
            "policy": "auto-approve",
        });
        let resolved = json!({
            "request_id": id,
            "outcome": answer.get("outcome"),
            "option_kind": chosen.map(|option| option.kind),
            "by": "policy",
            "policy": "auto-approve",
        });
        vec![
            NewEvent::new(session_id, EventKind::Permission, asked),
            NewEvent::new(session_id, EventKind::PermissionResolved, resolved),
        ]
    }

    async fn on_response(
        &mut self,
        pending: Pending,
        outcome: Result<Value, Value>,
        events: &mut Vec<NewEvent>,
        effects: &mut Vec<SideEffect>,
    ) {
        match pending {
            Pending::Initialize => self.on_initialized(outcome).await,
            Pending::NewSession { session_id, reset } => {
                let created = outcome.map_err(|e| e.to_string()).and_then(|r| messages::parse_new_session(&r));
                match created {
                    Ok(acp_id) => {
                        self.session_ready(session_id, acp_id).await;
                        if reset {
                            events.push(NewEvent::notice(
                                session_id,
                                "CONTEXT_RESET",
                                "the harness could not restore this session; a new one started and its context was reset",
                            ));
                        }
                    }
                    Err(message) => {
                        if let Some(harness) = self.harness.as_mut() {
                            harness.sessions.remove(&session_id);
                        }
                        let text = format!("the harness could not start the session: {message}");
                        self.fail_turns(|t| t.session_id == session_id, "SESSION_START_FAILED", &text).await;
                    }
                }
            }
            Pending::Restore { session_id } => match outcome {
                Ok(_) => {
                    let acp_id = store::sessions::get(&self.deps.pool, session_id)
                        .await
                        .ok()
                        .flatten()
                        .and_then(|s| s.acp_session_id);
                    match acp_id {
                        Some(acp_id) => self.session_ready(session_id, acp_id).await,
                        None => self.open_new_session(session_id, true),
                    }
                }
                Err(error) => {
                    tracing::info!(agent.id = %self.agent_id, %error, "restoring a session failed; starting a new one");
                    self.open_new_session(session_id, true);
                }
            },
            Pending::Prompt { turn_id } => {
                let Some(index) = self.turns.iter().position(|t| t.id == turn_id) else { return };
                let turn = self.turns.remove(index);
                let (stop_reason, usage) = match outcome {
                    Ok(result) => match messages::parse_prompt(&result) {
                        Ok(parsed) => parsed,
                        Err(message) => {
                            events.push(NewEvent::error(turn.session_id, "HARNESS_PROTOCOL_ERROR", message));
                            ("error".to_owned(), None)
                        }
                    },
                    Err(error) => {
                        let message =
                            error.get("message").and_then(Value::as_str).unwrap_or("the harness failed the turn");
                        let payload = json!({"code": "HARNESS_ERROR", "message": message, "rpc_error": error});
                        events.push(NewEvent::new(turn.session_id, EventKind::Error, payload));
                        ("error".to_owned(), None)
                    }
                };
                let (event, effect) = ending(&turn, &stop_reason, usage);
                events.push(event);
                effects.push(effect);
            }
        }
    }

    async fn on_initialized(&mut self, outcome: Result<Value, Value>) {
        let result = match outcome {
            Ok(result) => result,
            Err(error) => {
                let text = format!("the harness refused initialize: {error}");
                self.harness_failed("HARNESS_INIT_FAILED", &text, true).await;
                return;
            }
        };
        match messages::parse_initialize(&result) {
            Ok(capabilities) => {
                let Some(harness) = self.harness.as_mut() else { return };
                harness.phase = Phase::Ready(capabilities);
                let generation = harness.generation;
                if let Err(error) =
                    store::sandboxes::set_harness_init(&self.deps.pool, self.agent_id, generation, &result).await
                {
                    tracing::error!(%error, "recording the harness's initialize answer");
                }
            }
            Err(message) => self.harness_failed("HARNESS_INIT_FAILED", &message, true).await,
        }
    }

    async fn session_ready(&mut self, session_id: SessionId, acp_id: String) {
        let Some(harness) = self.harness.as_mut() else { return };
        harness.sessions.insert(session_id, SessionPhase::Ready(acp_id.clone()));
        let generation = harness.generation;
        let pool = &self.deps.pool;
        let stored = async {
            store::sessions::set_acp_session_id(pool, session_id, &acp_id).await?;
            store::sandboxes::add_harness_session(pool, self.agent_id, generation, session_id).await
        };
        if let Err(error) = stored.await {
            tracing::error!(%error, "recording a harness session");
        }
    }

    /// Sends `session/new` for a session.
    pub(super) fn open_new_session(&mut self, session_id: SessionId, reset: bool) {
        let cwd = self.deps.driver.home_dir(self.agent_id);
        let deadline = Some(Instant::now() + self.deps.timeouts.harness_request);
        if let Some(harness) = self.harness.as_mut() {
            harness.sessions.insert(session_id, SessionPhase::Opening);
        }
        self.send_request(
            method::SESSION_NEW,
            &messages::new_session(&cwd),
            Pending::NewSession { session_id, reset },
            deadline,
        );
    }

    /// Makes the harness know a session: load, else resume, else new (with a reset notice).
    pub(super) async fn open_session(&mut self, session_id: SessionId) {
        let Some(Phase::Ready(capabilities)) = self.harness.as_ref().map(|h| h.phase) else { return };
        let acp_id = match store::sessions::get(&self.deps.pool, session_id).await {
            Ok(Some(session)) => session.acp_session_id,
            Ok(None) => return,
            Err(error) => {
                tracing::error!(%error, "reading a session");
                return;
            }
        };
        let cwd = self.deps.driver.home_dir(self.agent_id);
        let deadline = Some(Instant::now() + self.deps.timeouts.harness_request);
        match acp_id {
            None => self.open_new_session(session_id, false),
            Some(acp_id) if capabilities.load || capabilities.resume => {
                if let Some(harness) = self.harness.as_mut() {
                    harness.sessions.insert(session_id, SessionPhase::Opening);
                }
                let (method, params) = if capabilities.load {
                    (method::SESSION_LOAD, messages::load_session(&acp_id, &cwd))
                } else {
                    (method::SESSION_RESUME, messages::resume_session(&acp_id, &cwd))
                };
                self.send_request(method, &params, Pending::Restore { session_id }, deadline);
            }
            Some(_) => self.open_new_session(session_id, true),
        }
    }

    /// Sends the prompt of a waiting turn whose session the harness knows.
    pub(super) async fn send_prompt(&mut self, turn_id: TurnId) {
        let Some(index) = self.turns.iter().position(|t| t.id == turn_id) else { return };
        let session_id = self.turns[index].session_id;
        let Some(SessionPhase::Ready(acp_id)) =
            self.harness.as_ref().and_then(|h| h.sessions.get(&session_id)).cloned()
        else {
            return;
        };
        let blocks = serde_json::from_value(self.turns[index].prompt.clone()).unwrap_or_default();
        let params = messages::prompt(&acp_id, blocks);
        let deadline = Some(Instant::now() + self.deps.timeouts.turn);
        let request_id = self.send_request(method::SESSION_PROMPT, &params, Pending::Prompt { turn_id }, deadline);
        let (Some(harness), Some(turn)) = (self.harness.as_ref(), self.turns.get_mut(index)) else { return };
        let stdin_end = harness.stdin;
        turn.state = TurnState::Sent {
            request_id: request_id.clone(),
            generation: harness.generation,
            stdin_end,
            delivered: false,
        };
        let stdin_end = i64::try_from(stdin_end).unwrap_or(i64::MAX);
        if let Err(error) =
            store::sessions::mark_sent(&self.deps.pool, turn_id, &request_id, harness.generation, stdin_end).await
        {
            tracing::error!(%error, "recording a sent prompt");
        }
    }

    /// sandboxd wrote stdin up to `offset`: prompts before it are delivered.
    pub(super) async fn on_stdin_written(&mut self, channel: u32, offset: u64) {
        if self.harness.as_ref().is_none_or(|h| h.channel != channel) {
            return;
        }
        for turn in &mut self.turns {
            if let TurnState::Sent { stdin_end, delivered, .. } = &mut turn.state
                && !*delivered
                && *stdin_end <= offset
            {
                *delivered = true;
                if let Err(error) = store::sessions::mark_delivered(&self.deps.pool, turn.id).await {
                    tracing::error!(%error, "recording a delivered prompt");
                }
            }
        }
    }

    /// The harness failed: every open turn ends with an error; optionally kill it.
    pub(super) async fn harness_failed(&mut self, code: &str, message: &str, kill: bool) {
        let Some(harness) = self.harness.take() else { return };
        let stderr = harness.stderr_text();
        let message = if stderr.is_empty() { message.to_owned() } else { format!("{message}\nstderr: {stderr}") };
        self.fail_turns(|_| true, code, &message).await;
        if let Some(link) = &self.link {
            if kill {
                link.send(&Control::Signal { channel: harness.channel, signal: 9 });
            }
            if harness.exited.is_some() {
                link.send(&Control::Forget { channel: harness.channel });
            }
        }
        if let Err(error) = store::sandboxes::clear_harness(&self.deps.pool, self.agent_id, harness.generation).await {
            tracing::error!(%error, "recording the harness's end");
        }
    }

    /// The harness exited: once all its stdout is handled, end what was still open.
    pub(super) async fn finish_exit_if_drained(&mut self) {
        let Some(harness) = self.harness.as_ref() else { return };
        let Some((status, stdout_end)) = harness.exited else { return };
        if harness.received < stdout_end {
            return;
        }
        let how = match (status.code, status.signal) {
            (Some(code), _) => format!("the harness exited with code {code}"),
            (None, Some(9)) => "the harness was killed (SIGKILL; out of memory?)".to_owned(),
            (None, Some(signal)) => format!("the harness was killed by signal {signal}"),
            (None, None) => "the harness exited".to_owned(),
        };
        self.harness_failed("HARNESS_EXITED", &how, false).await;
    }
}
