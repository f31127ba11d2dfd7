//! The exactly-once property of the core under random chunking, commit completion order,
//! failed commits and dropped links: every harness line is stored once, and no ack passes a line
//! that is not stored.

use super::*;

/// A small deterministic generator (xorshift64*), so the property test needs no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// The database as the core's persists change it: events in commit order, the stored stdout
/// offset (compare-and-set), the stdin journal, whether the turn ended.
#[derive(Default)]
struct Db {
    stored: u64,
    texts: Vec<String>,
    turn_ends: usize,
    journal: Vec<(u64, Bytes)>,
}

impl Db {
    /// Commits a persist (all or nothing); `false` when it fails.
    fn commit(&mut self, events: &[NewEvent], side: &[SideEffect], fail: bool) -> bool {
        let chained = side.iter().all(|s| match s {
            SideEffect::StdoutStored { from, .. } => *from == self.stored,
            _ => true,
        });
        if fail || !chained {
            return false;
        }
        for effect in side {
            match effect {
                SideEffect::StdoutStored { to, .. } => self.stored = *to,
                SideEffect::PendingStdin { offset, bytes, .. } => self.journal.push((*offset, bytes.clone())),
                _ => {}
            }
        }
        for event in events {
            match event.kind {
                EventKind::Update => {
                    self.texts.push(event.payload.value()["content"]["text"].as_str().unwrap_or_default().to_owned())
                }
                EventKind::TurnEnd => self.turn_ends += 1,
                _ => {}
            }
        }
        true
    }
}

/// Random chunking of the same stdout, random completion order, random store failures and
/// random link drops: every update is stored exactly once, in order, the turn ends once, and no
/// acknowledgement ever passes what is stored.
#[test]
fn any_chunking_completion_order_and_link_drops_store_every_line_exactly_once() {
    let (mut drops_seen, mut failures_seen, mut reconnects) = (0, 0, 0);
    for seed in 1..=200u64 {
        let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
        let mut sim = Sim::new();
        let start = sim.run_until_prompt_sent();
        let expected: Vec<String> = (0..30).map(|i| format!("u{i}")).collect();
        let mut output = Vec::new();
        for text in &expected {
            output.extend_from_slice(update(text).as_bytes());
        }
        output.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":\"t-3\",\"result\":{\"stopReason\":\"end_turn\"}}\n");
        let total = start + output.len() as u64;
        let mut db = Db { stored: start, ..Db::default() };
        let stdin_accepted = sim.core.harness.as_ref().map_or(0, |h| h.outbox.end());
        let (mut link, mut up, mut pos, mut acked) = (LINK, true, start, start);
        let mut notices: Vec<(PersistId, bool)> = Vec::new();
        let mut queued: Vec<Effect> = Vec::new();
        for step in 0..20_000 {
            // Perform effects: the database commits in submission order, the news of it arrives later.
            for effect in std::mem::take(&mut queued) {
                match effect {
                    Effect::Persist { id, events, side, .. } => {
                        let ok = db.commit(&events, &side, rng.below(12) == 0);
                        failures_seen += usize::from(!ok);
                        notices.push((id, ok));
                    }
                    Effect::Send { link: l, out: Outbound::Control(ToSandboxd::Ack { offset, .. }) } if l == link => {
                        assert!(offset <= db.stored, "seed {seed}: ack {offset} past the stored {}", db.stored);
                        acked = acked.max(offset);
                    }
                    Effect::Send { link: l, out: Outbound::Control(ToSandboxd::Resume { channels }) } if l == link => {
                        pos = channels.first().map(|c| c.offset).expect("the harness is resumed");
                    }
                    Effect::DropLink { link: l } if l == link => {
                        drops_seen += 1;
                        up = false;
                    }
                    Effect::LoadTakeover { link: l } => {
                        let mut snapshot = running_snapshot(&sim, db.stored, db.journal.clone());
                        if db.turn_ends > 0 {
                            snapshot.turns.turns.clear();
                        }
                        queued.extend(sim.input(Input::Loaded { link: l, snapshot: Some(Box::new(snapshot)) }));
                    }
                    _ => {}
                }
            }
            if !queued.is_empty() {
                continue;
            }
            let settled = db.turn_ends > 0 && notices.is_empty() && pos >= total;
            if settled {
                break;
            }
            assert!(step < 19_999, "seed {seed}: did not settle");
            match rng.below(10) {
                0..=4 if up && pos < total => {
                    let len = 1 + rng.below(120);
                    let end = (pos + len).min(total);
                    let chunk = &output[(pos - start) as usize..(end - start) as usize];
                    let bytes = Bytes::copy_from_slice(chunk);
                    queued.extend(sim.input(Input::Stdout { link, channel: CHANNEL, offset: pos, bytes }));
                    pos = end;
                }
                5..=8 if !notices.is_empty() => {
                    let (id, ok) = notices.remove(rng.below(notices.len() as u64) as usize);
                    let result = if ok { Ok(()) } else { Err(StoreFailure::Transient) };
                    queued.extend(sim.input(Input::Persisted { id, result }));
                }
                _ if !up || rng.below(40) == 0 => {
                    // The link drops (or is down): sandboxd dials again with what it holds.
                    if up {
                        queued.extend(sim.input(Input::LinkClosed { link }));
                    }
                    link += 1;
                    up = true;
                    reconnects += 1;
                    let mut process = process(acked, stdin_accepted);
                    process.stdout_end = total;
                    queued.extend(sim.input(Input::Attached { link, processes: vec![process] }));
                    pos = acked;
                }
                _ => {}
            }
        }
        assert_eq!(db.texts, expected, "seed {seed}: every update once, in order");
        assert_eq!(db.turn_ends, 1, "seed {seed}: one turn_end");
    }
    // The runs did exercise the failure paths.
    assert!(drops_seen > 100 && failures_seen > 100 && reconnects > 200, "{drops_seen} {failures_seen} {reconnects}");
}

#[test]
fn a_stale_read_of_open_turns_never_brings_an_ended_turn_back() {
    // A read of the open turns that started before the prompt was recorded (the row still
    // `pending`) and is delivered after the turn ended and its end was stored (a slow database):
    // the turn must not be prompted again (the harness would answer it twice).
    let mut sim = Sim::new();
    let offset = sim.run_until_prompt_sent();
    let effects = sim.stdout(offset, END_TURN);
    for (id, _, _) in persists(&effects) {
        sim.ok(id);
    }
    let stale = sim.turn.clone();
    assert_eq!(stale.state, StoredTurnState::Pending);
    let effects = sim.input(Input::OpenTurns(vec![stale].into()));
    assert!(stdin(&effects).is_empty(), "no second prompt: {effects:?}");
    assert!(persists(&effects).is_empty(), "nothing recorded for it: {effects:?}");
    assert!(
        effects.iter().all(|e| !matches!(e, Effect::Job(Job::StartHarness { .. } | Job::Wake { .. }))),
        "{effects:?}"
    );
}
