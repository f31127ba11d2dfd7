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

/// What became of a commit.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Commit {
    Stored,
    /// Failed for now (a lost connection, a chain that did not start at the stored offset).
    Failed,
    /// The database refused the content (the update [`POISON`]): it never stores.
    Refused,
}

/// An update whose text the database refuses (as Postgres refuses a lone surrogate in jsonb).
const POISON: &str = "poison";
/// What [`Db::texts`] holds for the error stored in a refused line's place.
const UNSTORABLE: &str = "<unstorable>";

impl Db {
    /// Commits a persist (all or nothing).
    fn commit(&mut self, events: &[NewEvent], side: &[SideEffect], fail: bool) -> Commit {
        if events.iter().any(|e| e.kind == EventKind::Update && e.payload.value()["content"]["text"] == POISON) {
            return Commit::Refused;
        }
        let chained = side.iter().all(|s| match s {
            SideEffect::StdoutStored { from, .. } => *from == self.stored,
            _ => true,
        });
        if fail || !chained {
            return Commit::Failed;
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
                EventKind::Error if event.payload.value()["code"] == "HARNESS_OUTPUT_UNSTORABLE" => {
                    self.texts.push(UNSTORABLE.to_owned())
                }
                EventKind::TurnEnd => self.turn_ends += 1,
                _ => {}
            }
        }
        Commit::Stored
    }
}

/// What the runs of [`run_chunked`] went through, to show the failure paths were exercised.
#[derive(Default)]
struct Seen {
    drops: usize,
    failures: usize,
    refusals: usize,
    /// Refusals of a persist that joined several lines.
    joined_refusals: usize,
    reconnects: usize,
}

/// Random chunking of the same stdout, random completion order, random store failures and
/// random link drops: every update is stored exactly once, in order, the turn ends once, and no
/// acknowledgement ever passes what is stored.
#[test]
fn any_chunking_completion_order_and_link_drops_store_every_line_exactly_once() {
    let mut seen = Seen::default();
    for seed in 1..=200u64 {
        let expected: Vec<String> = (0..30).map(|i| format!("u{i}")).collect();
        assert_eq!(run_chunked(seed, &expected, &mut seen), expected, "seed {seed}: every update once, in order");
    }
    // The runs did exercise the failure paths.
    assert!(
        seen.drops > 100 && seen.failures > 100 && seen.reconnects > 200,
        "{} {} {}",
        seen.drops,
        seen.failures,
        seen.reconnects
    );
}

/// The same with one line the database refuses, alone or joined with others of its frame
/// (`joined.rs`): that line becomes an error in its place, every other is stored exactly once.
#[test]
fn a_line_the_database_refuses_takes_no_other_line_with_it() {
    let mut seen = Seen::default();
    for seed in 1..=200u64 {
        let printed: Vec<String> = (0..30).map(|i| if i == 11 { POISON.to_owned() } else { format!("u{i}") }).collect();
        let expected: Vec<String> =
            printed.iter().map(|t| if t == POISON { UNSTORABLE.to_owned() } else { t.clone() }).collect();
        assert_eq!(run_chunked(seed, &printed, &mut seen), expected, "seed {seed}: the refused line alone is lost");
    }
    assert!(
        seen.refusals > 200 && seen.joined_refusals > 50,
        "{} refusals, {} joined",
        seen.refusals,
        seen.joined_refusals
    );
}

/// One run: the harness prints an update for each of `texts`, then ends the turn, in random
/// chunks; commits complete in random order, some fail, the link drops at random. Returns what
/// the database holds (asserting the turn ended once and no ack passed the stored offset).
fn run_chunked(seed: u64, texts: &[String], seen: &mut Seen) -> Vec<String> {
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let mut sim = Sim::new();
    let start = sim.run_until_prompt_sent();
    let mut output = Vec::new();
    for text in texts {
        output.extend_from_slice(update(text).as_bytes());
    }
    output.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":\"t-3\",\"result\":{\"stopReason\":\"end_turn\"}}\n");
    let total = start + output.len() as u64;
    let mut db = Db { stored: start, ..Db::default() };
    let stdin_accepted = sim.core.harness.as_ref().map_or(0, |h| h.outbox.end());
    let (mut link, mut up, mut pos, mut acked) = (LINK, true, start, start);
    let mut notices: Vec<(PersistId, Commit)> = Vec::new();
    let mut queued: Vec<Effect> = Vec::new();
    for step in 0..20_000 {
        // Perform effects: the database commits in submission order, the news of it arrives later.
        for effect in std::mem::take(&mut queued) {
            match effect {
                Effect::Persist { id, events, side, .. } => {
                    let commit = db.commit(&events, &side, rng.below(12) == 0);
                    seen.failures += usize::from(commit == Commit::Failed);
                    seen.refusals += usize::from(commit == Commit::Refused);
                    let several = events.iter().filter(|e| e.kind == EventKind::Update).count() > 1;
                    seen.joined_refusals += usize::from(commit == Commit::Refused && several);
                    notices.push((id, commit));
                }
                Effect::Send { link: l, out: Outbound::Control(ToSandboxd::Ack { offset, .. }) } if l == link => {
                    assert!(offset <= db.stored, "seed {seed}: ack {offset} past the stored {}", db.stored);
                    acked = acked.max(offset);
                }
                Effect::Send { link: l, out: Outbound::Control(ToSandboxd::Resume { channels }) } if l == link => {
                    pos = channels.first().map(|c| c.offset).expect("the harness is resumed");
                }
                Effect::DropLink { link: l } if l == link => {
                    seen.drops += 1;
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
                // Up to about four lines a frame: several complete lines join one persist.
                let len = 1 + rng.below(600);
                let end = (pos + len).min(total);
                let chunk = &output[(pos - start) as usize..(end - start) as usize];
                let bytes = Bytes::copy_from_slice(chunk);
                queued.extend(sim.input(Input::Stdout { link, channel: CHANNEL, offset: pos, bytes }));
                pos = end;
            }
            5..=8 if !notices.is_empty() => {
                let (id, commit) = notices.remove(rng.below(notices.len() as u64) as usize);
                let result = match commit {
                    Commit::Stored => Ok(()),
                    Commit::Failed => Err(StoreFailure::Transient),
                    Commit::Refused => Err(StoreFailure::Rejected),
                };
                queued.extend(sim.input(Input::Persisted { id, result }));
            }
            _ if !up || rng.below(40) == 0 => {
                // The link drops (or is down): sandboxd dials again with what it holds.
                if up {
                    queued.extend(sim.input(Input::LinkClosed { link }));
                }
                link += 1;
                up = true;
                seen.reconnects += 1;
                let mut process = process(acked, stdin_accepted);
                process.stdout_end = total;
                queued.extend(sim.input(Input::Attached { link, processes: vec![process] }));
                pos = acked;
            }
            _ => {}
        }
    }
    assert_eq!(db.turn_ends, 1, "seed {seed}: one turn_end");
    db.texts
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
