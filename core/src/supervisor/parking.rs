//! Parked turns (seed 001, "the turn is parked instead of held"): when the harness of a turn
//! whose session has a question waiting for a person is lost — its sandbox stopped or was
//! killed, its process died, the server found it gone after a restart — the turn is not failed
//! but parked, and its questions stay answerable. When the last one is answered the turn
//! resumes: the session is loaded again in a new harness and a prompt tells the agent the
//! answers; an approved call is allowed once more under a one-shot grant that matches that call
//! (same session, same effect, paths, command or URL — the title when there are none), so
//! nobody is asked twice.
//!
//! Everything goes through the core like any answer: the first answer wins, each step is stored
//! (question, grant, turn) before anything acts on it.

use std::collections::HashMap;

use serde_json::{Value, json};

use super::harness::{Question, QuestionKind};
use super::turns::{self, Turn, TurnState};
use super::types::{AnswerError, Now, ReplyId};
use super::{Core, FailureCode, Harness, OpenWork, Purpose};
use crate::events::side_effects::{GrantScope, SideEffect};
use crate::events::{EventKind, NewEvent, NoticeCode};
use crate::ids::{SessionId, TurnId};
use crate::permissions::Choice;

/// The longest tool call title quoted in the prompt that resumes a turn.
const MAX_TITLE_CHARS: usize = 200;

/// A turn waiting, without a harness, for the answers to its questions.
#[derive(Debug, Clone)]
pub struct Parked {
    /// The turn (its prompt is replaced when it resumes).
    pub turn: Turn,
    /// Its questions still waiting.
    pub questions: Vec<Question>,
    /// The answers given so far, as the resuming prompt tells them.
    pub answers: Vec<String>,
}

impl Core {
    /// Takes the harness away (it is gone); its questions waiting for a person are kept to park
    /// their turns in the [`Core::fail_turns`] that follows.
    /// Without a harness in memory (none was taken over since the server started) the questions
    /// stored for the open turns stand in.
    pub(super) fn drop_harness(&mut self) -> Option<Harness> {
        let harness = self.harness.take();
        self.orphaned = match &harness {
            Some(harness) => harness.questions.values().cloned().collect(),
            None => std::mem::take(&mut self.stored_questions),
        };
        self.orphaned.sort_by_key(|q| q.request_id.to_string());
        harness
    }

    /// Parks the turns among `failing` whose session has an orphaned question; the rest are
    /// returned (to fail).
    pub(super) fn park_waiting(&mut self, failing: Vec<Turn>, code: FailureCode, message: &str) -> Vec<Turn> {
        let orphaned = std::mem::take(&mut self.orphaned);
        if orphaned.is_empty() {
            return failing;
        }
        let (mut events, mut side, mut parked_ids, mut rest) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for mut turn in failing {
            let questions: Vec<Question> =
                orphaned.iter().filter(|q| q.session_id == turn.session_id).cloned().collect();
            if questions.is_empty() {
                rest.push(turn);
                continue;
            }
            tracing::info!(agent.id = %self.agent_id, turn.id = %turn.id, %code, "parking a turn whose question waits");
            if let (Some(harness), Some(request_id)) = (self.harness.as_mut(), turn.request_id()) {
                harness.pending.remove(request_id);
            }
            let text = format!(
                "{message}; a question of this turn waits for an answer, so the turn is parked: once answered it \
                 resumes in a new harness"
            );
            let mut notice = NewEvent::notice(turn.session_id, NoticeCode::TurnParked, text);
            notice.payload.value_mut()["turn_id"] = json!(turn.id);
            notice.payload.value_mut()["cause"] = json!(code.as_str());
            events.push(notice);
            side.push(SideEffect::ParkTurn { turn_id: turn.id });
            parked_ids.push(turn.id);
            turn.state = TurnState::Waiting;
            (turn.deadline, turn.deadline_at, turn.kill_at, turn.paused) = (None, None, None, None);
            self.parked.insert(turn.id, Parked { turn, questions, answers: Vec::new() });
        }
        if !parked_ids.is_empty() {
            // Like an end: a reload before this commits must not bring the turn back as running.
            let id = self.persist(Purpose::Ending, events, side);
            self.ending.extend(parked_ids.into_iter().map(|turn| (turn, id)));
        }
        rest
    }

