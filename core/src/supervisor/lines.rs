//! The ACP conversation inside the core: stdout lines turned into events, state changes and
//! answers (one persist per line — lines of one frame that store only events share one,
//! `joined.rs` — answers released by its commit), sessions opened (load, else
//! resume, else new with a `CONTEXT_RESET` notice; signed in and tried once more when the harness
//! asks, `auth.rs`), the history a load replays kept out of the log whenever it comes, prompts
//! recorded then sent, and turns held to their time limit (cancel first, kill after a grace).

use std::borrow::Cow;

use serde_json::Value;
use serde_json::value::RawValue;

use super::auth;
use super::harness::{AfterAuth, Pending, Question, QuestionKind, Request};
use super::provider;
use super::stdout::{Line, StdoutError};
use super::turns::{self, TurnState};
use super::{Core, FailureCode, LinkId, Now, PersistId, Phase, Purpose, SessionPhase, TurnEnded};
use crate::acp::messages::{self, Capabilities, method};
use crate::acp::wire::{self, FromHarness, RpcError, RpcId, code};
use crate::error_code::ErrorCode;
use crate::events::side_effects::{AnsweredPermission, SideEffect};
use crate::events::{EventKind, NewEvent, NoticeCode};
use crate::ids::{SessionId, TurnId};
use crate::permissions::{self, Verdict};

/// The `session/update` kinds that make up a session's history (what `session/load` replays):
/// messages, thoughts, tool calls and plans. Any other kind says where the session is now (its
/// commands, mode, configuration, usage) and is stored even while a load replays.
const HISTORY_KINDS: &[&str] = &[
    "user_message_chunk",
    "agent_message_chunk",
    "agent_thought_chunk",
    "tool_call",
    "tool_call_update",
    "plan",
    "plan_update",
    "plan_removed",
];

/// A `session/update`'s `update`: as printed (read by [`wire::parse_update`]), or a value (a
/// line [`wire::parse_line`] read).
enum UpdatePayload {
    Text(Box<RawValue>),
    Value(Value),
}

impl UpdatePayload {
    fn into_value(self) -> Value {
        match self {
            Self::Text(text) => crate::events::Payload::text(text).into_value(),
            Self::Value(value) => value,
        }
    }
}

/// What one line produces.
#[derive(Default)]
pub(super) struct LineOut {
    pub(super) events: Vec<NewEvent>,
    pub(super) side: Vec<SideEffect>,
    pub(super) frames: Vec<Vec<u8>>,
    /// The turn it ends, if any.
    pub(super) ended: Vec<TurnEnded>,
}

impl Core {
    /// stdout bytes of the harness on `channel`.
    pub(super) fn on_stdout(&mut self, _link: LinkId, channel: u32, offset: u64, bytes: &[u8], now: Now) {
        let Some(harness) = self.harness.as_mut().filter(|h| h.channel == channel) else { return };
        let generation = harness.generation;
        let lines = match harness.stdout.push(offset, bytes) {
            Ok(lines) => lines,
            Err(StdoutError::Gap { offset, expected }) => {
                tracing::error!(agent.id = %self.agent_id, offset, expected, "gap in harness stdout");
                self.drop_link("gap in the harness's stdout");
                return;
            }
            Err(StdoutError::LineTooLong) => {
                let text =
                    format!("the harness printed a line over {} MiB (not ACP)", super::stdout::MAX_LINE_BYTES >> 20);
                self.harness_failed(FailureCode::HarnessProtocolError, &text, true, now);
                return;
            }
        };
        self.handle_lines(lines, Some(generation), now);
        self.after_commit(now);
    }

    /// Complete lines of harness `generation`, in order; once one is held (a turn's failed
    /// prompt waiting for the proxy's report, `provider.rs`), the rest wait behind it.
    pub(super) fn handle_lines(&mut self, lines: impl IntoIterator<Item = Line>, generation: Option<i64>, now: Now) {
        for line in lines {
            let Some(harness) = self.harness.as_mut().filter(|h| Some(h.generation) == generation) else { return };
            if let Some(held) = harness.held.as_mut() {
                held.lines.push_back(line);
                continue;
            }
            self.on_line(line, now);
        }
    }

