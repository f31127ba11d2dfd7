//! Taking a sandbox over when sandboxd (re)connects — after a dropped link or a server restart
//! alike: wait for the persists in flight, read what the database holds, then pick up the
//! running harness (stdout from what is stored or acknowledged, stdin resent from the journal at
//! the offsets sandboxd has not accepted yet, prompts' deadlines kept), or give up on it.

use bytes::Bytes;

use super::harness::{HarnessStreams, Pending, Request};
use super::sandboxd::{ProcessState, ResumeFrom, ToSandboxd};
use super::turns::TurnState;
use super::{
    Core, Effect, FailureCode, Harness, Job, LinkId, LinkState, Now, OpenWork, Outbound, Phase, Purpose, SessionPhase,
};
use crate::acp::messages;
use crate::events::side_effects::SideEffect;
use crate::ids::SessionId;

/// The harness the database says runs.
#[derive(Debug, Clone)]
pub struct SnapshotHarness {
    /// Its generation.
    pub generation: i64,
    /// Its channel.
    pub channel: u32,
    /// stdout stored up to here.
    pub stdout_stored: u64,
    /// Its `initialize` answer, once it gave one.
    pub init: Option<serde_json::Value>,
    /// Sessions it knows, with their ACP ids.
    pub sessions: Vec<(SessionId, String)>,
    /// Journaled stdin frames of this generation, in offset order.
    pub journal: Vec<(u64, Bytes)>,
    /// The mode its adapter puts sessions in (for sessions it opens from now on).
    pub session_mode: Option<String>,
    /// What answers its permission requests.
    pub gate: crate::permissions::Gate,
    /// Its questions still waiting for a person.
    pub questions: Vec<super::harness::Question>,
    /// The MCP servers its sessions are offered.
    pub mcp_servers: crate::mcp::Offered,
    /// The folder its sessions start in (`None`: the home).
    pub session_cwd: Option<String>,
    /// The login method the agent names (`auth_method`), signed in with when it asks.
    pub auth_method: Option<String>,
    /// Login methods its adapter may call on its own, whose key its environment holds.
    pub automatic: Vec<String>,
    /// The names of the variables it was started with.
    pub delivered: Vec<String>,
    /// A session it opened before any of the agent's sessions took it (the warm pool's): the
    /// next session to open takes it instead of `session/new`.
    pub spare_session: Option<String>,
    /// What it sent about the spare session meanwhile, as stored.
    pub spare_updates: Vec<serde_json::Value>,
}

/// What a takeover reads.
#[derive(Debug, Clone)]
pub struct Snapshot {
    /// The sandbox row's harness generation.
    pub generation: i64,
    /// The harness, if the row names one.
    pub harness: Option<SnapshotHarness>,
    /// The agent's unfinished turns (with its parked turns' questions and open grants).
    pub turns: OpenWork,
}

impl Core {
    /// sandboxd said hello on a new link.
    pub(super) fn on_attached(&mut self, link: LinkId, processes: Vec<ProcessState>, now: Now) {
        self.attached_at = Some(now.wall);
        self.recovered();
        match &self.link {
            LinkState::Up { link: old }
            | LinkState::Draining { link: old, .. }
            | LinkState::Loading { link: old, .. }
                if *old != link =>
            {
                self.effects.push_back(super::Effect::DropLink { link: *old });
            }
            _ => {}
        }
        self.stop_dialing();
        // Let the commits in flight land first, so what the database says is current.
        self.link = LinkState::Draining { link, processes };
        if self.in_flight.is_empty() {
            self.begin_load(link);
        }
    }

    /// Asks the shell for the snapshot.
    pub(super) fn begin_load(&mut self, link: LinkId) {
        if let LinkState::Draining { link: l, processes } = &self.link
            && *l == link
        {
            self.link = LinkState::Loading { link, processes: processes.clone() };
            self.effects.push_back(super::Effect::LoadTakeover { link });
        }
    }

    /// The snapshot arrived.
    pub(super) fn on_loaded(&mut self, link: LinkId, snapshot: Option<Box<Snapshot>>, now: Now) {
        let LinkState::Loading { link: l, processes } = &self.link else { return };
        if *l != link {
            return;
        }
        let processes = processes.clone();
        match snapshot {
            Some(snapshot) => self.take_over(link, &processes, *snapshot, now),
            // Without the database we cannot tell what to resume: drop the connection (the
            // processes keep running) and let sandboxd dial again.
            None => self.drop_link("the takeover could not read the database"),
        }
    }

