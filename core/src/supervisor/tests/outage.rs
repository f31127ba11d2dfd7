//! The core through a Postgres outage: a sandbox cannot reconnect while the tunnel cannot check
//! its token, so the reconnect grace waits for the database and starts again in full.

use super::*;

#[test]
fn the_reconnect_grace_waits_while_the_database_is_down_and_restarts_when_it_is_back() {
    let mut sim = Sim::new();
    sim.turn.time_limit = Some(Duration::from_secs(3600));
    sim.run_until_prompt_sent();
    sim.input(Input::LinkClosed { link: LINK });
    sim.advance(Duration::from_secs(30));
    sim.input(Input::Database { up: false });
    assert!(sim.core.poll_timeout().is_none_or(|(_, timer)| timer != Timer::Reconnect));
    assert!(sim.advance(Duration::from_secs(300)).is_empty(), "nothing fails while the database is down");
    sim.input(Input::Database { up: true });
    assert!(sim.advance(Duration::from_secs(60) - Duration::from_millis(1)).is_empty(), "a full grace again");
    let effects = sim.advance(Duration::from_millis(1));
    let failed = persists(&effects)
        .into_iter()
        .filter(|p| p.1.iter().any(|e| e.payload.value()["code"] == json!("SANDBOX_UNREACHABLE")))
        .count();
    assert_eq!(failed, 1);
}