    /// Answers a parked turn's question; the last answer resumes the turn.
    pub(super) fn answer_parked(
        &mut self,
        permission_id: uuid::Uuid,
        choice: &Choice,
        by: Value,
        reply: Option<ReplyId>,
    ) -> Result<(), AnswerError> {
        let (turn_id, question) = self
            .parked
            .iter()
            .find_map(|(turn_id, p)| {
                p.questions.iter().find(|q| q.permission_id == permission_id).map(|q| (*turn_id, q))
            })
            .map(|(turn_id, q)| (turn_id, q.clone()))
            .ok_or(AnswerError::NotPending)?;
        let (answer, mut resolved) = super::questions::resolve(&question, permission_id, choice, by)?;
        let elicited = question.kind == QuestionKind::Elicitation;
        let approved = !elicited && resolved["option_kind"].as_str().is_some_and(|kind| kind.starts_with("allow"));
        resolved["parked"] = json!(true);
        let outcome = super::questions::outcome_of(&question, &answer);
        // An approval opens a grant for the retried call: a session grant when the person chose
        // so, else (or when the session can hold no more) a one-shot one.
        let grant = if approved {
            let (session_id, tool_call) = (question.session_id, &question.tool_call);
            match self.open_grant(
                permission_id,
                session_id,
                tool_call,
                resolved.get("scope").is_some(),
                &by_of(&resolved),
            ) {
                GrantScope::None => self.open_grant(permission_id, session_id, tool_call, false, &Value::Null),
                grant => grant,
            }
        } else {
            GrantScope::None
        };
        let mut events = vec![NewEvent::new(question.session_id, EventKind::PermissionResolved, resolved)];
        let mut side = vec![SideEffect::PermissionResolved { permission_id, outcome, grant }];
        let Some(parked) = self.parked.get_mut(&turn_id) else { return Err(AnswerError::NotPending) };
        parked.questions.retain(|q| q.permission_id != permission_id);
        parked.answers.push(if elicited {
            answered_question(&question.tool_call, &answer)
        } else {
            answered_call(&question.tool_call, approved)
        });
        if parked.questions.is_empty()
            && let Some(parked) = self.parked.remove(&turn_id)
        {
            let prompt = resuming_prompt(&parked.answers);
            let mut notice = NewEvent::notice(
                question.session_id,
                NoticeCode::TurnResumed,
                "every question of the parked turn is answered: it resumes",
            );
            notice.payload.value_mut()["turn_id"] = json!(turn_id);
            notice.payload.value_mut()["prompt"] = prompt.clone();
            events.push(notice);
            side.push(SideEffect::UnparkTurn { turn_id, prompt: prompt.clone() });
            let mut turn = parked.turn;
            turn.prompt = prompt;
            turn.state = TurnState::Waiting;
            self.turns.push(turn);
        }
        let generation = self.harness.as_ref().map_or(0, |h| h.generation);
        self.persist(Purpose::Answer { generation, reply }, events, side);
        Ok(())
    }

    /// Cancels a parked turn: its questions are answered `cancelled` and it ends `cancelled`.
    pub(super) fn cancel_parked(&mut self, session_id: SessionId, now: Now) -> bool {
        let Some(turn_id) = self.parked.iter().find(|(_, p)| p.turn.session_id == session_id).map(|(id, _)| *id) else {
            return false;
        };
        let Some(parked) = self.parked.remove(&turn_id) else { return false };
        let (mut events, mut side) = (Vec::new(), Vec::new());
        for question in &parked.questions {
            let cancelled =
                super::questions::resolve(question, question.permission_id, &Choice::Cancelled, json!("cancel"));
            let Ok((answer, resolved)) = cancelled else { continue };
            let outcome = super::questions::outcome_of(question, &answer);
            side.push(SideEffect::PermissionResolved {
                permission_id: question.permission_id,
                outcome,
                grant: GrantScope::None,
            });
            events.push(NewEvent::new(session_id, EventKind::PermissionResolved, resolved));
        }
        let ending = turns::ending(&parked.turn, "cancelled", None, None, now.wall);
        events.push(ending.event);
        side.push(ending.effect);
        self.end_turns(events, side, vec![ending.ended]);
        true
    }