    /// What a session has cost so far; sessions past [`super::SESSION_COSTS_KEPT`] push out
    /// another's (whose next turn then ends without a cost until its harness reports again).
    fn note_session_cost(&mut self, session_id: SessionId, cost: crate::events::usage::Cost) {
        if self.session_costs.len() >= super::SESSION_COSTS_KEPT && !self.session_costs.contains_key(&session_id) {
            let other = self.session_costs.keys().next().copied();
            if let Some(other) = other {
                self.session_costs.remove(&other);
            }
        }
        self.session_costs.insert(session_id, cost);
    }

    /// One complete line.
    fn on_line(&mut self, line: Line, now: Now) {
        let end = line.end;
        if line.bytes.iter().all(u8::is_ascii_whitespace) {
            if let Some(harness) = self.harness.as_mut() {
                harness.stdout.nothing_to_store(end);
            }
            return;
        }
        // A streaming harness's every line: read without building its update (`Payload`).
        if let Some(update) = wire::parse_update(&line.bytes) {
            let mut out = LineOut::default();
            self.on_update(&update.acp_session_id, UpdatePayload::Text(update.update), &mut out);
            self.store_line(end, out);
            return;
        }
        let message = match wire::parse_line(&line.bytes) {
            Ok(message) => message,
            Err(garbage) => {
                let text = format!("the harness printed something that is not ACP (JSON-RPC): {}", garbage.excerpt);
                self.harness_failed(FailureCode::HarnessProtocolError, &text, true, now);
                return;
            }
        };
        if let FromHarness::Response { id, outcome: Err(_) } = &message
            && self.hold_for_provider_check(id, line).is_none()
        {
            return;
        }
        let mut out = LineOut::default();
        match message {
            FromHarness::Notification { method, params } if method == method::SESSION_UPDATE => {
                if let Value::Object(mut params) = params {
                    let update = params.remove("update").unwrap_or(Value::Null);
                    if let Some(acp_id) = params.get("sessionId").and_then(Value::as_str) {
                        self.on_update(acp_id, UpdatePayload::Value(update), &mut out);
                    }
                }
            }
            FromHarness::Notification { method, .. } => {
                tracing::debug!(agent.id = %self.agent_id, %method, "ignoring a harness notification");
            }
            FromHarness::Request { id, method, params } if method == method::REQUEST_PERMISSION => {
                self.answer_permission(id, &params, &mut out, now);
            }
            FromHarness::Request { id, method, params } if method == method::ELICITATION_CREATE => {
                self.ask_elicitation(id, &params, &mut out, now);
            }
            FromHarness::Request { id, method, .. } => {
                tracing::debug!(agent.id = %self.agent_id, %method, "refusing a harness request");
                out.frames.push(wire::error_response(&id, &RpcError::method_not_found(&method)));
            }
            FromHarness::Response { id, outcome } => {
                let pending = self.harness.as_mut().and_then(|h| h.pending.remove(&id));
                if let Some(Request { what, .. }) = pending {
                    self.on_response(what, outcome, &mut out, now);
                }
            }
        }
        self.store_line(end, out);
    }

    /// One persist for the line's events, state changes and answers, chained to the stored
    /// stdout offset — or, for a line of events only, the persist of the line before it in the
    /// same frame (`joined.rs`); nothing to store only moves the acknowledgement.
    fn store_line(&mut self, end: u64, mut out: LineOut) {
        let agent_id = self.agent_id;
        let Some(harness) = self.harness.as_mut() else { return };
        if out.events.is_empty() && out.side.is_empty() && out.frames.is_empty() {
            harness.stdout.nothing_to_store(end);
            return;
        }
        if out.side.is_empty()
            && out.frames.is_empty()
            && out.ended.is_empty()
            && self.join_last_persist(end, &mut out.events)
        {
            return;
        }
        let Some(harness) = self.harness.as_mut() else { return };
        let generation = harness.generation;
        let id = self.next_persist;
        let from = harness.stdout.storing(end, id);
        let sessions: Vec<SessionId> = out.events.iter().map(|e| e.session_id).collect();
        out.side.push(SideEffect::StdoutStored { agent_id, generation, from, to: end });
        let journal = self.queue_frames(id, out.frames);
        out.side.extend(journal);
        self.persist_ending(
            Purpose::Line { generation, end, from, sessions, lines: 1 },
            out.events,
            out.side,
            out.ended,
        );
    }

