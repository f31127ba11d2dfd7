//! Unit tests of the core: a simulated clock, scripted inputs, and assertions on the exact
//! effects — every failure path of the hardening issue without Docker or Postgres. The
//! simulator and the foundation's tests live here; [`changes`] tests what changes a running
//! agent (its environment, its sessions' mode, permission questions, its sandbox stopping).

mod ack_delay;
mod auth;
mod changes;
mod disk;
mod exactly_once;
mod gate;
mod jobs;
mod joined;
mod mcp;
mod model;
mod outage;
mod parking;
mod provider;
mod slots;
mod spare;
mod takeover_race;
mod usage;

use std::time::{Duration, Instant};

use bytes::Bytes;
use serde_json::{Value, json};

use super::*;
use crate::events::EventKind;

const LINK: LinkId = 1;
const CHANNEL: u32 = 5;

fn timeouts() -> Timeouts {
    Timeouts {
        harness_request: Duration::from_secs(10),
        turn: Duration::from_secs(100),
        cancel_grace: Duration::from_secs(5),
        reconnect_grace: Duration::from_secs(60),
        // Acknowledgements at once, so each test sees them with the commit; `ack_delay.rs`
        // tests the delay.
        ack_delay: Duration::ZERO,
    }
}

struct Sim {
    core: Core,
    now: Now,
    turn: OpenTurn,
    /// The mode the launched harness's sessions are put in.
    session_mode: Option<String>,
    /// The launched harness's permission posture.
    posture: crate::permissions::Posture,
    /// Slots asked for are not granted by [`Sim::drain`] (the test grants them).
    hold_slots: bool,
    /// The launched harness's login methods the server may call itself.
    auto_auth: Vec<String>,
    /// The login method the launched harness's agent names.
    auth_method: Option<String>,
    /// The variables in the launched harness's environment.
    delivered: Vec<String>,
    /// The MCP servers the launched harness's sessions are offered.
    mcp: crate::mcp::Offered,
    /// The folder the next harness's sessions start in (`None`: the home).
    session_cwd: Option<String>,
    /// Every job the core asked for so far, in order (results name them).
    jobs: Vec<Job>,
}

fn open_turn() -> OpenTurn {
    OpenTurn {
        id: TurnId(uuid::Uuid::new_v4()),
        session_id: SessionId(uuid::Uuid::new_v4()),
        prompt: json!([{"type": "text", "text": "hi"}]),
        state: StoredTurnState::Pending,
        created_at: chrono::Utc::now(),
        deadline_at: None,
        acp_session_id: None,
        time_limit: None,
    }
}