    /// Parked turns and grants as stored, merged with what memory knows (memory wins: this core
    /// is the only writer, and what it wrote may not have committed yet).
    pub(super) fn merge_parked(&mut self, work: &OpenWork, parked_rows: Vec<Turn>) {
        let mut merged: HashMap<TurnId, Parked> = HashMap::new();
        for turn in parked_rows {
            if self.turns.iter().any(|t| t.id == turn.id) {
                continue; // resuming: its new state is being stored
            }
            let parked = self.parked.remove(&turn.id).unwrap_or_else(|| {
                let questions =
                    work.questions.iter().filter(|w| w.turn_id == turn.id).map(|w| w.question.clone()).collect();
                Parked { turn, questions, answers: Vec::new() }
            });
            merged.insert(parked.turn.id, parked);
        }
        // Turns being parked right now are not in the rows as parked yet.
        for (id, parked) in std::mem::take(&mut self.parked) {
            if self.ending.contains_key(&id) {
                merged.insert(id, parked);
            }
        }
        self.parked = merged;
        // The running turns' questions, for when their harness turns out to be gone before this
        // process ever took it over.
        self.stored_questions = work
            .questions
            .iter()
            .filter(|w| self.turns.iter().any(|t| t.id == w.turn_id))
            .map(|w| w.question.clone())
            .collect();
        self.merge_grants(&work.grants);
    }
}

/// Who answered, as a `permission_resolved` payload says.
fn by_of(resolved: &Value) -> Value {
    resolved.get("by").cloned().unwrap_or(Value::Null)
}

/// One line of text, control characters flattened, at most `MAX_TITLE_CHARS` characters.
fn flat(text: &str) -> String {
    let flat: String = text.chars().map(|c| if c.is_control() { ' ' } else { c }).take(MAX_TITLE_CHARS).collect();
    flat.trim().to_owned()
}

/// How an answered permission question reads in the resuming prompt (the call by its title,
/// else its kind).
fn answered_call(tool_call: &Value, approved: bool) -> String {
    let title = tool_call
        .get("title")
        .and_then(Value::as_str)
        .or_else(|| tool_call.get("kind").and_then(Value::as_str))
        .unwrap_or("a tool call");
    let title = flat(title);
    if approved {
        format!("{title:?} was approved (it is allowed once when you try it again)")
    } else {
        format!("{title:?} was denied (do not try it again)")
    }
}

/// How an answered question of the agent's own reads in the resuming prompt.
fn answered_question(request: &Value, answer: &Value) -> String {
    let message = flat(request.get("message").and_then(Value::as_str).unwrap_or("your question"));
    match answer.get("action").and_then(Value::as_str) {
        Some("accept") => {
            let content = answer.get("content").map(Value::to_string).unwrap_or_default();
            format!("you asked {message:?}; the answer: {}", flat(&content))
        }
        _ => format!("you asked {message:?}; the person declined to answer"),
    }
}

/// The prompt that resumes a parked turn: one text block, one line, starting with
/// `[agenthold]`, telling the agent what was answered.
pub fn resuming_prompt(answers: &[String]) -> Value {
    let text = format!(
        "[agenthold] The sandbox stopped while this turn waited for a person's answer; the turn resumes now. {}. \
         Continue the task where you left off.",
        answers.join("; ")
    );
    json!([{"type": "text", "text": text}])
}
