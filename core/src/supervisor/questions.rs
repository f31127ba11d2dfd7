//! Questions waiting for a person — permission requests the gate holds, and the harness's own
//! questions (`elicitation/create`, form mode): an answer (or a cancel) becomes the harness's
//! response, recorded with the `permission_resolved` event and the question's row in one
//! transaction that also journals the response's frame, which leaves only after that commit.

use agent_client_protocol::v1::schema::PermissionOption;
use serde_json::Value;

use super::harness::{Question, QuestionKind};
use super::lines::LineOut;
use super::types::{AnswerError, Now, ReplyId};
use super::{Core, Purpose};
use crate::acp::wire::{self, RpcError, RpcId, code};
use crate::events::side_effects::{AnsweredPermission, GrantScope, SideEffect};
use crate::events::{EventKind, NewEvent};
use crate::ids::SessionId;
use crate::permissions::{self, Choice, elicitation};

/// The harness's response and the `permission_resolved` payload for `choice` to `question`.
pub(super) fn resolve(
    question: &Question,
    permission_id: uuid::Uuid,
    choice: &Choice,
    by: Value,
) -> Result<(Value, Value), AnswerError> {
    let resolved = match question.kind {
        QuestionKind::Permission => {
            let options: Vec<PermissionOption> = serde_json::from_value(question.options.clone()).unwrap_or_default();
            permissions::resolve(&question.request_id, permission_id, &options, choice, by)
        }
        QuestionKind::Elicitation => {
            elicitation::resolve(&question.request_id, permission_id, &question.tool_call, choice, by)
        }
    };
    resolved.map_err(|e| AnswerError::BadChoice(e.0))
}

/// What the question's row records as its outcome: a permission's `outcome`, an elicitation's
/// whole response.
pub(super) fn outcome_of(question: &Question, answer: &Value) -> Value {
    match question.kind {
        QuestionKind::Permission => answer.get("outcome").cloned().unwrap_or(Value::Null),
        QuestionKind::Elicitation => answer.clone(),
    }
}

impl Core {
    /// The harness asks a question of its own (`elicitation/create`): it waits for a person like
    /// a permission question (whatever the posture: it is not a permission).
    pub(super) fn ask_elicitation(&mut self, id: RpcId, params: &Value, out: &mut LineOut, now: Now) {
        let asked = match elicitation::parse(params) {
            Ok(asked) => asked,
            Err(message) => {
                out.frames.push(wire::error_response(&id, &RpcError::invalid_params(message.as_str())));
                self.report_to_running_turns(&format!("a question agenthold cannot take ({message}; refused)"), out);
                return;
            }
        };
        let Some(session_id) = self.harness.as_ref().and_then(|h| h.session_by_acp(&asked.acp_session_id)) else {
            out.frames.push(wire::error_response(&id, &RpcError::new(code::RESOURCE_NOT_FOUND, "unknown session")));
            self.report_to_running_turns("a question for a session it does not have (refused)", out);
            return;
        };
        let Some(generation) = self.harness.as_ref().map(|h| h.generation) else { return };
        let permission_id = permissions::question_id(self.agent_id.0, generation, &id);
        let record = AnsweredPermission {
            permission_id,
            session_id,
            turn_id: self.turns.iter().find(|t| t.session_id == session_id).map(|t| t.id),
            request_id: id.clone(),
            generation,
            tool_call: params.clone(),
            options: Value::Array(Vec::new()),
            outcome: None,
            elicitation: true,
        };
        let question = Question {
            permission_id,
            session_id,
            request_id: id.clone(),
            options: record.options.clone(),
            tool_call: params.clone(),
            kind: QuestionKind::Elicitation,
        };
        out.side.push(SideEffect::PermissionAnswered(Box::new(record)));
        out.side.extend(self.pause_turn_clock(session_id, now));
        out.events.push(NewEvent::new(
            session_id,
            EventKind::Permission,
            elicitation::asked(&id, permission_id, params, &asked),
        ));
        if let Some(harness) = self.harness.as_mut() {
            harness.questions.insert(permission_id, question);
        }
    }

    /// Answers the waiting question `permission_id` with `choice`.
    pub(super) fn answer_question(
        &mut self,
        permission_id: uuid::Uuid,
        choice: &Choice,
        by: serde_json::Value,
        reply: Option<ReplyId>,
        now: Now,
    ) -> Result<(), AnswerError> {
        let harness = self.harness.as_mut().ok_or(AnswerError::NotPending)?;
        let question = harness.questions.get(&permission_id).cloned().ok_or(AnswerError::NotPending)?;
        let (answer, resolved) = resolve(&question, permission_id, choice, by)?;
        harness.questions.remove(&permission_id);
        let generation = harness.generation;
        let frame = wire::response(&question.request_id, &answer);
        let id = self.next_persist;
        let mut side = self.queue_frames(id, vec![frame]);
        let outcome = outcome_of(&question, &answer);
        let grant = if resolved.get("scope").is_some() {
            let by = resolved.get("by").cloned().unwrap_or(Value::Null);
            self.open_grant(permission_id, question.session_id, &question.tool_call, true, &by)
        } else {
            GrantScope::None
        };
        side.push(SideEffect::PermissionResolved { permission_id, outcome, grant });
        side.extend(self.resume_turn_clock(question.session_id, now));
        let event = NewEvent::new(question.session_id, EventKind::PermissionResolved, resolved);
        self.persist(Purpose::Answer { generation, reply }, vec![event], side);
        Ok(())
    }

