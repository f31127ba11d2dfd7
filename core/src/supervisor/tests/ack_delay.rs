//! Coalesced stdout acknowledgements: with a delay, a commit's ack waits for the timer (and
//! takes the lines committed meanwhile along), a large one goes at once, and none is sent on a
//! link that is gone.

use super::*;

const DELAY: Duration = Duration::from_millis(50);

fn delayed() -> Sim {
    let mut sim = Sim::new();
    let agent_id = sim.core.agent_id;
    sim.core = Core::new(agent_id, "/home/agent".to_owned(), Timeouts { ack_delay: DELAY, ..timeouts() }, "t".into());
    sim
}

#[test]
fn acks_wait_for_the_delay_and_cover_every_line_committed_meanwhile() {
    let mut sim = delayed();
    let offset = sim.run_until_prompt_sent();
    let (a, b) = (update("a"), update("b"));
    let first = persists(&sim.stdout(offset, &a))[0].0;
    assert!(acks(&sim.ok(first)).is_empty(), "a small ack waits");
    assert_eq!(sim.core.poll_timeout().map(|(_, timer)| timer), Some(Timer::Ack));
    let second = persists(&sim.stdout(offset + a.len() as u64, &b))[0].0;
    assert!(sim.advance(DELAY / 2).is_empty());
    assert!(acks(&sim.ok(second)).is_empty(), "the deadline is the first line's");
    let effects = sim.advance(DELAY / 2);
    assert_eq!(acks(&effects), vec![offset + (a.len() + b.len()) as u64], "one ack for both lines");
    assert_ne!(sim.core.poll_timeout().map(|(_, timer)| timer), Some(Timer::Ack), "nothing waits any more");
}

#[test]
fn a_large_ack_goes_at_once() {
    let mut sim = delayed();
    let offset = sim.run_until_prompt_sent();
    let big = update(&"x".repeat(super::super::stdout::ACK_EAGER_BYTES as usize));
    let id = persists(&sim.stdout(offset, &big))[0].0;
    assert_eq!(acks(&sim.ok(id)), vec![offset + big.len() as u64]);
}

#[test]
fn no_ack_is_sent_on_a_link_that_closed() {
    let mut sim = delayed();
    let offset = sim.run_until_prompt_sent();
    let id = persists(&sim.stdout(offset, &update("a")))[0].0;
    assert!(acks(&sim.ok(id)).is_empty());
    sim.input(Input::LinkClosed { link: LINK });
    assert_ne!(sim.core.poll_timeout().map(|(_, timer)| timer), Some(Timer::Ack));
    assert!(acks(&sim.advance(DELAY)).is_empty(), "the next link resumes from the stored offset instead");
}
