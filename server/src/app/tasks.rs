//! The server's background tasks as one owned set: each registered by name, stopped together at
//! shutdown (at once, or — for the ones that finish their own work when told to stop — after a
//! grace period), and a task that ends by panicking is logged with its name.

use std::future::Future;
use std::time::Duration;

use tokio::task::{AbortHandle, JoinHandle};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// How a task ends at shutdown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ending {
    /// Stopped at once.
    Abort,
    /// Left to finish its own work (it watches the server's stop signal), aborted after the grace.
    Graceful,
}

struct Registered {
    name: &'static str,
    abort: AbortHandle,
    ending: Ending,
}

/// The set of background tasks.
pub struct Background {
    tracker: TaskTracker,
    cancel: CancellationToken,
    tasks: Vec<Registered>,
}

impl Default for Background {
    fn default() -> Self {
        Self::new()
    }
}

impl Background {
    /// An empty set.
    pub fn new() -> Self {
        Self { tracker: TaskTracker::new(), cancel: CancellationToken::new(), tasks: Vec::new() }
    }

    /// Runs `task` until it ends or the set stops.
    pub fn spawn(&mut self, name: &'static str, task: impl Future<Output = ()> + Send + 'static) {
        let cancel = self.cancel.clone();
        let handle = tokio::spawn(async move {
            tokio::select! {
                () = cancel.cancelled() => {}
                () = task => {}
            }
        });
        self.adopt(name, handle);
    }

    /// Takes over a task spawned elsewhere: stopped at once at shutdown.
    pub fn adopt<T: Send + 'static>(&mut self, name: &'static str, handle: JoinHandle<T>) {
        self.register(name, handle, Ending::Abort);
    }

    /// Takes over a task that ends by itself once the server's stop signal is sent: it gets the
    /// grace period of [`Background::stop`] before it is aborted.
    pub fn adopt_graceful<T: Send + 'static>(&mut self, name: &'static str, handle: JoinHandle<T>) {
        self.register(name, handle, Ending::Graceful);
    }

    fn register<T: Send + 'static>(&mut self, name: &'static str, handle: JoinHandle<T>, ending: Ending) {
        let abort = handle.abort_handle();
        self.tracker.spawn(async move {
            if let Err(error) = handle.await
                && error.is_panic()
            {
                tracing::error!(task = name, "a background task panicked");
            }
        });
        self.tasks.push(Registered { name, abort, ending });
    }

    /// The names of the tasks still running.
    pub fn running(&self) -> Vec<&'static str> {
        self.tasks.iter().filter(|t| !t.abort.is_finished()).map(|t| t.name).collect()
    }

    /// Stops every task: the graceful ones get `grace` to finish, the others stop at once. Returns
    /// when all have ended.
    pub async fn stop(self, grace: Duration) {
        self.cancel.cancel();
        for task in self.tasks.iter().filter(|t| t.ending == Ending::Abort) {
            task.abort.abort();
        }
        self.tracker.close();
        if tokio::time::timeout(grace, self.tracker.wait()).await.is_err() {
            for task in self.tasks.iter().filter(|t| !t.abort.is_finished()) {
                tracing::warn!(
                    task = task.name,
                    grace_ms = grace.as_millis() as u64,
                    "a background task did not stop in time: aborted"
                );
                task.abort.abort();
            }
            self.tracker.wait().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn stop_aborts_plain_tasks_at_once_and_waits_for_graceful_ones_within_the_grace() {
        let mut background = Background::new();
        background.spawn("forever", std::future::pending());
        background.adopt("adopted", tokio::spawn(std::future::pending::<()>()));
        let (done_tx, done_rx) = tokio::sync::oneshot::channel();
        background.adopt_graceful(
            "graceful",
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(50)).await;
                let _ = done_tx.send(());
            }),
        );
        assert_eq!(background.running().len(), 3);
        let started = std::time::Instant::now();
        background.stop(Duration::from_secs(5)).await;
        assert!(done_rx.await.is_ok(), "the graceful task finished its work");
        assert!(started.elapsed() < Duration::from_secs(4), "nothing waited for the grace to run out");
    }

    #[tokio::test]
    async fn a_graceful_task_that_overruns_the_grace_is_aborted() {
        let mut background = Background::new();
        let handle = tokio::spawn(std::future::pending::<()>());
        let abort = handle.abort_handle();
        background.adopt_graceful("stuck", handle);
        background.stop(Duration::from_millis(20)).await;
        assert!(abort.is_finished());
    }
}