    /// The database refused a line's content: store an error in its place (with the same
    /// stdout range and answers), so a poison line never becomes a reconnect loop.
    pub(super) fn line_rejected(&mut self, rejected: PersistId, end: u64, from: u64, sessions: Vec<SessionId>) {
        let agent_id = self.agent_id;
        let Some(harness) = self.harness.as_mut() else { return };
        let generation = harness.generation;
        let id = self.next_persist;
        harness.stdout.replace(rejected, id);
        let mut side = vec![SideEffect::StdoutStored { agent_id, generation, from, to: end }];
        for (offset, bytes) in harness.outbox.regate(rejected, id) {
            side.push(SideEffect::PendingStdin {
                agent_id,
                generation,
                offset,
                bytes,
                written: harness.outbox.written(),
            });
        }
        let message = format!("the harness printed output the event log cannot store (stdout bytes {from}..{end})");
        let mut targets = sessions;
        targets.dedup();
        let events = targets
            .into_iter()
            .map(|session| NewEvent::error(session, ErrorCode::HarnessOutputUnstorable, &message))
            .collect();
        tracing::error!(agent.id = %self.agent_id, from, end, "the database rejected a harness line; stored an error instead");
        self.persist(Purpose::Line { generation, end, from, sessions: Vec::new(), lines: 1 }, events, side);
    }

    /// A `session/update` for the harness's session `acp_id`: kept for the spare session (the
    /// warm pool's, which no session has taken yet), or an `update` event (unless it replays the
    /// history of a session being loaded or resumed, [`Self::update_event`]). Only the kinds the
    /// supervisor reads (tool calls, for a full disk; usage, for the cost) are parsed from text.
    fn on_update(&mut self, acp_id: &str, update: UpdatePayload, out: &mut LineOut) {
        let spare = self.harness.as_ref().and_then(|h| h.spare_session.as_deref());
        if spare == Some(acp_id) {
            return self.keep_spare_update(update.into_value(), out);
        }
        // What the kind decides, read before the update moves into its event (no copy per line).
        let (is_history, is_read_here) = {
            let kind = match &update {
                UpdatePayload::Text(text) => wire::update_kind(text),
                UpdatePayload::Value(value) => value.get("sessionUpdate").and_then(Value::as_str).map(Cow::Borrowed),
            };
            let kind = kind.as_deref();
            (
                kind.is_some_and(|kind| HISTORY_KINDS.contains(&kind)),
                matches!(kind, Some("tool_call" | "tool_call_update" | "usage_update")),
            )
        };
        let Some(event) = self.update_event(acp_id, is_history, update) else { return };
        if is_read_here {
            let payload = event.payload.value();
            self.watch_update_for_full_disk(event.session_id, &payload);
            if let Some(cost) = crate::events::usage::session_cost(&payload) {
                self.note_session_cost(event.session_id, cost);
            }
        }
        out.events.push(event);
    }

    /// Keeps an update for the spare session, stored with its line, for the session that takes
    /// it ([`Self::open_new_session`]); past the bounds it is dropped, and said so.
    fn keep_spare_update(&mut self, update: Value, out: &mut LineOut) {
        let agent_id = self.agent_id;
        let Some(harness) = self.harness.as_mut() else { return };
        let Some(acp_session_id) = harness.spare_session.clone() else { return };
        if harness.spare_updates.push(update.clone()) {
            out.side.push(SideEffect::SpareUpdate { agent_id, generation: harness.generation, acp_session_id, update });
        } else {
            tracing::debug!(agent.id = %agent_id, "an update for the spare session past what is kept for it; dropped");
        }
    }

    /// An `update` event for the harness's session `acp_id`, unless it replays the history of a
    /// session being loaded or resumed (before or after the harness's answer, until the session's
    /// next prompt goes out): history kinds (`is_history`) are dropped then, state updates
    /// (commands, mode, …) kept. `None` for a session unknown, or new and still opening.
    fn update_event(&self, acp_id: &str, is_history: bool, update: UpdatePayload) -> Option<NewEvent> {
        let harness = self.harness.as_ref()?;
        let session_id = match harness.replaying_as(acp_id) {
            Some(_) if is_history => return None,
            Some(session_id) => session_id,
            None => harness.session_by_acp(acp_id)?,
        };
        Some(match update {
            UpdatePayload::Text(text) => NewEvent::update_text(session_id, text),
            UpdatePayload::Value(value) => NewEvent::new(session_id, EventKind::Update, value),
        })
    }