    fn take_over(&mut self, link: LinkId, processes: &[ProcessState], snapshot: Snapshot, now: Now) {
        let agent_id = self.agent_id;
        let mut side = Vec::new();
        if let Some(highest) = processes.iter().map(|p| p.channel).max() {
            side.push(SideEffect::BumpChannel { agent_id, above: highest });
        }
        self.harness = None;
        self.merge_turns(snapshot.turns, now);
        // A prompt accepted after the snapshot was read is missing from it: read again.
        self.effects.push_back(Effect::Job(Job::LoadTurns));
        let named = snapshot.harness.is_some();
        // Questions of a harness that is gone park their turns (below).
        let orphaned = snapshot.harness.as_ref().map(|h| h.questions.clone()).unwrap_or_default();
        let mut resume = Vec::new();
        let running = snapshot.harness.and_then(|h| {
            let process = processes.iter().find(|p| p.channel == h.channel)?;
            Some((h, process.clone()))
        });
        // A hole in the stdin journal (an entry that failed to commit before a later one did) can
        // never be resent: sandboxd would refuse every later frame and the takeover repeat
        // forever. The running harness is given up instead (its turns end as a lost harness's).
        let running = running.filter(|(known, process)| {
            let accepted = process.stdin_accepted.max(process.stdin_written);
            let whole = journal_continues(&known.journal, accepted);
            if !whole {
                tracing::warn!(agent.id = %agent_id, channel = known.channel, stdin = accepted, "the stdin journal has a hole where sandboxd expects the next byte: the running harness is given up");
            }
            whole
        });
        let capabilities =
            running.as_ref().and_then(|(h, _)| h.init.as_ref()).and_then(|init| messages::parse_initialize(init).ok());
        match (running, capabilities) {
            (Some((known, process)), Some(capabilities)) => {
                let from = known.stdout_stored.max(process.stdout_acked);
                let accepted = process.stdin_accepted.max(process.stdin_written);
                let streams = HarnessStreams {
                    stdout_from: from,
                    stdout_stored: known.stdout_stored,
                    stdin_next: accepted,
                    stdin_written: process.stdin_written,
                };
                let phase = Phase::Ready(capabilities);
                let mut harness = Harness::new(known.generation, known.channel, phase, streams, known.gate);
                for (offset, bytes) in known.journal {
                    if offset + bytes.len() as u64 > accepted {
                        harness.outbox.restore(offset, bytes);
                    }
                }
                harness.exited = process.exit.map(|status| (status, process.stdout_end));
                harness.session_mode = known.session_mode;
                harness.mcp_servers = known.mcp_servers;
                harness.session_cwd = known.session_cwd;
                harness.spare_session = known.spare_session;
                harness.spare_updates = super::harness::SpareUpdates::from_stored(known.spare_updates);
                // Signed in as its start would have: its variables' names are kept with it.
                harness.auth = super::Auth::new(known.auth_method, known.automatic, known.delivered);
                if let Some(init) = &known.init {
                    harness.auth.read_advertised(init);
                }
                for question in known.questions {
                    harness.questions.insert(question.permission_id, question);
                }
                for (session_id, acp_id) in known.sessions {
                    harness.sessions.insert(session_id, SessionPhase::Ready(acp_id));
                }
                for turn in &self.turns {
                    if let TurnState::Sent { request_id, generation } = &turn.state
                        && *generation == harness.generation
                    {
                        let what = Pending::Prompt { turn_id: turn.id };
                        harness.pending.insert(request_id.clone(), Request { what, deadline: None });
                    }
                }
                tracing::info!(agent.id = %agent_id, channel = known.channel, from, stdin = accepted, "took over the running harness");
                resume.push(ResumeFrom { channel: known.channel, offset: from });
                self.harness = Some(harness);
            }
            (running, _) => {
                self.orphaned = orphaned;
                if running.is_some() || named {
                    side.push(SideEffect::ClearHarness { agent_id, generation: snapshot.generation });
                }
            }
        }
        if !side.is_empty() {
            self.persist(Purpose::Other, Vec::new(), side);
        }
        self.link = LinkState::Up { link };
        self.reconnect_at = None;
        self.send(Outbound::Control(ToSandboxd::Resume { channels: resume }));
        // After the resume: sandboxd takes stdin for a process once it knows the server keeps it.
        self.release_stdin();
        let generation = self.harness.as_ref().map(|h| h.generation);
        let lost =
            |t: &super::Turn| matches!(&t.state, TurnState::Sent { generation: g, .. } if Some(*g) != generation);
        self.fail_turns(lost, FailureCode::HarnessLost, "the harness process was lost (the sandbox restarted)", now);
        self.finish_exit_if_drained(now);
    }
}

/// Whether the journal holds every stdin byte from `accepted` on, without a hole.
fn journal_continues(journal: &[(u64, Bytes)], accepted: u64) -> bool {
    let mut frames: Vec<(u64, u64)> = journal
        .iter()
        .map(|(offset, bytes)| (*offset, offset + bytes.len() as u64))
        .filter(|(_, end)| *end > accepted)
        .collect();
    frames.sort_unstable();
    let mut next = accepted;
    for (start, end) in frames {
        if start > next {
            return false;
        }
        next = next.max(end);
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(offset: u64, len: usize) -> (u64, Bytes) {
        (offset, Bytes::from(vec![b'x'; len]))
    }

    #[test]
    fn a_journal_continues_only_without_a_hole_past_what_sandboxd_accepted() {
        assert!(journal_continues(&[], 10), "nothing to resend");
        assert!(journal_continues(&[frame(0, 10), frame(10, 5)], 10), "from the accepted byte on");
        assert!(journal_continues(&[frame(5, 10), frame(15, 5)], 10), "a frame partly written");
        assert!(journal_continues(&[frame(15, 5), frame(10, 5)], 10), "in any order");
        assert!(!journal_continues(&[frame(12, 5)], 10), "bytes 10..12 are missing");
        assert!(!journal_continues(&[frame(10, 5), frame(16, 5)], 10), "byte 15 is missing");
    }
}
