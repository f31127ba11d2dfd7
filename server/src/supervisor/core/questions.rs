//! Permission questions waiting for a person: an answer (or a cancel) becomes the harness's
//! response, recorded with the `permission_resolved` event and the question's row in one
//! transaction that also journals the response's frame, which leaves only after that commit.

use agent_client_protocol::v1::schema::PermissionOption;

use super::types::{AnswerError, Now, ReplyId};
use super::{Core, Purpose};
use crate::acp::wire;
use crate::events::appender::SideEffect;
use crate::events::{EventKind, NewEvent};
use crate::ids::SessionId;
use crate::permissions::{self, Choice};

impl Core {
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
        let options: Vec<PermissionOption> = serde_json::from_value(question.options.clone()).unwrap_or_default();
        let (answer, resolved) = permissions::resolve(&question.request_id, permission_id, &options, choice, by)
            .map_err(|e| AnswerError::BadChoice(e.0))?;
        harness.questions.remove(&permission_id);
        let generation = harness.generation;
        let frame = wire::response(&question.request_id, &answer);
        let id = self.next_persist;
        let mut side = self.queue_frames(id, vec![frame]);
        let outcome = answer.get("outcome").cloned().unwrap_or(serde_json::Value::Null);
        side.push(SideEffect::PermissionResolved { permission_id, outcome, grant: false });
        side.extend(self.resume_turn_clock(question.session_id, now));
        let event = NewEvent::new(question.session_id, EventKind::PermissionResolved, resolved);
        self.persist(Purpose::Answer { generation, reply }, vec![event], side);
        Ok(())
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