    /// Answers a permission request by the agent's posture: the `permission` and
    /// `permission_resolved` events are stored with the line, the answer goes out after.
    fn answer_permission(&mut self, id: RpcId, params: &Value, out: &mut LineOut, now: Now) {
        let request = match messages::parse_permission_request(params) {
            Ok(request) => request,
            Err(message) => {
                out.frames.push(wire::error_response(&id, &RpcError::invalid_params(message.as_str())));
                self.report_to_running_turns("an unreadable permission request (refused)", out);
                return;
            }
        };
        let acp_id = request.session_id.0.to_string();
        let Some(session_id) = self.harness.as_ref().and_then(|h| h.session_by_acp(&acp_id)) else {
            out.frames.push(wire::error_response(&id, &RpcError::new(code::RESOURCE_NOT_FOUND, "unknown session")));
            self.report_to_running_turns("a permission request for a session it does not have (refused)", out);
            return;
        };
        let Some(harness) = self.harness.as_ref() else { return };
        let generation = harness.generation;
        let permission_id = permissions::question_id(self.agent_id.0, generation, &id);
        let verdict = permissions::judge(&harness.gate, &id, params, &request, permission_id);
        let mut record = AnsweredPermission {
            permission_id,
            session_id,
            turn_id: self.turns.iter().find(|t| t.session_id == session_id).map(|t| t.id),
            request_id: id.clone(),
            generation,
            tool_call: params.get("toolCall").cloned().unwrap_or(Value::Null),
            options: params.get("options").cloned().unwrap_or(Value::Null),
            outcome: None,
            elicitation: false,
        };
        match verdict {
            Verdict::Answer(decision) => {
                record.outcome = Some(decision.answer.get("outcome").cloned().unwrap_or(Value::Null));
                out.side.push(SideEffect::PermissionAnswered(Box::new(record)));
                out.frames.push(wire::response(&id, &decision.answer));
                out.events.push(NewEvent::new(session_id, EventKind::Permission, decision.asked));
                if let Some(denied) = decision.denied {
                    out.events.push(NewEvent::new(session_id, EventKind::PolicyDenied, denied));
                }
                out.events.push(NewEvent::new(session_id, EventKind::PermissionResolved, decision.resolved));
            }
            Verdict::Ask { asked, grantable } => {
                if let Some((grant, standing)) = self.take_grant(session_id, &record.tool_call, grantable) {
                    // A session grant, or an approval given while its turn was parked: agenthold
                    // answers (once) without asking anyone again.
                    let by = if standing {
                        serde_json::json!({ "grant": grant, "scope": "session" })
                    } else {
                        serde_json::json!({ "grant": grant })
                    };
                    if let Ok((answer, resolved)) =
                        permissions::resolve(&id, permission_id, &request.options, &permissions::Choice::Allow, by)
                    {
                        record.outcome = Some(answer.get("outcome").cloned().unwrap_or(Value::Null));
                        out.side.push(SideEffect::PermissionAnswered(Box::new(record)));
                        if !standing {
                            out.side.push(SideEffect::GrantUsed { permission_id: grant });
                        }
                        out.frames.push(wire::response(&id, &answer));
                        out.events.push(NewEvent::new(session_id, EventKind::Permission, asked));
                        out.events.push(NewEvent::new(session_id, EventKind::PermissionResolved, resolved));
                        return;
                    }
                }
                // Recorded (pending) with the line; the answer waits for a person.
                let question = Question {
                    permission_id,
                    session_id,
                    request_id: id.clone(),
                    options: record.options.clone(),
                    tool_call: record.tool_call.clone(),
                    kind: QuestionKind::Permission,
                };
                out.side.push(SideEffect::PermissionAnswered(Box::new(record)));
                // Waiting for a person does not count against the turn's time limit.
                out.side.extend(self.pause_turn_clock(session_id, now));
                out.events.push(NewEvent::new(session_id, EventKind::Permission, asked));
                if let Some(harness) = self.harness.as_mut() {
                    harness.questions.insert(permission_id, question);
                }
            }
        }
    }

