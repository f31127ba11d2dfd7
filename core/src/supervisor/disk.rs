//! A turn that hit a full disk. The words of ENOSPC and EDQUOT in what the harness reports while
//! a turn runs — a tool call's output, its stderr, the prompt's error, or the error the turn
//! fails with — make the turn a suspect; when it ends, the core asks the driver whether the
//! sandbox's disk is full ([`Job::CheckDisk`]), and a `DISK_FULL` notice naming the turn says
//! which part is and why ([`Input::DiskChecked`]). A program that merely prints the words costs a
//! check and nothing else.

use serde_json::{Value, json};

use super::{Core, Job, Purpose};
use crate::events::{NewEvent, NoticeCode};
use crate::ids::{SessionId, TurnId};

/// Whether `text` carries the C library's words for ENOSPC or EDQUOT: a write failed for want of
/// space (XFS reports a full project quota as ENOSPC, btrfs a full qgroup as EDQUOT).
pub fn says_disk_full(text: &str) -> bool {
    ["No space left on device", "Disk quota exceeded"].iter().any(|words| text.contains(words))
}

/// How deep into an update's JSON the words are looked for.
const MAX_DEPTH: usize = 8;

/// Whether a `session/update` reports a tool call whose text carries ENOSPC or EDQUOT (its
/// output, its error, its raw output). Other updates (the agent's own words) are not read.
pub fn update_says_disk_full(update: &Value) -> bool {
    let kind = update.get("sessionUpdate").and_then(Value::as_str);
    matches!(kind, Some("tool_call" | "tool_call_update")) && any_string(update, MAX_DEPTH, &says_disk_full)
}

fn any_string(value: &Value, depth: usize, test: &impl Fn(&str) -> bool) -> bool {
    match value {
        Value::String(text) => test(text),
        _ if depth == 0 => false,
        Value::Array(items) => items.iter().any(|v| any_string(v, depth - 1, test)),
        Value::Object(map) => map.values().any(|v| any_string(v, depth - 1, test)),
        _ => false,
    }
}

/// The `DISK_FULL` notice of a turn.
pub fn notice(turn_id: TurnId, session_id: SessionId, message: &str) -> NewEvent {
    let mut notice = NewEvent::notice(session_id, NoticeCode::DiskFull, message);
    notice.payload.value_mut()["turn_id"] = json!(turn_id);
    notice
}

impl Core {
    /// A `session/update` of `session_id`: a tool call that failed for want of space makes the
    /// session's running turn a suspect.
    pub(super) fn watch_update_for_full_disk(&mut self, session_id: SessionId, update: &Value) {
        if !update_says_disk_full(update) {
            return;
        }
        if let Some(turn) = self.turns.iter().find(|t| t.session_id == session_id && t.request_id().is_some()) {
            self.disk_suspects.insert(turn.id);
        }
    }

    /// Harness stderr: the words make every running turn a suspect (a harness failing to write
    /// its own files says so there).
    pub(super) fn watch_stderr_for_full_disk(&mut self, bytes: &[u8]) {
        if !says_disk_full(&String::from_utf8_lossy(bytes)) {
            return;
        }
        let running = self.turns.iter().filter(|t| t.request_id().is_some()).map(|t| t.id);
        self.disk_suspects.extend(running);
    }

    /// A turn ends (its `message`, when it failed or its prompt was refused): when it is a
    /// suspect, or the message carries the words, the driver is asked.
    pub(super) fn turn_ended_maybe_on_full_disk(&mut self, turn_id: TurnId, session_id: SessionId, message: &str) {
        let suspect = self.disk_suspects.remove(&turn_id);
        if suspect || says_disk_full(message) {
            self.effects.push_back(super::Effect::Job(Job::CheckDisk { turns: vec![(turn_id, session_id)] }));
        }
    }

    /// The driver's answer for turns that ended suspected: `Some(message)` when the disk is full.
    pub(super) fn on_disk_checked(&mut self, turns: Vec<(TurnId, SessionId)>, finding: Option<String>) {
        let Some(message) = finding else { return };
        tracing::info!(agent.id = %self.agent_id, turns = turns.len(), message, "a turn hit a full disk");
        let events = turns.into_iter().map(|(turn_id, session_id)| notice(turn_id, session_id, &message)).collect();
        self.persist(Purpose::Other, events, Vec::new());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_calls_that_fail_for_want_of_space_are_recognised() {
        let output = json!({"sessionUpdate": "tool_call_update", "toolCallId": "c1", "status": "failed",
            "content": [{"type": "content", "content": {"type": "text",
                "text": "dd: error writing '/home/agent/big': No space left on device\n"}}]});
        assert!(update_says_disk_full(&output));
        let quota = json!({"sessionUpdate": "tool_call_update", "rawOutput": {"stderr": "cp: Disk quota exceeded"}});
        assert!(update_says_disk_full(&quota));
        let fine = json!({"sessionUpdate": "tool_call_update", "content": [{"type": "content",
            "content": {"type": "text", "text": "done"}}]});
        assert!(!update_says_disk_full(&fine));
        // The agent's own words are not a tool's failure.
        let words = json!({"sessionUpdate": "agent_message_chunk",
            "content": {"type": "text", "text": "No space left on device, it seems"}});
        assert!(!update_says_disk_full(&words));
        // Deeper than anyone nests a tool's output: not read.
        let mut deep = json!("No space left on device");
        for _ in 0..MAX_DEPTH + 1 {
            deep = json!([deep]);
        }
        assert!(!update_says_disk_full(&json!({"sessionUpdate": "tool_call", "content": deep})));
    }
}