/// The harness's answer that ends the prompt [`Sim::run_until_prompt_sent`] sent (`end_turn`).
const END_TURN: &str = concat!(r#"{"jsonrpc":"2.0","id":"t-3","result":{"stopReason":"end_turn"}}"#, "\n");

impl Sim {
    /// The simulated agent's id.
    fn core_agent(&self) -> uuid::Uuid {
        self.core.agent_id.0
    }

    fn new() -> Self {
        let core = Core::new(AgentId(uuid::Uuid::new_v4()), "/home/agent".to_owned(), timeouts(), "t".to_owned());
        Self {
            core,
            now: Now { mono: Instant::now(), wall: chrono::Utc::now() },
            turn: open_turn(),
            session_mode: None,
            posture: crate::permissions::Posture::Autonomous,
            hold_slots: false,
            auto_auth: Vec::new(),
            auth_method: None,
            delivered: Vec::new(),
            mcp: Default::default(),
            session_cwd: None,
            jobs: Vec::new(),
        }
    }

    /// The id of the latest job `id_of` picks.
    fn latest_job(&self, id_of: impl Fn(&Job) -> Option<JobId>) -> JobId {
        self.jobs.iter().rev().find_map(id_of).expect("the core asked for that job")
    }

    /// The latest wake job finished.
    fn woken(&mut self, result: Result<(), WakeError>) -> Vec<Effect> {
        let job = self.latest_job(|j| if let Job::Wake { job } = j { Some(*job) } else { None });
        self.input(Input::Woken { job, result })
    }

    /// The latest harness start job finished.
    fn launched(&mut self, result: Result<Option<Launch>, String>) -> Vec<Effect> {
        let job = self.latest_job(|j| if let Job::StartHarness { job } = j { Some(*job) } else { None });
        self.input(Input::Launched { job, result })
    }

    /// The engine answered the latest question why the harness was killed.
    fn kill_explained(&mut self, oom: Option<String>) -> Vec<Effect> {
        let job = self.latest_job(|j| if let Job::ExplainKill { job } = j { Some(*job) } else { None });
        self.input(Input::KillExplained { job, oom })
    }

    fn input(&mut self, input: Input) -> Vec<Effect> {
        self.core.handle(input, self.now);
        self.drain()
    }

    fn advance(&mut self, by: Duration) -> Vec<Effect> {
        self.now.mono += by;
        self.now.wall += chrono::Duration::from_std(by).expect("duration");
        self.core.handle_timeout(self.now);
        self.drain()
    }

    /// The effects so far; slots asked for are granted at once unless `hold_slots` is set.
    fn drain(&mut self) -> Vec<Effect> {
        let mut effects: Vec<Effect> = std::iter::from_fn(|| self.core.poll_effect()).collect();
        let mut granted = 0;
        while !self.hold_slots {
            let asked: Vec<TurnId> = effects[granted..]
                .iter()
                .filter_map(|e| match e {
                    Effect::Slot(SlotChange::Ask(id)) => Some(*id),
                    _ => None,
                })
                .collect();
            granted = effects.len();
            if asked.is_empty() {
                break;
            }
            for turn_id in asked {
                self.core.handle(Input::SlotGranted { turn_id }, self.now);
            }
            effects.extend(std::iter::from_fn(|| self.core.poll_effect()));
        }
        self.jobs.extend(effects.iter().filter_map(|e| match e {
            Effect::Job(job) => Some(job.clone()),
            _ => None,
        }));
        effects
    }

    fn stdout(&mut self, offset: u64, text: &str) -> Vec<Effect> {
        self.input(Input::Stdout { link: LINK, channel: CHANNEL, offset, bytes: Bytes::from(text.to_owned()) })
    }

    fn ok(&mut self, id: PersistId) -> Vec<Effect> {
        self.input(Input::Persisted { id, result: Ok(()) })
    }

    /// Waiting turn → wake → attach → start: the harness has been sent `initialize` (its
    /// journal committed).
    fn start_harness(&mut self) {
        let effects = self.input(Input::OpenTurns(vec![self.turn.clone()].into()));
        assert!(effects.iter().any(|e| matches!(e, Effect::Job(Job::Wake { .. }))), "{effects:?}");
        self.woken(Ok(()));
        let effects = self.input(Input::Attached { link: LINK, processes: Vec::new() });
        assert!(matches!(effects[..], [Effect::LoadTakeover { link: LINK }]), "{effects:?}");
        let snapshot = Snapshot { generation: 0, harness: None, turns: vec![self.turn.clone()].into() };
        let effects = self.input(Input::Loaded { link: LINK, snapshot: Some(Box::new(snapshot)) });
        assert!(sends(&effects).contains(&Outbound::Control(ToSandboxd::Resume { channels: vec![] })));
        assert!(effects.iter().any(|e| matches!(e, Effect::Job(Job::StartHarness { .. }))));
        let start = ProcessStart { channel: CHANNEL, argv: vec![], env: vec![], cwd: "/".to_owned(), user: None };
        let launch = Launch {
            generation: 1,
            channel: CHANNEL,
            start,
            session_mode: self.session_mode.clone(),
            gate: crate::permissions::Gate {
                posture: self.posture,
                ..crate::permissions::Gate::autonomous("/home/agent")
            },
            auth: Auth::new(self.auth_method.clone(), self.auto_auth.clone(), self.delivered.clone()),
            mcp_servers: self.mcp.clone(),
            session_cwd: self.session_cwd.clone(),
        };
        self.launched(Ok(Some(launch)));
        let effects = self.input(Input::Control { link: LINK, msg: FromSandboxd::Started { channel: CHANNEL } });
        let (init_persist, _, _) = persists(&effects)[0];
        assert!(stdin(&effects).is_empty(), "initialize waits for its journal");
        let effects = self.ok(init_persist);
        assert_eq!(stdin(&effects).len(), 1);
    }

    /// ... → initialize → session/new → prompt recorded and sent. Returns the stdout offset the
    /// harness has printed up to.
    fn run_until_prompt_sent(&mut self) -> u64 {
        self.start_harness();
        let init =
            r#"{"jsonrpc":"2.0","id":"t-1","result":{"protocolVersion":1,"agentCapabilities":{"loadSession":true}}}"#;
        let mut offset = 0;
        let effects = self.stdout(offset, &format!("{init}\n"));
        offset += init.len() as u64 + 1;
        // The initialize line's persist and the session/new journal.
        let ids: Vec<PersistId> = persists(&effects).iter().map(|p| p.0).collect();
        assert_eq!(ids.len(), 2, "{effects:?}");
        for id in ids {
            self.ok(id);
        }
        let created = r#"{"jsonrpc":"2.0","id":"t-2","result":{"sessionId":"acp-1"}}"#;
        let effects = self.stdout(offset, &format!("{created}\n"));
        offset += created.len() as u64 + 1;
        let ids: Vec<PersistId> = persists(&effects).iter().map(|p| p.0).collect();
        assert_eq!(ids.len(), 2, "the session line and the recorded prompt: {effects:?}");
        assert!(stdin(&effects).is_empty(), "the prompt waits for its record");
        let mut sent = Vec::new();
        for id in ids {
            sent.extend(stdin(&self.ok(id)));
        }
        assert_eq!(sent.len(), 1);
        assert!(String::from_utf8_lossy(&sent[0].1).contains("\"t-3\""));
        offset
    }
}

fn persists(effects: &[Effect]) -> Vec<(PersistId, &Vec<NewEvent>, &Vec<SideEffect>)> {
    effects
        .iter()
        .filter_map(|e| match e {
            Effect::Persist { id, events, side, .. } => Some((*id, events, side)),
            _ => None,
        })
        .collect()
}

fn sends(effects: &[Effect]) -> Vec<Outbound> {
    effects
        .iter()
        .filter_map(|e| match e {
            Effect::Send { out, .. } => Some(out.clone()),
            _ => None,
        })
        .collect()
}

fn stdin(effects: &[Effect]) -> Vec<(u64, Bytes)> {
    sends(effects)
        .into_iter()
        .filter_map(|o| match o {
            Outbound::Stdin { offset, bytes, .. } => Some((offset, bytes)),
            Outbound::Control(_) => None,
        })
        .collect()
}

fn acks(effects: &[Effect]) -> Vec<u64> {
    sends(effects)
        .into_iter()
        .filter_map(|o| match o {
            Outbound::Control(ToSandboxd::Ack { offset, .. }) => Some(offset),
            _ => None,
        })
        .collect()
}

fn drops(effects: &[Effect]) -> usize {
    effects.iter().filter(|e| matches!(e, Effect::DropLink { .. })).count()
}

fn kinds(events: &[NewEvent]) -> Vec<EventKind> {
    events.iter().map(|e| e.kind).collect()
}

fn update(text: &str) -> String {
    json!({"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"acp-1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":text}}}})
        .to_string()
        + "\n"
}

fn stored_range(side: &[SideEffect]) -> Option<(u64, u64)> {
    side.iter().find_map(|s| match s {
        SideEffect::StdoutStored { from, to, .. } => Some((*from, *to)),
        _ => None,
    })
}

#[test]
fn a_turn_runs_with_record_then_send_and_acks_after_commits() {
    let mut sim = Sim::new();
    let offset = sim.run_until_prompt_sent();
    let effects = sim.stdout(offset, &format!("{}{END_TURN}", update("hello")));
    let stored = persists(&effects);
    assert_eq!(stored.len(), 2);
    assert!(acks(&effects).is_empty(), "no ack before the commit");
    assert_eq!(kinds(stored[1].1), vec![EventKind::TurnEnd]);
    let (first, second) = (stored[0].0, stored[1].0);
    let effects = sim.ok(second);
    assert!(acks(&effects).is_empty(), "a later commit does not ack past an earlier line");
    let effects = sim.ok(first);
    let end = offset + (update("hello").len() + END_TURN.len()) as u64;
    assert_eq!(acks(&effects), vec![end]);
}

#[test]
fn a_streamed_update_is_stored_as_the_text_the_harness_printed() {
    let mut sim = Sim::new();
    let offset = sim.run_until_prompt_sent();
    let update_text = r#"{"sessionUpdate":"agent_message_chunk", "content":{"type":"text","text":"hi"}}"#;
    let line = format!(
        "{{\"jsonrpc\":\"2.0\",\"method\":\"session/update\",\"params\":{{\"sessionId\":\"acp-1\",\"update\":{update_text}}}}}\n"
    );
    let effects = sim.stdout(offset, &line);
    let stored = persists(&effects);
    assert_eq!(stored.len(), 1);
    let event = &stored[0].1[0];
    assert_eq!(event.kind, EventKind::Update);
    assert_eq!(event.payload.as_text(), Some(update_text), "kept byte for byte, not parsed and encoded again");
    assert_eq!(event.payload.value()["content"]["text"], "hi");
}

#[test]
fn nul_in_output_is_stored_and_a_raw_nul_is_a_protocol_error() {
    let mut sim = Sim::new();
    let offset = sim.run_until_prompt_sent();
    let effects = sim.stdout(offset, &update("a\u{0}b"));
    let stored = persists(&effects);
    assert_eq!(stored.len(), 1, "the update with U+0000 is stored (budget::apply makes it storable)");
    assert_eq!(stored[0].1[0].payload.value()["content"]["text"], json!("a\u{0}b"));
    let next = offset + update("a\u{0}b").len() as u64;
    assert_eq!(acks(&sim.ok(stored[0].0)), vec![next]);
    // A raw 0x00 byte inside a JSON string is not JSON: a protocol error, the harness killed.
    let effects = sim.stdout(next, "{\"jsonrpc\":\"2.0\",\"method\":\"x\0\"}\n");
    let failed = persists(&effects);
    assert!(failed.iter().any(|p| p.1.iter().any(|e| e.payload.value()["code"] == json!("HARNESS_PROTOCOL_ERROR"))));
    assert!(sends(&effects).contains(&Outbound::Control(ToSandboxd::Signal { channel: CHANNEL, signal: 9 })));
}

#[test]
fn a_failed_store_drops_the_link_once_and_never_acks_past_it() {
    let mut sim = Sim::new();
    let offset = sim.run_until_prompt_sent();
    let (a, b) = (update("k"), update("k+1"));
    let end_k = offset + a.len() as u64;
    // Two frames: a persist each.
    let k = persists(&sim.stdout(offset, &a))[0].0;
    let effects = sim.stdout(end_k, &b);
    let stored = persists(&effects);
    let k1 = stored[0].0;
    assert_eq!(stored_range(stored[0].2).map(|r| r.0), Some(end_k), "k+1 chains from the end of k");
    let effects = sim.ok(k1);
    assert!(acks(&effects).is_empty());
    let effects = sim.input(Input::Persisted { id: k, result: Err(StoreFailure::Transient) });
    assert!(acks(&effects).is_empty(), "{effects:?}");
    assert_eq!(drops(&effects), 1);
    // Inputs on the dropped link change nothing.
    assert!(sim.stdout(offset + 1000, &update("late")).is_empty());
}

#[test]
fn completions_out_of_order_give_one_ack_at_the_end() {
    let mut sim = Sim::new();
    let offset = sim.run_until_prompt_sent();
    let text = format!("{}{}{}", update("1"), update("2"), update("3"));
    // One frame per line: a persist each.
    let mut ids: Vec<PersistId> = Vec::new();
    let mut at = offset;
    for line in [update("1"), update("2"), update("3")] {
        ids.extend(persists(&sim.stdout(at, &line)).iter().map(|p| p.0));
        at += line.len() as u64;
    }
    assert_eq!(ids.len(), 3);
    assert!(acks(&sim.ok(ids[2])).is_empty());
    assert_eq!(acks(&sim.ok(ids[0])), vec![offset + update("1").len() as u64]);
    assert_eq!(acks(&sim.ok(ids[1])), vec![offset + text.len() as u64]);
}

#[test]
fn a_rejected_line_is_replaced_by_an_error_not_retried() {
    let mut sim = Sim::new();
    let offset = sim.run_until_prompt_sent();
    let line = update("poison");
    let effects = sim.stdout(offset, &line);
    let id = persists(&effects)[0].0;
    let effects = sim.input(Input::Persisted { id, result: Err(StoreFailure::Rejected) });
    assert_eq!(drops(&effects), 0);
    let replacement = persists(&effects);
    assert_eq!(replacement.len(), 1);
    assert_eq!(replacement[0].1[0].payload.value()["code"], json!("HARNESS_OUTPUT_UNSTORABLE"));
    assert_eq!(stored_range(replacement[0].2), Some((offset, offset + line.len() as u64)));
    let effects = sim.ok(replacement[0].0);
    assert_eq!(acks(&effects), vec![offset + line.len() as u64]);
}

#[test]
fn a_permission_answer_waits_for_its_record_and_follows_the_prompt_offsets() {
    let mut sim = Sim::new();
    let offset = sim.run_until_prompt_sent();
    let ask = json!({"jsonrpc":"2.0","id":77,"method":"session/request_permission","params":{
        "sessionId":"acp-1","toolCall":{"toolCallId":"c1"},
        "options":[{"optionId":"ok","name":"Allow","kind":"allow_once"}]}})
    .to_string()
        + "\n";
    let effects = sim.stdout(offset, &ask);
    assert!(stdin(&effects).is_empty(), "answered only after the record commits");
    let stored = persists(&effects);
    assert_eq!(kinds(stored[0].1), vec![EventKind::Permission, EventKind::PermissionResolved]);
    assert!(stored[0].2.iter().any(|s| matches!(s, SideEffect::PendingStdin { .. })), "journaled with the line");
    let sent = stdin(&sim.ok(stored[0].0));
    assert_eq!(sent.len(), 1);
    assert!(String::from_utf8_lossy(&sent[0].1).contains("\"ok\""));
}

#[test]
fn a_prompt_whose_record_fails_is_never_sent() {
    let mut sim = Sim::new();
    sim.start_harness();
    let init = r#"{"jsonrpc":"2.0","id":"t-1","result":{"protocolVersion":1}}"#;
    let effects = sim.stdout(0, &format!("{init}\n"));
    for (id, ..) in persists(&effects) {
        sim.ok(id);
    }
    let created = r#"{"jsonrpc":"2.0","id":"t-2","result":{"sessionId":"acp-1"}}"#;
    let effects = sim.stdout(init.len() as u64 + 1, &format!("{created}\n"));
    let ids: Vec<PersistId> = persists(&effects).iter().map(|p| p.0).collect();
    let prompt = *ids.last().expect("the prompt's record");
    sim.ok(ids[0]);
    let effects = sim.input(Input::Persisted { id: prompt, result: Err(StoreFailure::Transient) });
    assert!(stdin(&effects).is_empty(), "never sent: {effects:?}");
    assert_eq!(drops(&effects), 1);
    assert_eq!(sim.core.turns[0].state, TurnState::Waiting, "it goes again after the takeover");
}

#[test]
fn a_stale_link_is_ignored() {
    let mut sim = Sim::new();
    let offset = sim.run_until_prompt_sent();
    let effects = sim.input(Input::Attached { link: 2, processes: Vec::new() });
    assert!(effects.iter().any(|e| matches!(e, Effect::DropLink { link: LINK })));
    assert!(sim.stdout(offset, &update("old link")).is_empty());
}

#[test]
fn attach_waits_for_commits_in_flight() {
    let mut sim = Sim::new();
    let offset = sim.run_until_prompt_sent();
    let (a, b) = (update("a"), update("b"));
    let mut ids: Vec<PersistId> = persists(&sim.stdout(offset, &a)).iter().map(|p| p.0).collect();
    ids.extend(persists(&sim.stdout(offset + a.len() as u64, &b)).iter().map(|p| p.0));
    assert_eq!(ids.len(), 2);
    sim.input(Input::LinkClosed { link: LINK });
    let effects = sim.input(Input::Attached { link: 2, processes: Vec::new() });
    assert!(!effects.iter().any(|e| matches!(e, Effect::LoadTakeover { .. })));
    assert!(!sim.ok(ids[0]).iter().any(|e| matches!(e, Effect::LoadTakeover { .. })));
    let effects = sim.ok(ids[1]);
    assert!(effects.iter().any(|e| matches!(e, Effect::LoadTakeover { link: 2 })), "{effects:?}");
}

fn process(stdout_acked: u64, stdin_accepted: u64) -> ProcessState {
    ProcessState {
        channel: CHANNEL,
        stdout_acked,
        stdout_end: stdout_acked,
        stdin_written: stdin_accepted,
        stdin_accepted,
        exit: None,
    }
}

fn running_snapshot(sim: &Sim, stored: u64, journal: Vec<(u64, Bytes)>) -> Snapshot {
    let mut turn = sim.turn.clone();
    turn.state = StoredTurnState::Sent { request_id: "t-3".to_owned(), generation: 1 };
    turn.deadline_at = Some(sim.now.wall + chrono::Duration::seconds(50));
    Snapshot {
        generation: 1,
        harness: Some(SnapshotHarness {
            generation: 1,
            channel: CHANNEL,
            stdout_stored: stored,
            init: Some(json!({"protocolVersion": 1, "agentCapabilities": {"loadSession": true}})),
            sessions: vec![(sim.turn.session_id, "acp-1".to_owned())],
            journal,
            session_mode: None,
            gate: crate::permissions::Gate {
                posture: sim.posture,
                ..crate::permissions::Gate::autonomous("/home/agent")
            },
            questions: Vec::new(),
            mcp_servers: Default::default(),
            session_cwd: None,
            auth_method: None,
            automatic: Vec::new(),
            delivered: Vec::new(),
            spare_session: None,
            spare_updates: Vec::new(),
        }),
        turns: vec![turn].into(),
    }
}

#[test]
fn a_takeover_resumes_from_the_furthest_of_stored_and_acked_and_resends_unaccepted_stdin() {
    let mut sim = Sim::new();
    let effects = sim.input(Input::Attached { link: LINK, processes: vec![process(120, 10)] });
    assert!(matches!(effects[..], [Effect::LoadTakeover { link: LINK }]));
    let journal = vec![(0, Bytes::from_static(b"0123456789")), (10, Bytes::from_static(b"prompt-frame\n"))];
    let snapshot = running_snapshot(&sim, 100, journal);
    let effects = sim.input(Input::Loaded { link: LINK, snapshot: Some(Box::new(snapshot)) });
    let out = sends(&effects);
    assert_eq!(
        out[0],
        Outbound::Control(ToSandboxd::Resume { channels: vec![ResumeFrom { channel: CHANNEL, offset: 120 }] })
    );
    assert_eq!(stdin(&effects), vec![(10, Bytes::from_static(b"prompt-frame\n"))], "only what sandboxd lacks, once");
    // A resent frame from 90 only yields what follows 120.
    let mut text = "x".repeat(29);
    text.push('\n');
    text.push_str(&update("after"));
    let effects = sim.stdout(90, &text);
    let stored = persists(&effects);
    assert_eq!(stored.len(), 1);
    assert_eq!(stored_range(stored[0].2), Some((100, 120 + update("after").len() as u64)));
}

#[test]
fn a_duplicate_prompt_response_ends_the_turn_once() {
    let mut sim = Sim::new();
    let offset = sim.run_until_prompt_sent();
    let effects = sim.stdout(offset, &format!("{END_TURN}{END_TURN}"));
    let stored = persists(&effects);
    assert_eq!(stored.len(), 1, "the second answer matches nothing");
    sim.ok(stored[0].0);
    // A reload while the end is being stored does not bring the turn back.
    let mut sim = Sim::new();
    let offset = sim.run_until_prompt_sent();
    let effects = sim.stdout(offset, END_TURN);
    let end = persists(&effects)[0].0;
    let mut row = sim.turn.clone();
    row.state = StoredTurnState::Sent { request_id: "t-3".to_owned(), generation: 1 };
    sim.input(Input::OpenTurns(vec![row.clone()].into()));
    assert!(sim.core.turns.is_empty(), "the ending turn stays ended");
    sim.ok(end);
}

#[test]
fn the_turn_limit_cancels_first_then_kills_after_the_grace() {
    let mut sim = Sim::new();
    sim.run_until_prompt_sent();
    assert!(sim.advance(Duration::from_secs(99)).is_empty());
    let effects = sim.advance(Duration::from_secs(1));
    let stored = persists(&effects);
    assert!(stored.iter().any(|p| p.1.iter().any(|e| e.payload.value()["code"] == json!("TURN_TIMEOUT"))));
    let journal = stored.iter().find(|p| p.2.iter().any(|s| matches!(s, SideEffect::PendingStdin { .. })));
    let cancel = sim.ok(journal.expect("cancel journaled").0);
    assert!(String::from_utf8_lossy(&stdin(&cancel)[0].1).contains("session/cancel"));
    assert!(!sends(&effects).iter().any(|o| matches!(o, Outbound::Control(ToSandboxd::Signal { .. }))));
    let effects = sim.advance(Duration::from_secs(5));
    assert!(sends(&effects).contains(&Outbound::Control(ToSandboxd::Signal { channel: CHANNEL, signal: 9 })));
    assert!(persists(&effects).iter().any(|p| kinds(p.1).contains(&EventKind::TurnEnd)));
}

#[test]
fn the_turn_budget_survives_a_takeover() {
    let mut sim = Sim::new();
    sim.input(Input::Attached { link: LINK, processes: vec![process(0, 23)] });
    let snapshot = running_snapshot(&sim, 0, Vec::new()); // deadline 50 s ahead
    sim.input(Input::Loaded { link: LINK, snapshot: Some(Box::new(snapshot)) });
    assert!(sim.advance(Duration::from_secs(49)).is_empty());
    let effects = sim.advance(Duration::from_secs(1));
    assert!(persists(&effects).iter().any(|p| p.1.iter().any(|e| e.payload.value()["code"] == json!("TURN_TIMEOUT"))));
}

#[test]
fn a_gap_in_stdout_drops_the_link() {
    let mut sim = Sim::new();
    let offset = sim.run_until_prompt_sent();
    let effects = sim.stdout(offset + 5, &update("gap"));
    assert_eq!(drops(&effects), 1);
    assert!(persists(&effects).is_empty());
}

#[test]
fn an_exit_ends_turns_only_after_every_line_is_stored() {
    let mut sim = Sim::new();
    let offset = sim.run_until_prompt_sent();
    let line = update("last words");
    let end = offset + line.len() as u64;
    let status = ExitStatus { code: Some(1), signal: None };
    let exited = FromSandboxd::Exited { channel: CHANNEL, status, stdout_end: end };
    assert!(sim.input(Input::Control { link: LINK, msg: exited }).is_empty());
    let effects = sim.stdout(offset, &line);
    let stored = persists(&effects);
    assert_eq!(stored.len(), 1, "the line, not yet the exit");
    let effects = sim.ok(stored[0].0);
    let exit = persists(&effects);
    assert!(
        exit.iter().any(|p| p.1.iter().any(|e| e.payload.value()["code"] == json!("HARNESS_EXITED"))),
        "{effects:?}"
    );
    assert!(sends(&effects).contains(&Outbound::Control(ToSandboxd::Forget { channel: CHANNEL })));
}

#[test]
fn the_reconnect_grace_fails_turns_once_at_its_end() {
    let mut sim = Sim::new();
    sim.run_until_prompt_sent();
    sim.input(Input::LinkClosed { link: LINK });
    assert!(sim.advance(Duration::from_secs(60) - Duration::from_millis(1)).is_empty());
    let effects = sim.advance(Duration::from_millis(1));
    let failed: Vec<_> = persists(&effects)
        .into_iter()
        .filter(|p| p.1.iter().any(|e| e.payload.value()["code"] == json!("SANDBOX_UNREACHABLE")))
        .collect();
    assert_eq!(failed.len(), 1);
    let effects = sim.input(Input::Attached { link: 2, processes: Vec::new() });
    assert!(!persists(&effects).iter().any(|p| p.1.iter().any(|e| e.kind == EventKind::Error)));
}

#[test]
fn a_session_that_cannot_be_restored_starts_anew_with_a_reset_notice() {
    let mut sim = Sim::new();
    sim.turn.acp_session_id = Some("acp-old".to_owned());
    sim.start_harness();
    let init =
        r#"{"jsonrpc":"2.0","id":"t-1","result":{"protocolVersion":1,"agentCapabilities":{"loadSession":true}}}"#;
    let effects = sim.stdout(0, &format!("{init}\n"));
    let mut offset = init.len() as u64 + 1;
    let mut load = None;
    for (id, ..) in persists(&effects) {
        for out in stdin(&sim.ok(id)) {
            load = Some(out);
        }
    }
    assert!(String::from_utf8_lossy(&load.expect("load sent").1).contains("session/load"));
    // Replayed history while opening is not stored.
    let replay = update("old history").replace("acp-1", "acp-old");
    assert!(persists(&sim.stdout(offset, &replay)).is_empty());
    offset += replay.len() as u64;
    let refused = r#"{"jsonrpc":"2.0","id":"t-2","error":{"code":-32000,"message":"gone"}}"#.to_owned() + "\n";
    let effects = sim.stdout(offset, &refused);
    offset += refused.len() as u64;
    let mut new_sent = false;
    for (id, ..) in persists(&effects) {
        new_sent |= stdin(&sim.ok(id)).iter().any(|s| String::from_utf8_lossy(&s.1).contains("session/new"));
    }
    assert!(new_sent);
    let created = r#"{"jsonrpc":"2.0","id":"t-3","result":{"sessionId":"acp-2"}}"#.to_owned() + "\n";
    let effects = sim.stdout(offset, &created);
    let line = &persists(&effects)[0];
    assert_eq!(
        line.1[0].payload.value()["code"],
        json!("CONTEXT_RESET"),
        "the notice is stored with the response line"
    );
    let _: Value = line.1[0].payload.clone().into_value();
}

#[test]
fn a_harness_killed_by_sigkill_is_explained_by_the_engine() {
    let mut sim = Sim::new();
    let offset = sim.run_until_prompt_sent();
    let status = ExitStatus { code: None, signal: Some(9) };
    let exited = FromSandboxd::Exited { channel: CHANNEL, status, stdout_end: offset };
    let effects = sim.input(Input::Control { link: LINK, msg: exited });
    assert!(effects.iter().any(|e| matches!(e, Effect::Job(Job::ExplainKill { .. }))), "{effects:?}");
    assert!(persists(&effects).is_empty(), "no verdict before the engine answers");
    let message = "the harness ran out of memory (limit 512 MiB)".to_owned();
    let effects = sim.kill_explained(Some(message));
    let failed = persists(&effects);
    assert!(
        failed.iter().any(|p| p.1.iter().any(|e| e.payload.value()["code"] == json!("OUT_OF_MEMORY"))),
        "{effects:?}"
    );
}

#[test]
fn a_started_sandbox_is_waited_for_not_started_again() {
    let mut sim = Sim::new();
    let effects = sim.input(Input::OpenTurns(vec![sim.turn.clone()].into()));
    assert_eq!(effects.iter().filter(|e| matches!(e, Effect::Job(Job::Wake { .. }))).count(), 1);
    let effects = sim.woken(Ok(()));
    assert!(!effects.iter().any(|e| matches!(e, Effect::Job(Job::Wake { .. }))), "{effects:?}");
    let effects = sim.input(Input::OpenTurns(vec![sim.turn.clone()].into()));
    assert!(!effects.iter().any(|e| matches!(e, Effect::Job(Job::Wake { .. }))), "{effects:?}");
    // sandboxd never dials in: the turn fails at the end of the grace, once.
    let effects = sim.advance(Duration::from_secs(60));
    assert!(
        persists(&effects)
            .iter()
            .any(|p| p.1.iter().any(|e| e.payload.value()["code"] == json!("SANDBOX_UNREACHABLE")))
    );
}

#[test]
fn creating_the_sandbox_does_not_count_against_the_reconnect_grace() {
    let mut sim = Sim::new();
    sim.input(Input::OpenTurns(vec![sim.turn.clone()].into()));
    // The container takes longer to create than the grace.
    assert!(sim.advance(Duration::from_secs(90)).is_empty());
    sim.woken(Ok(()));
    assert!(sim.advance(Duration::from_secs(59)).is_empty());
    let effects = sim.advance(Duration::from_secs(1));
    assert!(
        persists(&effects)
            .iter()
            .any(|p| p.1.iter().any(|e| e.payload.value()["code"] == json!("SANDBOX_UNREACHABLE")))
    );
}

#[test]
fn a_sandbox_that_dialed_in_before_its_wake_reported_is_woken_again_after_it_is_lost() {
    let mut sim = Sim::new();
    sim.input(Input::OpenTurns(vec![sim.turn.clone()].into()));
    // sandboxd connects before the wake job's result arrives.
    sim.input(Input::Attached { link: LINK, processes: Vec::new() });
    let snapshot = Snapshot { generation: 0, harness: None, turns: vec![sim.turn.clone()].into() };
    sim.input(Input::Loaded { link: LINK, snapshot: Some(Box::new(snapshot)) });
    sim.woken(Ok(()));
    // The container is removed: the link drops, and the waiting turn starts it again.
    let effects = sim.input(Input::LinkClosed { link: LINK });
    assert!(effects.iter().any(|e| matches!(e, Effect::Job(Job::Wake { .. }))), "{effects:?}");
}

#[test]
fn a_persist_that_ends_a_turn_names_the_end_for_the_metrics() {
    let mut sim = Sim::new();
    let offset = sim.run_until_prompt_sent();
    sim.advance(Duration::from_secs(2));
    let effects = sim.stdout(offset, END_TURN);
    let ended: Vec<&TurnEnded> = effects
        .iter()
        .flat_map(|e| match e {
            Effect::Persist { ended, .. } => ended.iter().collect(),
            _ => Vec::new(),
        })
        .collect();
    assert_eq!(ended.len(), 1, "{effects:?}");
    assert_eq!((ended[0].turn_id, ended[0].stop_reason.as_str()), (sim.turn.id, "end_turn"));
    assert!(ended[0].duration >= Duration::from_secs(1), "{:?}", ended[0]);
}

#[test]
fn a_prompt_s_record_stores_its_session_s_acp_id_too() {
    // The line that opened the session and the prompt's record are two persists: when the line
    // fails and the record commits, the takeover must still know the session the prompt went to,
    // or every update of the turn (naming that session) is dropped. (Found by `model.rs`.)
    let mut sim = Sim::new();
    sim.start_harness();
    let init =
        r#"{"jsonrpc":"2.0","id":"t-1","result":{"protocolVersion":1,"agentCapabilities":{"loadSession":true}}}"#;
    let effects = sim.stdout(0, &format!("{init}\n"));
    for (id, ..) in persists(&effects) {
        sim.ok(id);
    }
    let created = r#"{"jsonrpc":"2.0","id":"t-2","result":{"sessionId":"acp-1"}}"#;
    let effects = sim.stdout(init.len() as u64 + 1, &format!("{created}\n"));
    let record = persists(&effects)
        .into_iter()
        .find(|(_, _, side)| side.iter().any(|s| matches!(s, SideEffect::MarkSent { .. })))
        .expect("the prompt is recorded");
    let session = sim.turn.session_id;
    assert!(
        record.2.iter().any(|s| matches!(s, SideEffect::SessionOpened { session_id, acp_session_id, .. }
            if *session_id == session && acp_session_id == "acp-1")),
        "{record:?}"
    );
}