    /// A harness mistake that concerns no known session: an `error` event in the log of every
    /// session with a turn running (so someone sees it), nothing else disturbed.
    pub(super) fn report_to_running_turns(&self, what: &str, out: &mut LineOut) {
        let message = format!("the harness sent {what}");
        let mut sessions: Vec<SessionId> =
            self.turns.iter().filter(|t| t.request_id().is_some()).map(|t| t.session_id).collect();
        sessions.sort_by_key(|s| s.0);
        sessions.dedup();
        for session_id in sessions {
            out.events.push(NewEvent::error(session_id, ErrorCode::HarnessProtocolError, &message));
        }
    }

    fn on_response(&mut self, what: Pending, outcome: Result<Value, Value>, out: &mut LineOut, now: Now) {
        let agent_id = self.agent_id;
        match what {
            Pending::Initialize => {
                let capabilities = outcome
                    .map_err(|e| format!("the harness refused initialize: {e}"))
                    .and_then(|result| messages::parse_initialize(&result).map(|capabilities| (capabilities, result)));
                match capabilities {
                    Ok((capabilities, init)) => {
                        let Some(harness) = self.harness.as_mut() else { return };
                        harness.phase = Phase::Ready(capabilities);
                        harness.auth.read_advertised(&init);
                        out.side.push(SideEffect::HarnessInit { agent_id, generation: harness.generation, init });
                    }
                    Err(message) => self.harness_failed(FailureCode::HarnessInitFailed, &message, true, now),
                }
            }
            Pending::NewSession { session_id, reset, retry } => match outcome {
                Ok(result) => match messages::parse_new_session(&result) {
                    Ok(acp_id) => {
                        self.session_ready(session_id, acp_id, out, now);
                        if reset {
                            out.events.push(NewEvent::notice(
                                session_id,
                                NoticeCode::ContextReset,
                                "the harness could not restore this session; a new one started and its context was reset",
                            ));
                        }
                    }
                    Err(message) => {
                        let text = format!("the harness could not start the session: {message}");
                        self.session_failed(session_id, &text, now);
                    }
                },
                Err(error) => {
                    let asks = auth::asks_to_sign_in(&error);
                    // It asks to sign in and the server has a way in: sign in, then once more.
                    if asks && !retry && self.sign_in(session_id, AfterAuth::New { reset }, now) {
                        return;
                    }
                    let text = if asks && retry {
                        format!("the harness still asks to sign in after authenticate: {}", auth::message(&error))
                    } else {
                        format!("the harness could not start the session: {}", auth::message(&error))
                    };
                    self.session_failed(session_id, &text, now);
                }
            },
            Pending::Authenticate { session_id, method, then } => match outcome {
                Ok(_) => {
                    let text =
                        format!("the harness asked to sign in; the server did, with the login method {method:?}");
                    out.events.push(NewEvent::notice(session_id, NoticeCode::Authenticated, text));
                    match then {
                        AfterAuth::New { reset } => self.open_new_session(session_id, reset, true, now),
                        AfterAuth::Restore { acp_id, load } => {
                            self.restore_session(session_id, acp_id, load, true, now);
                        }
                    }
                }
                Err(error) => {
                    let text = format!(
                        "the harness asked to sign in and refused the login method {method:?}: {}",
                        auth::message(&error)
                    );
                    self.session_failed(session_id, &text, now);
                }
            },
            Pending::Restore { session_id, acp_id, load, retry } => match outcome {
                Ok(_) => self.session_ready(session_id, acp_id, out, now),
                Err(error) => {
                    // Signed in first when it asks (the session survives); only then a new one.
                    if !retry
                        && auth::asks_to_sign_in(&error)
                        && self.sign_in(session_id, AfterAuth::Restore { acp_id, load }, now)
                    {
                        return;
                    }
                    tracing::info!(agent.id = %self.agent_id, %error, "restoring a session failed; starting a new one");
                    if let Some(harness) = self.harness.as_mut() {
                        harness.replaying.remove(&session_id);
                    }
                    self.open_new_session(session_id, true, false, now);
                }
            },
            Pending::SetMode { session_id, acp_id } => {
                if let Err(error) = outcome {
                    tracing::warn!(agent.id = %agent_id, %error, "the harness refused its session mode");
                    let message = format!(
                        "the harness refused session/set_mode ({error}): it may act without asking the permission gate"
                    );
                    out.events.push(NewEvent::notice(session_id, NoticeCode::SessionModeNotSet, &message));
                }
                if let Some(harness) = self.harness.as_mut() {
                    harness.sessions.insert(session_id, SessionPhase::Ready(acp_id));
                }
            }
            Pending::Prompt { turn_id } => {
                let Some(index) = self.turns.iter().position(|t| t.id == turn_id) else { return };
                let turn = self.turns.remove(index);
                let refusal = outcome.as_ref().err().map(Value::to_string).unwrap_or_default();
                self.turn_ended_maybe_on_full_disk(turn.id, turn.session_id, &refusal);
                let (stop_reason, usage) = match outcome {
                    Ok(result) => match messages::parse_prompt(&result) {
                        Ok(parsed) => parsed,
                        Err(message) => {
                            out.events.push(NewEvent::error(turn.session_id, ErrorCode::HarnessProtocolError, message));
                            ("error".to_owned(), None)
                        }
                    },
                    Err(error) => {
                        let said =
                            error.get("message").and_then(Value::as_str).unwrap_or("the harness failed the turn");
                        let checked = self.harness.as_mut().and_then(|h| h.provider_checked.take());
                        let cut = checked.filter(|(turn_id, _)| *turn_id == turn.id).and_then(|(_, finding)| finding);
                        let (code, message) = match cut {
                            Some(finding) => (ErrorCode::ProviderStreamEnded, provider::error_message(&finding, said)),
                            None => (ErrorCode::HarnessError, said.to_owned()),
                        };
                        let payload = serde_json::json!({"code": code, "message": message, "rpc_error": error});
                        out.events.push(NewEvent::new(turn.session_id, EventKind::Error, payload));
                        ("error".to_owned(), None)
                    }
                };
                let cost = self.session_costs.get(&turn.session_id).cloned();
                let ending = turns::ending(&turn, &stop_reason, usage, cost, now.wall);
                out.events.push(ending.event);
                out.side.push(ending.effect);
                out.ended.push(ending.ended);
                self.ending.insert(turn.id, self.next_persist);
            }
        }
    }

