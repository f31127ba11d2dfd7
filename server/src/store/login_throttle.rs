//! Throttling failed logins without letting anyone lock anyone out (issue 28): failures are
//! counted per (account, client address), and a pair that keeps failing waits longer and longer
//! (after [`FREE_FAILURES`] failures: 1 s, 2 s, 4 s, … up to the window) — a hard lock per account
//! would let anyone lock out anyone, the admin included. An address that has not failed for an
//! account gets through whatever others did to it (a right password from a clean address signs
//! in); one that has failed for an account many others are failing on too
//! ([`Limits::per_account`]) waits for the window. Each address has its own cap across accounts
//! (password spraying). Pure: the counts in, a decision out.

use std::time::Duration;

/// Failures a (account, address) pair may have before it waits.
pub const FREE_FAILURES: i64 = 5;

/// The limits.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// How long a failure counts.
    pub window: Duration,
    /// Failures of one account (from every address) past which only clean addresses pass.
    pub per_account: i64,
    /// Failures from one address (for every account) past which it waits for the window.
    pub per_address: i64,
}

/// The failures within the window that bear on an attempt.
#[derive(Debug, Clone, Copy, Default)]
pub struct Failures {
    /// Of this account from this address.
    pub pair: i64,
    /// How long ago the pair's latest one was (`None`: none).
    pub pair_latest_ago: Option<Duration>,
    /// Of this account, from any address.
    pub account: i64,
    /// From this address, for any account.
    pub address: i64,
    /// How long ago the address's oldest one in the window was.
    pub address_oldest_ago: Option<Duration>,
    /// How long ago the pair's oldest one in the window was.
    pub pair_oldest_ago: Option<Duration>,
}

/// Whether an attempt may go on, else how long to wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Check the password.
    Go,
    /// Not now: try again after this long.
    Wait(Duration),
}

/// The pair's wait after `failures` failures (none below [`FREE_FAILURES`]).
pub fn backoff(failures: i64, window: Duration) -> Duration {
    if failures < FREE_FAILURES {
        return Duration::ZERO;
    }
    let doublings = u32::try_from(failures - FREE_FAILURES).unwrap_or(u32::MAX).min(30);
    Duration::from_secs(1u64 << doublings).min(window)
}

/// Decides an attempt.
pub fn decide(failures: Failures, limits: Limits) -> Decision {
    let until_window_ends = |oldest: Option<Duration>| limits.window.saturating_sub(oldest.unwrap_or_default());
    if failures.address >= limits.per_address {
        return Decision::Wait(until_window_ends(failures.address_oldest_ago).max(Duration::from_secs(1)));
    }
    if failures.pair == 0 {
        return Decision::Go;
    }
    if failures.account >= limits.per_account {
        // An account under attack: an address that failed on it waits for its failures to age out.
        return Decision::Wait(until_window_ends(failures.pair_oldest_ago).max(Duration::from_secs(1)));
    }
    let wait = backoff(failures.pair, limits.window).saturating_sub(failures.pair_latest_ago.unwrap_or_default());
    if wait.is_zero() { Decision::Go } else { Decision::Wait(wait) }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: Limits = Limits { window: Duration::from_secs(900), per_account: 20, per_address: 50 };

    fn secs(s: u64) -> Option<Duration> {
        Some(Duration::from_secs(s))
    }

    #[test]
    fn a_failing_pair_waits_longer_and_longer_up_to_the_window() {
        assert_eq!(backoff(4, LIMITS.window), Duration::ZERO);
        assert_eq!(backoff(5, LIMITS.window), Duration::from_secs(1));
        assert_eq!(backoff(8, LIMITS.window), Duration::from_secs(8));
        assert_eq!(backoff(40, LIMITS.window), LIMITS.window);
        assert_eq!(backoff(i64::MAX, LIMITS.window), LIMITS.window);
        let failing =
            |pair, ago| Failures { pair, pair_latest_ago: ago, account: pair, address: pair, ..Failures::default() };
        assert_eq!(decide(failing(4, secs(0)), LIMITS), Decision::Go);
        assert_eq!(decide(failing(7, secs(1)), LIMITS), Decision::Wait(Duration::from_secs(3)));
        assert_eq!(decide(failing(7, secs(4)), LIMITS), Decision::Go);
    }

    #[test]
    fn a_clean_address_gets_through_an_account_under_attack() {
        let attacked = Failures { account: 10_000, ..Failures::default() };
        assert_eq!(decide(attacked, LIMITS), Decision::Go, "the right password from elsewhere signs in");
        // An address that failed on it waits for its failures to age out.
        let failed_here = Failures {
            pair: 1,
            pair_latest_ago: secs(1),
            pair_oldest_ago: secs(100),
            account: 10_000,
            address: 1,
            ..Failures::default()
        };
        assert_eq!(decide(failed_here, LIMITS), Decision::Wait(Duration::from_secs(800)));
    }

    #[test]
    fn an_address_spraying_many_accounts_waits_for_the_window() {
        let spraying = Failures { address: 50, address_oldest_ago: secs(600), ..Failures::default() };
        assert_eq!(decide(spraying, LIMITS), Decision::Wait(Duration::from_secs(300)));
        let aged = Failures { address: 50, address_oldest_ago: secs(900), ..Failures::default() };
        assert_eq!(decide(aged, LIMITS), Decision::Wait(Duration::from_secs(1)), "never a zero wait");
    }
}
