//! A turn the harness failed because the provider's response stream ended early. A harness
//! reports that in its own words (`terminated`, `fetch failed`); the egress proxy sees what
//! happened on the wire (a response cut short: bytes sent, which side ended, a TLS alert) and
//! records it per sandbox. When the harness answers a turn's prompt with an error, the core holds
//! that line — and every line after it, so the log keeps its order — and asks the shell whether
//! the proxy saw such a cut since the turn began ([`Job::CheckProviderStream`]). With the answer
//! ([`Input::ProviderStreamChecked`]) the held lines are handled: the turn's error is
//! `PROVIDER_STREAM_ENDED`, "the provider's stream ended early: <what the proxy saw> (the harness
//! said: …)", when the proxy saw a cut, else the harness's own `HARNESS_ERROR`.
//!
//! Nothing is stored while the lines are held, so a crash meanwhile loses nothing: the lines are
//! read again from sandboxd after the takeover (which holds up to 64 MiB unacknowledged, the
//! bound of what is held). A turn that ended some other way meanwhile (its harness exited) gets a
//! `PROVIDER_STREAM_ENDED` notice instead.

use std::collections::VecDeque;

use serde_json::json;

use super::stdout::Line;
use super::{Core, Effect, Job, Now, Purpose};
use crate::events::{NewEvent, NoticeCode};
use crate::ids::{SessionId, TurnId};

/// The words every such error and notice starts with.
pub const STREAM_ENDED_EARLY: &str = "the provider's stream ended early";

/// stdout lines held while the shell reads the proxy's report: the harness's error answer to
/// `turn_id`'s prompt first, then every line that came after it.
#[derive(Debug)]
pub struct HeldLines {
    /// The turn whose prompt the harness failed.
    pub turn_id: TurnId,
    /// The lines, in order.
    pub lines: VecDeque<Line>,
}

/// The message of a turn's error when the proxy saw its provider's stream cut short.
pub fn error_message(finding: &str, harness_said: &str) -> String {
    format!("{STREAM_ENDED_EARLY}: {finding} (the harness said: {harness_said})")
}

/// The `PROVIDER_STREAM_ENDED` notice of a turn that had ended otherwise by the time the report
/// was read.
pub fn notice(turn_id: TurnId, session_id: SessionId, finding: &str) -> NewEvent {
    let message = format!("{STREAM_ENDED_EARLY}: {finding}");
    let mut notice = NewEvent::notice(session_id, NoticeCode::ProviderStreamEnded, &message);
    notice.payload.value_mut()["turn_id"] = json!(turn_id);
    notice
}

impl Core {
    /// The harness answered request `id` with an error, on `line`: when that is a turn's prompt
    /// (not being handled again after its check), holds the line and asks the shell; else gives
    /// the line back.
    pub(super) fn hold_for_provider_check(&mut self, id: &str, line: Line) -> Option<Line> {
        let Some(harness) = self.harness.as_mut() else { return Some(line) };
        let Some(super::harness::Request { what: super::harness::Pending::Prompt { turn_id }, .. }) =
            harness.pending.get(id)
        else {
            return Some(line);
        };
        let turn_id = *turn_id;
        if harness.provider_checked.as_ref().is_some_and(|(checked, _)| *checked == turn_id) {
            return Some(line);
        }
        let Some(turn) = self.turns.iter().find(|t| t.id == turn_id) else { return Some(line) };
        let turns = vec![(turn.id, turn.session_id, turn.started)];
        harness.held = Some(HeldLines { turn_id, lines: VecDeque::from([line]) });
        self.effects.push_back(Effect::Job(Job::CheckProviderStream { turns }));
        None
    }

    /// The shell's answer: the held lines are handled now, the first with what the proxy saw;
    /// a turn no longer held gets a notice when the proxy saw a cut.
    pub(super) fn on_provider_stream_checked(
        &mut self,
        turns: Vec<(TurnId, SessionId)>,
        finding: Option<String>,
        now: Now,
    ) {
        if let Some(finding) = &finding {
            tracing::info!(agent.id = %self.agent_id, turns = turns.len(), finding, "a provider's stream ended early");
        }
        let held = self.harness.as_mut().and_then(|harness| {
            let matches = harness.held.as_ref().is_some_and(|h| turns.iter().any(|(turn, _)| *turn == h.turn_id));
            if matches { harness.held.take() } else { None }
        });
        let Some(held) = held else {
            let Some(finding) = finding else { return };
            let events = turns.into_iter().map(|(turn_id, session_id)| notice(turn_id, session_id, &finding)).collect();
            self.persist(Purpose::Other, events, Vec::new());
            return;
        };
        let generation = self.harness.as_ref().map(|h| h.generation);
        if let Some(harness) = self.harness.as_mut() {
            harness.provider_checked = Some((held.turn_id, finding));
        }
        self.handle_lines(held.lines, generation, now);
        if let Some(harness) = self.harness.as_mut() {
            harness.provider_checked = None;
        }
        self.after_commit(now);
    }
}