    /// A session is open as `acp_id`: recorded, then put in the adapter's mode (it stays
    /// opening until the harness answers that) or ready at once.
    fn session_ready(&mut self, session_id: SessionId, acp_id: String, out: &mut LineOut, now: Now) {
        let agent_id = self.agent_id;
        let Some(harness) = self.harness.as_mut() else { return };
        let mode = harness.session_mode.clone();
        let phase = if mode.is_some() { SessionPhase::Opening } else { SessionPhase::Ready(acp_id.clone()) };
        harness.sessions.insert(session_id, phase);
        out.side.push(SideEffect::SessionOpened {
            agent_id,
            generation: harness.generation,
            session_id,
            acp_session_id: acp_id.clone(),
        });
        for turn in self.turns.iter_mut().filter(|t| t.session_id == session_id) {
            turn.acp_session_id = Some(acp_id.clone());
        }
        if let Some(mode) = mode {
            let params = messages::set_mode(&acp_id, &mode);
            self.request(method::SESSION_SET_MODE, &params, Pending::SetMode { session_id, acp_id }, now);
        }
    }

    /// Calls `authenticate` for a session call that answered `auth_required`, with the method
    /// [`auth::Auth::choose`] picks; `then` goes again once it succeeds. `false`: no method fits.
    fn sign_in(&mut self, session_id: SessionId, then: AfterAuth, now: Now) -> bool {
        let Some(method) = self.harness.as_ref().and_then(|h| h.auth.choose()) else { return false };
        let params = serde_json::json!({ "methodId": method });
        self.request(method::AUTHENTICATE, &params, Pending::Authenticate { session_id, method, then }, now);
        true
    }

    /// A session could not be opened: forgotten, and the turns waiting for it fail
    /// (`SESSION_START_FAILED`, saying why).
    fn session_failed(&mut self, session_id: SessionId, text: &str, now: Now) {
        // The running harness's own words (its stderr's end) say why more often than its answer.
        let text = self.with_harness_stderr(text);
        if let Some(harness) = self.harness.as_mut() {
            harness.sessions.remove(&session_id);
            harness.replaying.remove(&session_id);
        }
        self.fail_turns(|t| t.session_id == session_id, FailureCode::SessionStartFailed, &text, now);
    }

