//! How many networks the Docker driver keeps ready for agents not created yet
//! ([`super::docker_networks`]), from how fast agents are being created: [`READY_NETWORKS`] when
//! creations are rare, more while they come often (up to [`MOST_READY_NETWORKS`]), so that
//! creations one a second still find a network and its holder ready while the ones they took are
//! being replaced. Pure: the caller says what time it is.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// Networks kept ready when agents are created rarely (and at start).
pub const READY_NETWORKS: usize = 2;
/// At most this many are kept ready, however fast agents come (each holds a bridge, a subnet and a
/// network holder, ~3 MiB).
pub const MOST_READY_NETWORKS: usize = 6;
/// How far back creations count.
pub const DEMAND_WINDOW: Duration = Duration::from_secs(10);

/// The recent takes of ready networks (creations of agents).
#[derive(Debug, Default)]
pub struct ReadyDemand {
    takes: VecDeque<Instant>,
    /// Whether a task is settling the pool back (removing what the demand no longer wants).
    pub settling: bool,
}

impl ReadyDemand {
    /// An agent was created at `now`.
    pub fn took(&mut self, now: Instant) {
        self.forget_before(now);
        // Bounded: no more than the count that can raise the target is kept.
        if self.takes.len() >= 2 * MOST_READY_NETWORKS {
            self.takes.pop_front();
        }
        self.takes.push_back(now);
    }

    /// How many networks should be ready or being made at `now`: [`READY_NETWORKS`] plus one for
    /// every two creations in the last [`DEMAND_WINDOW`], at most [`MOST_READY_NETWORKS`]. (A
    /// replacement takes its delay and a network's and a holder's making, about two seconds: at
    /// one creation a second about two are being made at any time.)
    pub fn target(&mut self, now: Instant) -> usize {
        self.forget_before(now);
        (READY_NETWORKS + self.takes.len() / 2).min(MOST_READY_NETWORKS)
    }

    /// Whether the demand is back at its floor (nothing recent left to count).
    pub fn is_quiet(&mut self, now: Instant) -> bool {
        self.forget_before(now);
        self.takes.is_empty()
    }

    fn forget_before(&mut self, now: Instant) {
        while self.takes.front().is_some_and(|&at| now.saturating_duration_since(at) >= DEMAND_WINDOW) {
            self.takes.pop_front();
        }
    }
}

/// How many ready networks to remove so that `ready + making` is back at `target`, removing only
/// ready ones (those being made are counted, not cancelled).
pub fn surplus(ready: usize, making: usize, target: usize) -> usize {
    (ready + making).saturating_sub(target).min(ready)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rare_creations_keep_the_floor() {
        let (mut demand, start) = (ReadyDemand::default(), Instant::now());
        assert_eq!(demand.target(start), READY_NETWORKS);
        demand.took(start);
        assert_eq!(demand.target(start), READY_NETWORKS, "one creation does not raise it");
        // One every 11 s: never two in a window.
        demand.took(start + Duration::from_secs(11));
        assert_eq!(demand.target(start + Duration::from_secs(11)), READY_NETWORKS);
    }

    #[test]
    fn creations_one_a_second_raise_it_to_the_most_and_it_falls_back_after_the_window() {
        let (mut demand, start) = (ReadyDemand::default(), Instant::now());
        let mut targets = Vec::new();
        for second in 0..10 {
            let now = start + Duration::from_secs(second);
            demand.took(now);
            targets.push(demand.target(now));
        }
        assert_eq!(targets, [2, 3, 3, 4, 4, 5, 5, 6, 6, 6]);
        assert!(targets.iter().all(|&t| t <= MOST_READY_NETWORKS));
        let last = start + Duration::from_secs(9);
        assert!(!demand.is_quiet(last));
        // The window moves on: the target falls with the creations it forgets.
        assert_eq!(demand.target(last + Duration::from_secs(5)), 4);
        assert_eq!(demand.target(last + DEMAND_WINDOW), READY_NETWORKS);
        assert!(demand.is_quiet(last + DEMAND_WINDOW));
    }

    #[test]
    fn a_burst_is_bounded_in_memory_and_in_networks() {
        let (mut demand, now) = (ReadyDemand::default(), Instant::now());
        for _ in 0..10_000 {
            demand.took(now);
        }
        assert!(demand.takes.len() <= 2 * MOST_READY_NETWORKS);
        assert_eq!(demand.target(now), MOST_READY_NETWORKS);
    }

    #[test]
    fn the_surplus_is_what_is_ready_beyond_the_target() {
        assert_eq!(surplus(6, 0, 2), 4);
        assert_eq!(surplus(3, 2, 2), 3, "those being made count, and only ready ones go");
        assert_eq!(surplus(1, 4, 2), 1);
        assert_eq!(surplus(2, 0, 2), 0);
        assert_eq!(surplus(0, 0, 2), 0);
    }
}
