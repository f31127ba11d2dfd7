//! Cron expressions in a time zone, and when a schedule is due: pure functions of the
//! expression, the zone and a given instant (no clock), so DST and missed slots are unit-tested.
//!
//! An expression has five fields (minute hour day-of-month month day-of-week) or six (seconds
//! first), with croner's extensions (`L`, `#`, `W`, names, `@daily`…). Times are wall-clock times
//! in the schedule's IANA zone: a time the clock skips (spring forward) runs at the first instant
//! after the gap; a time the clock repeats (fall back) runs once.

use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use croner::Cron;
use croner::parser::{CronParser, Seconds, Year};

/// A parsed expression and its zone.
#[derive(Debug, Clone)]
pub struct Spec {
    cron: Cron,
    zone: Tz,
}

/// Why an expression or a zone was refused (the message names it).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpecError {
    /// The cron expression does not parse, or is never due.
    #[error("cron expression {expression:?}: {reason}")]
    Cron {
        /// The expression as given.
        expression: String,
        /// Why.
        reason: String,
    },
    /// Not an IANA time zone name.
    #[error("unknown time zone {0:?} (an IANA name such as \"Europe/Berlin\" or \"UTC\")")]
    TimeZone(String),
}

/// Longest expression accepted, in bytes.
const MAX_EXPRESSION_BYTES: usize = 200;

impl Spec {
    /// Parses an expression and a zone; an expression that is never due (`0 0 30 2 *`) is refused.
    pub fn parse(expression: &str, zone: &str) -> Result<Self, SpecError> {
        let refuse = |reason: String| SpecError::Cron { expression: expression.to_owned(), reason };
        if expression.len() > MAX_EXPRESSION_BYTES {
            return Err(refuse(format!("longer than {MAX_EXPRESSION_BYTES} bytes")));
        }
        let zone: Tz = zone.parse().map_err(|_| SpecError::TimeZone(zone.to_owned()))?;
        let parser = CronParser::builder().seconds(Seconds::Optional).year(Year::Disallowed).build();
        let cron = parser.parse(expression).map_err(|e| refuse(e.to_string()))?;
        let spec = Self { cron, zone };
        if spec.next_after(Utc::now()).is_none() {
            return Err(refuse("it is never due".to_owned()));
        }
        Ok(spec)
    }

    /// The shortest gap between two consecutive runs among the next `runs` after `from` (`None`
    /// when it runs fewer than twice): what a server's minimum interval is checked against.
    pub fn shortest_gap(&self, from: DateTime<Utc>, runs: usize) -> Option<chrono::Duration> {
        let mut previous = self.next_after(from)?;
        let mut shortest: Option<chrono::Duration> = None;
        for _ in 1..runs {
            let Some(next) = self.next_after(previous) else { break };
            let gap = next - previous;
            shortest = Some(shortest.map_or(gap, |s| s.min(gap)));
            previous = next;
        }
        shortest
    }

    /// The first time strictly after `at` the expression is due, or `None` if never again.
    pub fn next_after(&self, at: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let local = at.with_timezone(&self.zone);
        self.cron.find_next_occurrence(&local, false).ok().map(|next| next.with_timezone(&Utc))
    }
}

/// One run a schedule owes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Due {
    /// The slot it runs for (when it was due).
    pub due_at: DateTime<Utc>,
    /// When it is due next: the first slot after `now`, so the slots missed while the server
    /// was down (or behind) make one run, not one each.
    pub next: Option<DateTime<Utc>>,
}