    /// The folder sessions start in: the harness's (the agent's repository), else the home.
    fn session_cwd(&self) -> String {
        self.harness.as_ref().and_then(|h| h.session_cwd.clone()).unwrap_or_else(|| self.home_dir.clone())
    }

    /// Sends `session/new` for a session (`retry`: again, after signing in) — or, for a new
    /// session, takes the harness's spare one (opened by the warm pool with this folder and these
    /// MCP servers before the agent claimed it), with the updates the harness sent for it.
    fn open_new_session(&mut self, session_id: SessionId, reset: bool, retry: bool, now: Now) {
        if !reset
            && !retry
            && let Some(acp_id) = self.harness.as_mut().and_then(|h| h.spare_session.take())
        {
            let mut out = LineOut::default();
            // What the harness said about the spare session meanwhile is this session's first.
            let kept = self.harness.as_mut().map(|h| h.spare_updates.take()).unwrap_or_default();
            out.events.extend(kept.into_iter().map(|update| NewEvent::new(session_id, EventKind::Update, update)));
            self.session_ready(session_id, acp_id, &mut out, now);
            self.persist(Purpose::Other, out.events, out.side);
            return;
        }
        let cwd = self.session_cwd();
        let mut params = messages::new_session(&cwd, &[]);
        if let Some(harness) = self.harness.as_mut() {
            harness.sessions.insert(session_id, SessionPhase::Opening);
            params = messages::new_session(&cwd, harness.offered_mcp());
        }
        self.request(method::SESSION_NEW, &params, Pending::NewSession { session_id, reset, retry }, now);
    }

    /// Makes the harness know a session: load, else resume, else new (with a reset notice).
    fn open_session(&mut self, session_id: SessionId, acp_id: Option<String>, capabilities: Capabilities, now: Now) {
        match acp_id {
            None => self.open_new_session(session_id, false, false, now),
            Some(acp_id) if capabilities.load || capabilities.resume => {
                self.restore_session(session_id, acp_id, capabilities.load, false, now);
            }
            Some(_) => self.open_new_session(session_id, true, false, now),
        }
    }

    /// Sends `session/load` (`load`) or `session/resume` of `acp_id`; until the session's next
    /// prompt goes out, the history the harness replays is not stored (`retry`: again, after
    /// signing in).
    fn restore_session(&mut self, session_id: SessionId, acp_id: String, load: bool, retry: bool, now: Now) {
        let cwd = self.session_cwd();
        let mut mcp = Vec::new();
        if let Some(harness) = self.harness.as_mut() {
            harness.sessions.insert(session_id, SessionPhase::Opening);
            harness.replaying.insert(session_id, acp_id.clone());
            mcp = harness.offered_mcp().to_vec();
        }
        let (method, params) = if load {
            (method::SESSION_LOAD, messages::load_session(&acp_id, &cwd, &mcp))
        } else {
            (method::SESSION_RESUME, messages::resume_session(&acp_id, &cwd, &mcp))
        };
        self.request(method, &params, Pending::Restore { session_id, acp_id, load, retry }, now);
    }

    /// Opens the sessions of waiting turns and records the prompts of those whose session is
    /// ready.
    pub(super) fn open_sessions_and_prompt(&mut self, now: Now) {
        // The running harness has the old environment: waiting turns go to the next one.
        if self.environment_changed {
            return;
        }
        let Some(harness) = self.harness.as_ref() else { return };
        let Phase::Ready(capabilities) = harness.phase else { return };
        let waiting: Vec<(TurnId, SessionId, Option<String>)> = self
            .turns
            .iter()
            .filter(|t| t.state == TurnState::Waiting)
            .map(|t| (t.id, t.session_id, t.acp_session_id.clone()))
            .collect();
        for (turn_id, session_id, acp_id) in waiting {
            match self.harness.as_ref().and_then(|h| h.sessions.get(&session_id)).cloned() {
                None => {
                    self.open_session(session_id, acp_id, capabilities, now);
                    // A spare session is ready at once (when the harness sets no mode).
                    if let Some(SessionPhase::Ready(acp_id)) =
                        self.harness.as_ref().and_then(|h| h.sessions.get(&session_id)).cloned()
                        && self.holds_slot(turn_id)
                    {
                        self.record_prompt(turn_id, &acp_id, now);
                    }
                }
                Some(SessionPhase::Opening) => {}
                // The prompt goes out once the turn holds a slot under the server's limit.
                Some(SessionPhase::Ready(acp_id)) if self.holds_slot(turn_id) => {
                    self.record_prompt(turn_id, &acp_id, now);
                }
                Some(SessionPhase::Ready(_)) => {}
            }
        }
    }

