//! Permission questions waiting for a person: an answer (or a cancel) becomes the harness's
//! response, recorded with the `permission_resolved` event and the question's row in one
//! transaction that also journals the response's frame, which leaves only after that commit.

use agent_client_protocol::v1::schema::PermissionOption;

use super::types::{AnswerError, ReplyId};
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
        side.push(SideEffect::PermissionResolved { permission_id, outcome });
        let event = NewEvent::new(question.session_id, EventKind::PermissionResolved, resolved);
        self.persist(Purpose::Answer { generation, reply }, vec![event], side);
        Ok(())
    }

    /// Answers every waiting question of a session `cancelled` (its turn is being cancelled).
    pub(super) fn cancel_questions(&mut self, session_id: SessionId) {
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
            let _ = self.answer_question(permission_id, &Choice::Cancelled, serde_json::json!("cancel"), None);
        }
    }
}