/// What a schedule next due at `next_run_at` owes at `now`: nothing yet, or one run.
pub fn due(spec: &Spec, next_run_at: DateTime<Utc>, now: DateTime<Utc>) -> Option<Due> {
    (next_run_at <= now).then(|| Due { due_at: next_run_at, next: spec.next_after(now) })
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone;

    use super::*;

    #[test]
    fn the_shortest_gap_between_runs_is_found_in_uneven_expressions() {
        let at = DateTime::parse_from_rfc3339("2026-12-04T10:00:00Z").expect("time").with_timezone(&Utc);
        let gap = |expr: &str| Spec::parse(expr, "UTC").expect("spec").shortest_gap(at, 50).map(|g| g.num_seconds());
        assert_eq!(gap("* * * * * *"), Some(1), "every second");
        assert_eq!(gap("*/5 * * * *"), Some(300));
        assert_eq!(gap("0,1 3 * * *"), Some(60), "two runs a minute apart, once a day");
        assert_eq!(gap("0 3 * * *"), Some(86_400));
    }

    fn utc(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).map(|t| t.with_timezone(&Utc)).expect("time")
    }

    #[test]
    fn bad_expressions_and_zones_are_named() {
        let error = Spec::parse("61 * * * *", "UTC").expect_err("bad minute");
        assert!(error.to_string().contains("\"61 * * * *\""), "{error}");
        assert!(matches!(Spec::parse("* * *", "UTC"), Err(SpecError::Cron { .. })));
        assert!(matches!(Spec::parse("0 0 30 2 *", "UTC"), Err(SpecError::Cron { .. })), "never due");
        let error = Spec::parse("* * * * *", "Mars/Olympus").expect_err("bad zone");
        assert_eq!(error, SpecError::TimeZone("Mars/Olympus".to_owned()));
        assert!(error.to_string().contains("Mars/Olympus"));
        assert!(Spec::parse("*/5 * * * * *", "Europe/Berlin").is_ok(), "seconds first");
        assert!(Spec::parse("@daily", "UTC").is_ok());
    }

    #[test]
    fn next_is_in_the_zone() {
        let spec = Spec::parse("0 9 * * *", "Europe/Berlin").expect("spec");
        // 09:00 in Berlin in winter is 08:00 UTC, in summer 07:00 UTC.
        assert_eq!(spec.next_after(utc("2026-01-10T12:00:00Z")), Some(utc("2026-01-11T08:00:00Z")));
        assert_eq!(spec.next_after(utc("2026-07-10T12:00:00Z")), Some(utc("2026-07-11T07:00:00Z")));
    }

    #[test]
    fn a_skipped_wall_clock_time_runs_once_after_the_gap() {
        // Berlin springs forward on 2026-03-29: 02:00 → 03:00; 02:30 does not exist that day.
        let spec = Spec::parse("30 2 * * *", "Europe/Berlin").expect("spec");
        let first = spec.next_after(utc("2026-03-28T12:00:00Z")).expect("next");
        let berlin = chrono_tz::Europe::Berlin;
        assert_eq!(first, berlin.with_ymd_and_hms(2026, 3, 29, 3, 0, 0).single().expect("t").with_timezone(&Utc));
        // And the day after, back to 02:30.
        let second = spec.next_after(first).expect("next");
        assert_eq!(second, utc("2026-03-30T00:30:00Z"));
    }

    #[test]
    fn a_repeated_wall_clock_time_runs_once() {
        // Berlin falls back on 2026-10-25: 03:00 → 02:00; 02:30 happens twice.
        let spec = Spec::parse("30 2 * * *", "Europe/Berlin").expect("spec");
        let first = spec.next_after(utc("2026-10-24T12:00:00Z")).expect("next");
        assert_eq!(first, utc("2026-10-25T00:30:00Z"), "the first 02:30 (summer time)");
        let second = spec.next_after(first).expect("next");
        assert_eq!(second, utc("2026-10-26T01:30:00Z"), "not again an hour later: tomorrow");
    }

    #[test]
    fn missed_slots_make_one_run() {
        let spec = Spec::parse("* * * * *", "UTC").expect("spec");
        let next_run_at = utc("2026-05-01T10:00:00Z");
        // Not due yet.
        assert_eq!(due(&spec, next_run_at, utc("2026-05-01T09:59:59Z")), None);
        // The server was down for 17 minutes: one run, for the first slot missed, and the next
        // is the first slot after now.
        let now = utc("2026-05-01T10:17:30Z");
        let run = due(&spec, next_run_at, now).expect("due");
        assert_eq!(run, Due { due_at: next_run_at, next: Some(utc("2026-05-01T10:18:00Z")) });
        assert_eq!(due(&spec, utc("2026-05-01T10:18:00Z"), now), None, "nothing more owed now");
        // Exactly on the slot: due, and the next is the one after.
        let run = due(&spec, next_run_at, next_run_at).expect("due");
        assert_eq!(run.next, Some(utc("2026-05-01T10:01:00Z")));
    }
}