    /// Records a prompt (request id, stdin range, deadline, journal) before it is sent.
    fn record_prompt(&mut self, turn_id: TurnId, acp_id: &str, now: Now) {
        let Some(turn) = self.turns.iter().find(|t| t.id == turn_id) else { return };
        let session_id = turn.session_id;
        let limit = turn.limit.unwrap_or(self.timeouts.turn);
        let blocks = serde_json::from_value(turn.prompt.clone()).unwrap_or_default();
        let request_id = self.new_request_id();
        let frame = wire::request(&request_id, method::SESSION_PROMPT, &messages::prompt(acp_id, blocks));
        let (deadline, deadline_at) = now.plus(limit);
        let Some(harness) = self.harness.as_mut() else { return };
        let generation = harness.generation;
        harness.pending.insert(request_id.clone(), Request { what: Pending::Prompt { turn_id }, deadline: None });
        let id = self.next_persist;
        let stdin_end = self.harness.as_ref().map_or(0, |h| h.outbox.end()) + frame.len() as u64;
        let mut side = self.queue_frames(id, vec![frame]);
        // The session's ACP id is stored with the record as well: the line that opened the
        // session is another persist, which may fail while this one commits, and a takeover must
        // still know the session the prompt went to (else the turn's updates are dropped).
        let acp_session_id = acp_id.to_owned();
        side.push(SideEffect::SessionOpened { agent_id: self.agent_id, generation, session_id, acp_session_id });
        side.push(SideEffect::MarkSent {
            turn_id,
            request_id: request_id.clone(),
            generation,
            stdin_end: i64::try_from(stdin_end).unwrap_or(i64::MAX),
            deadline_at,
        });
        // The rules the turn runs under, recorded with it (guarded agents, or server rules).
        let applied = self.harness.as_ref().and_then(|h| h.gate.applied());
        let events =
            applied.map(|payload| NewEvent::new(session_id, EventKind::PolicyApplied, payload)).into_iter().collect();
        self.persist(Purpose::Prompt { generation, turn_id }, events, side);
        if let Some(turn) = self.turns.iter_mut().find(|t| t.id == turn_id) {
            turn.state = TurnState::Recording { request_id, persist: id };
            turn.deadline = Some(deadline);
            turn.deadline_at = Some(deadline_at);
        }
    }

    /// Turns past their time limit are cancelled in the harness (an `error` event says why);
    /// one still running a grace period later takes the harness down.
    pub(super) fn on_turn_deadlines(&mut self, now: Now) {
        if self.turns.iter().any(|t| t.kill_at.is_some_and(|at| at <= now.mono)) {
            let text = "the turn took longer than the turn time limit and did not stop when cancelled";
            if self.harness.is_some() {
                self.harness_failed(FailureCode::TurnTimeout, text, true, now);
            } else {
                self.fail_turns(|t| t.kill_at.is_some(), FailureCode::TurnTimeout, text, now);
            }
        }
        let late: Vec<(TurnId, SessionId)> = self
            .turns
            .iter()
            .filter(|t| t.kill_at.is_none() && t.deadline.is_some_and(|at| at <= now.mono))
            .map(|t| (t.id, t.session_id))
            .collect();
        for (turn_id, session_id) in late {
            let known = self
                .harness
                .as_ref()
                .is_some_and(|h| matches!(h.sessions.get(&session_id), Some(SessionPhase::Ready(_))));
            let text = "the turn took longer than the turn time limit; it was cancelled";
            if !known {
                self.fail_turns(|t| t.id == turn_id, FailureCode::TurnTimeout, text, now);
                continue;
            }
            let text = self.with_harness_stderr(text);
            let Some(turn) = self.turns.iter_mut().find(|t| t.id == turn_id) else { continue };
            turn.deadline = None;
            turn.kill_at = Some(now.mono + self.timeouts.cancel_grace);
            let event = turns::failure(turn, FailureCode::TurnTimeout, &text);
            self.persist(Purpose::Other, vec![event], Vec::new());
            self.send_cancel(session_id);
        }
    }
}
