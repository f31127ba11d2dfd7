//! The supervisor loop's one timer: armed for the core's next deadline and moved only when that
//! deadline moves. A fresh `sleep_until` on every turn of the loop registered and removed a timer
//! per event while an acknowledgement waited (most of the time a harness streams).

use std::pin::Pin;
use std::time::Instant;

use tokio::time::Sleep;

/// A timer for an optional deadline.
pub(super) struct Alarm {
    sleep: Pin<Box<Sleep>>,
    /// The deadline the timer is set for; `None` when none is (it never fires then).
    armed: Option<Instant>,
}

impl Alarm {
    pub(super) fn new() -> Self {
        Self { sleep: Box::pin(tokio::time::sleep_until(tokio::time::Instant::now())), armed: None }
    }

    /// Sets the deadline; the timer is touched only when it differs from the one set.
    pub(super) fn set(&mut self, deadline: Option<Instant>) {
        if deadline == self.armed {
            return;
        }
        if let Some(at) = deadline {
            self.sleep.as_mut().reset(at.into());
        }
        self.armed = deadline;
    }

    /// Resolves when the deadline set passes (never without one); the alarm is then disarmed.
    pub(super) async fn fired(&mut self) {
        if self.armed.is_none() {
            return std::future::pending().await;
        }
        self.sleep.as_mut().await;
        self.armed = None;
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    /// Long enough that a timer wrongly armed would fire within it.
    const QUIET: Duration = Duration::from_millis(200);

    #[tokio::test]
    async fn fires_at_the_deadline_set_and_not_without_one() {
        let mut alarm = Alarm::new();
        assert!(tokio::time::timeout(QUIET, alarm.fired()).await.is_err(), "no deadline: never fires");

        let at = Instant::now() + Duration::from_millis(50);
        alarm.set(Some(at));
        alarm.set(Some(at));
        alarm.fired().await;
        assert!(Instant::now() >= at, "not before its deadline");

        assert!(tokio::time::timeout(QUIET, alarm.fired()).await.is_err(), "fired once: disarmed until set again");
    }

    #[tokio::test]
    async fn a_moved_deadline_moves_the_timer() {
        let mut alarm = Alarm::new();
        let start = Instant::now();
        alarm.set(Some(start + Duration::from_secs(600)));
        alarm.set(Some(start + Duration::from_millis(20)));
        tokio::time::timeout(Duration::from_secs(60), alarm.fired()).await.expect("fires at the earlier deadline");

        alarm.set(Some(Instant::now() + Duration::from_millis(20)));
        alarm.set(None);
        assert!(tokio::time::timeout(QUIET, alarm.fired()).await.is_err(), "a cleared deadline never fires");
    }
}