    /// The agent's posture or policy changed: `gate` answers the harness's next requests, and
    /// each waiting permission question it settles is answered now (recorded as
    /// `"redecided": true`, with `policy_denied` where a rule refused it); those it would ask
    /// about keep waiting. Sessions with a running turn get the new `policy_applied`.
    pub(super) fn change_gate(&mut self, gate: permissions::Gate, now: Now) {
        let Some(harness) = self.harness.as_mut() else { return };
        harness.gate = gate;
        // In a fixed order (by JSON-RPC id, as text), so that a replay answers them alike.
        let mut waiting: Vec<Question> =
            harness.questions.values().filter(|q| q.kind == QuestionKind::Permission).cloned().collect();
        waiting.sort_by_key(|q| q.request_id.to_string());
        let applied = harness.gate.applied();
        let generation = harness.generation;
        let mut sessions: Vec<SessionId> =
            self.turns.iter().filter(|t| t.request_id().is_some()).map(|t| t.session_id).collect();
        sessions.sort_by_key(|s| s.0);
        sessions.dedup();
        if let Some(applied) = applied {
            let events = sessions
                .iter()
                .map(|s| NewEvent::new(*s, EventKind::PolicyApplied, applied.clone()))
                .collect::<Vec<_>>();
            if !events.is_empty() {
                self.persist(Purpose::Other, events, Vec::new());
            }
        }
        for question in waiting {
            let Some(harness) = self.harness.as_mut() else { return };
            let options: Vec<PermissionOption> = serde_json::from_value(question.options.clone()).unwrap_or_default();
            let settled = permissions::redecide(
                &harness.gate,
                &question.request_id,
                &question.tool_call,
                &options,
                question.permission_id,
            );
            let Some((answer, resolved, denied)) = settled else { continue };
            harness.questions.remove(&question.permission_id);
            let frame = wire::response(&question.request_id, &answer);
            let id = self.next_persist;
            let mut side = self.queue_frames(id, vec![frame]);
            let outcome = outcome_of(&question, &answer);
            side.push(SideEffect::PermissionResolved {
                permission_id: question.permission_id,
                outcome,
                grant: GrantScope::None,
            });
            side.extend(self.resume_turn_clock(question.session_id, now));
            let mut events = Vec::new();
            if let Some(denied) = denied {
                events.push(NewEvent::new(question.session_id, EventKind::PolicyDenied, denied));
            }
            events.push(NewEvent::new(question.session_id, EventKind::PermissionResolved, resolved));
            self.persist(Purpose::Answer { generation, reply: None }, events, side);
        }
    }

    /// Answers every waiting question of a session `cancelled` (its turn is being cancelled).
    pub(super) fn cancel_questions(&mut self, session_id: SessionId, now: Now) {
        let Some(harness) = self.harness.as_ref() else { return };
        // In a fixed order (by JSON-RPC id, as text), so that a replay answers them alike.
        let mut waiting: Vec<(String, uuid::Uuid)> = harness
            .questions
            .values()
            .filter(|q| q.session_id == session_id)
            .map(|q| (q.request_id.to_string(), q.permission_id))
            .collect();
        waiting.sort();
        for (_, permission_id) in waiting {
            let _ = self.answer_question(permission_id, &Choice::Cancelled, serde_json::json!("cancel"), None, now);
        }
    }

    /// Stops the clock of the session's turn while a question waits for a person: the time left
    /// is kept, the stored deadline cleared (a takeover meanwhile gives the turn its whole limit
    /// again once answered).
    pub(super) fn pause_turn_clock(&mut self, session_id: SessionId, now: Now) -> Vec<SideEffect> {
        let Some(turn) = self.turns.iter_mut().find(|t| t.session_id == session_id && t.kill_at.is_none()) else {
            return Vec::new();
        };
        let Some(deadline) = turn.deadline.take() else { return Vec::new() };
        turn.paused = Some(deadline.saturating_duration_since(now.mono));
        turn.deadline_at = None;
        vec![SideEffect::TurnDeadline { turn_id: turn.id, deadline_at: None }]
    }

    /// Starts the clock of the session's turn again once none of its questions waits.
    fn resume_turn_clock(&mut self, session_id: SessionId, now: Now) -> Vec<SideEffect> {
        if self.harness.as_ref().is_some_and(|h| h.questions.values().any(|q| q.session_id == session_id)) {
            return Vec::new();
        }
        let server_limit = self.timeouts.turn;
        let Some(turn) = self.turns.iter_mut().find(|t| {
            t.session_id == session_id && t.deadline.is_none() && t.kill_at.is_none() && t.request_id().is_some()
        }) else {
            return Vec::new();
        };
        let whole = turn.limit.unwrap_or(server_limit);
        let (deadline, deadline_at) = now.plus(turn.paused.take().unwrap_or(whole));
        turn.deadline = Some(deadline);
        turn.deadline_at = Some(deadline_at);
        vec![SideEffect::TurnDeadline { turn_id: turn.id, deadline_at: Some(deadline_at) }]
    }
}
