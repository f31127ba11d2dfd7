//! The update lines of one stdout frame share a persist (`supervisor::joined`): stored and
//! acknowledged together, a line that does more keeps its own in order, and a refused shared
//! persist is read again line by line after a takeover.

use super::*;

#[test]
fn the_update_lines_of_one_frame_share_one_persist() {
    let mut sim = Sim::new();
    let offset = sim.run_until_prompt_sent();
    let text = format!("{}{}{}", update("1"), update("2"), update("3"));
    let effects = sim.stdout(offset, &text);
    let stored = persists(&effects);
    assert_eq!(stored.len(), 1, "{effects:?}");
    let texts: Vec<_> = stored[0].1.iter().map(|e| e.payload.value()["content"]["text"].clone()).collect();
    assert_eq!(texts, vec![json!("1"), json!("2"), json!("3")]);
    assert_eq!(stored[0].2.len(), 1, "nothing but the stdout range");
    assert_eq!(stored_range(stored[0].2), Some((offset, offset + text.len() as u64)));
    assert_eq!(acks(&sim.ok(stored[0].0)), vec![offset + text.len() as u64]);
    // The next frame's lines chain from there, in a persist of their own.
    let more = format!("{}{}", update("4"), update("5"));
    let effects = sim.stdout(offset + text.len() as u64, &more);
    let stored = persists(&effects);
    assert_eq!(stored.len(), 1);
    let end = offset + (text.len() + more.len()) as u64;
    assert_eq!(stored_range(stored[0].2), Some((offset + text.len() as u64, end)));
}

#[test]
fn a_line_that_does_more_than_store_events_keeps_its_own_persist_in_order() {
    let mut sim = Sim::new();
    let offset = sim.run_until_prompt_sent();
    let text = format!("{}{}{END_TURN}{}", update("1"), update("2"), update("3"));
    let effects = sim.stdout(offset, &text);
    let stored = persists(&effects);
    let shape: Vec<Vec<EventKind>> = stored.iter().map(|p| kinds(p.1)).collect();
    assert_eq!(
        shape,
        vec![vec![EventKind::Update, EventKind::Update], vec![EventKind::TurnEnd], vec![EventKind::Update]],
        "the turn's end is stored by its own persist, between the updates around it"
    );
    let ranges: Vec<_> = stored.iter().map(|p| stored_range(p.2).expect("a stdout range")).collect();
    assert!(ranges.windows(2).all(|w| w[0].1 == w[1].0), "one chain: {ranges:?}");
    assert_eq!(ranges.last().map(|r| r.1), Some(offset + text.len() as u64));
}

#[test]
fn a_refused_persist_of_several_lines_is_read_again_line_by_line() {
    let mut sim = Sim::new();
    let offset = sim.run_until_prompt_sent();
    let lines = [update("good 1"), update("poison"), update("good 2")];
    let text = lines.concat();
    let effects = sim.stdout(offset, &text);
    let joined = persists(&effects)[0].0;
    let effects = sim.input(Input::Persisted { id: joined, result: Err(StoreFailure::Rejected) });
    assert_eq!(drops(&effects), 1, "read again from the stored offset: {effects:?}");
    assert!(persists(&effects).is_empty(), "no error stored for good lines: {effects:?}");
    // sandboxd dials again and resends from the stored offset.
    let stdin_accepted = sim.core.harness.as_ref().map_or(0, |h| h.outbox.end());
    let mut process = process(offset, stdin_accepted);
    process.stdout_end = offset + text.len() as u64;
    let effects = sim.input(Input::Attached { link: LINK + 1, processes: vec![process] });
    assert!(matches!(effects[..], [Effect::LoadTakeover { .. }]), "{effects:?}");
    let snapshot = running_snapshot(&sim, offset, Vec::new());
    sim.input(Input::Loaded { link: LINK + 1, snapshot: Some(Box::new(snapshot)) });
    let effects =
        sim.input(Input::Stdout { link: LINK + 1, channel: CHANNEL, offset, bytes: Bytes::from(text.clone()) });
    let stored = persists(&effects);
    assert_eq!(stored.len(), 3, "one persist a line until past the refused range: {effects:?}");
    let (good, poison, good_too) = (stored[0].0, stored[1].0, stored[2].0);
    sim.ok(good);
    let effects = sim.input(Input::Persisted { id: poison, result: Err(StoreFailure::Rejected) });
    let replacement = persists(&effects);
    assert_eq!(replacement[0].1[0].payload.value()["code"], json!("HARNESS_OUTPUT_UNSTORABLE"));
    let poison_start = offset + lines[0].len() as u64;
    assert_eq!(stored_range(replacement[0].2), Some((poison_start, poison_start + lines[1].len() as u64)));
    sim.ok(replacement[0].0);
    assert_eq!(acks(&sim.ok(good_too)), vec![offset + text.len() as u64]);
    // Past the range, lines of one frame join again.
    let more = format!("{}{}", update("3"), update("4"));
    let effects = sim.input(Input::Stdout {
        link: LINK + 1,
        channel: CHANNEL,
        offset: offset + text.len() as u64,
        bytes: Bytes::from(more),
    });
    assert_eq!(persists(&effects).len(), 1);
}
