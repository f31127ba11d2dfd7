//! A turn the harness failed because the provider's response stream ended early. A harness
//! reports that in its own words (`terminated`, `fetch failed`); the egress proxy sees what
//! happened on the wire (a response cut short: bytes sent, which side ended, a TLS alert) and
//! records it per sandbox. When the harness fails a turn, the core asks the shell whether the
//! proxy saw such a cut since the turn began ([`Job::CheckProviderStream`]), and a
//! `PROVIDER_STREAM_ENDED` notice naming the turn says "the provider's stream ended early" and
//! what the proxy saw ([`Input::ProviderStreamChecked`]).

use serde_json::json;

use super::Turn;
use super::{Core, Effect, Job, Purpose};
use crate::events::{NewEvent, NoticeCode};
use crate::ids::{SessionId, TurnId};

/// The words every such notice starts with.
pub const STREAM_ENDED_EARLY: &str = "the provider's stream ended early";

/// The `PROVIDER_STREAM_ENDED` notice of a turn.
pub fn notice(turn_id: TurnId, session_id: SessionId, finding: &str) -> NewEvent {
    let message = format!("{STREAM_ENDED_EARLY}: {finding}");
    let mut notice = NewEvent::notice(session_id, NoticeCode::ProviderStreamEnded, &message);
    notice.payload["turn_id"] = json!(turn_id);
    notice
}

impl Core {
    /// The harness failed `turn` with an error: ask whether the proxy saw its provider's stream
    /// cut short.
    pub(super) fn ask_whether_the_provider_stream_ended(&mut self, turn: &Turn) {
        let turns = vec![(turn.id, turn.session_id, turn.started)];
        self.effects.push_back(Effect::Job(Job::CheckProviderStream { turns }));
    }

    /// The shell's answer: a notice per turn when the proxy saw a cut.
    pub(super) fn on_provider_stream_checked(&mut self, turns: Vec<(TurnId, SessionId)>, finding: Option<String>) {
        let Some(finding) = finding else { return };
        tracing::info!(agent.id = %self.agent_id, turns = turns.len(), finding, "a provider's stream ended early");
        let events = turns.into_iter().map(|(turn_id, session_id)| notice(turn_id, session_id, &finding)).collect();
        self.persist(Purpose::Other, events, Vec::new());
    }
}
