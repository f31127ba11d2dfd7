//! The appender's second half: each committed batch, in commit order, made into the events the
//! stream sends (their JSON built around the stored payload text), published to the live feed,
//! and handed back to the writer of each request.
//!
//! A large batch (a flood) goes to a task of its own, so it is published while the appender
//! stores the next one; at most [`PUBLISH_DEPTH`] committed batches wait for it (the appender
//! waits beyond that), so memory stays bounded. A small one (many agents trickling) is published
//! by the appender itself when nothing waits before it: publishing it is short, and doing it there
//! saves a task hop per commit — handing every small batch to the task, 100 agents trickling
//! (`make bench`'s `multi_100`) saw their p99 at 58–144 ms where publishing on the spot gave
//! 39–46 (docs/benchmarks.md).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use chrono::{DateTime, Utc};
use tokio::sync::mpsc;

use super::SharedEvent;
use super::appender::{AppendFailed, Request, Written, is_data_exception};
use super::hub::Hub;

/// Committed batches that may wait to be published.
const PUBLISH_DEPTH: usize = 2;
/// A batch of at least this many events is published by the publisher's task.
const HAND_OFF_EVENTS: usize = 512;

/// What became of a batch of requests, in the order they were stored.
pub(super) enum Outcome {
    /// Committed.
    Stored {
        /// The requests, in order.
        requests: Vec<Request>,
        /// What was stored for them.
        written: Written,
        /// How long the commit took, for the metrics.
        seconds: f64,
    },
    /// Nothing of them was stored.
    Failed {
        /// The requests.
        requests: Vec<Request>,
        /// The database refused the content itself.
        rejected: bool,
    },
}

impl Outcome {
    /// The outcome of requests whose storing failed with `error` (logged here).
    pub(super) fn failed(requests: Vec<Request>, error: &sqlx::Error) -> Self {
        let rejected = is_data_exception(error);
        tracing::error!(%error, rejected, "storing events failed");
        Self::Failed { requests, rejected }
    }
}

/// Publishes committed batches in commit order, on the appender's task or its own.
pub(super) struct Publisher {
    hub: Arc<Hub>,
    tx: mpsc::Sender<Outcome>,
    /// Outcomes handed to the task and not yet handled by it.
    pending: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl Publisher {
    /// Starts the publisher's task.
    pub(super) fn spawn(hub: Arc<Hub>) -> Self {
        let (tx, mut rx) = mpsc::channel(PUBLISH_DEPTH);
        let pending = Arc::new(AtomicUsize::new(0));
        let (task_hub, task_pending) = (Arc::clone(&hub), Arc::clone(&pending));
        let task = tokio::spawn(async move {
            while let Some(outcome) = rx.recv().await {
                handle(&task_hub, outcome);
                task_pending.fetch_sub(1, Ordering::Release);
                // Watchers get a turn before the next batch is published, so one that keeps up
                // seldom falls two full batches behind (the feed holds one:
                // `hub::CHANNEL_CAPACITY`); a yield only offers the turn, and a watcher that
                // lags anyway is caught up from Postgres, losing nothing.
                tokio::task::yield_now().await;
            }
        });
        Self { hub, tx, pending, task }
    }

    /// Publishes an outcome after every one given before: here when it is small and none waits,
    /// else on the task. If the task is gone (the runtime is shutting down), its requests are
    /// told the appender stopped.
    pub(super) async fn publish(&self, outcome: Outcome) {
        if events(&outcome) < HAND_OFF_EVENTS && self.pending.load(Ordering::Acquire) == 0 {
            handle(&self.hub, outcome);
            return;
        }
        self.pending.fetch_add(1, Ordering::AcqRel);
        if let Err(mpsc::error::SendError(outcome)) = self.tx.send(outcome).await {
            self.pending.fetch_sub(1, Ordering::AcqRel);
            for request in requests(outcome) {
                let _ = request.done.send(Err(AppendFailed::stopped()));
            }
        }
    }

    /// Waits until every outcome handed to the task is published (the appender's writers are
    /// all gone).
    pub(super) async fn finish(self) {
        drop(self.tx);
        let _ = self.task.await;
    }
}

fn events(outcome: &Outcome) -> usize {
    match outcome {
        Outcome::Stored { requests, .. } | Outcome::Failed { requests, .. } => {
            requests.iter().map(|request| request.events.len()).sum()
        }
    }
}

fn requests(outcome: Outcome) -> Vec<Request> {
    match outcome {
        Outcome::Stored { requests, .. } | Outcome::Failed { requests, .. } => requests,
    }
}

fn handle(hub: &Hub, outcome: Outcome) {
    match outcome {
        Outcome::Stored { requests, written, seconds } => {
            let stored = shared_events(&requests, written);
            let kinds = stored.iter().flatten().map(|event| event.kind.as_str());
            crate::metrics::events_committed(kinds, seconds);
            for (request, events) in requests.into_iter().zip(stored) {
                hub.publish(&events);
                let _ = request.done.send(Ok(events));
            }
        }
        Outcome::Failed { requests, rejected } => {
            for request in requests {
                let _ = request.done.send(Err(AppendFailed { message: "database error".to_owned(), rejected }));
            }
        }
    }
}

/// Each request's stored events. On the one-statement path they are built here, from each
/// event's seq and commit time and the payload text the request brought; the commit time is
/// the same for the whole batch, so its text is made once.
fn shared_events(requests: &[Request], written: Written) -> Vec<Vec<Arc<SharedEvent>>> {
    let slots = match written {
        Written::Events(events) => return events,
        Written::Streamed(slots) => slots,
    };
    let mut slots = slots.into_iter();
    let mut time: Option<(DateTime<Utc>, String)> = None;
    let mut per_request = Vec::with_capacity(requests.len());
    for request in requests {
        let mut mine = Vec::with_capacity(request.events.len());
        for (event, json) in request.events.iter().zip(request.as_is.iter().flatten()) {
            let Some((seq, at)) = slots.next().flatten() else { continue };
            let at_text = match &time {
                Some((known, text)) if *known == at => text,
                _ => &time.insert((at, SharedEvent::time_text(at))).1,
            };
            mine.push(SharedEvent::with_payload_text(event.session_id, seq, event.kind, at_text, json));
        }
        per_request.push(mine);
    }
    per_request
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use tokio::sync::oneshot;

    use super::*;
    use crate::events::appender::Committed;
    use crate::events::{EventKind, NewEvent};
    use crate::ids::SessionId;

    fn request(session: SessionId, texts: &[&str]) -> (Request, oneshot::Receiver<Committed>) {
        let events = texts.iter().map(|t| NewEvent::new(session, EventKind::Update, json!({"text": t}))).collect();
        let (done, receiver) = oneshot::channel();
        (Request::new(events, Vec::new(), done), receiver)
    }

    #[test]
    fn streamed_events_are_built_around_the_stored_text_and_skip_what_was_dropped() {
        let session = SessionId::new();
        let (first, _) = request(session, &["a", "b"]);
        let (second, _) = request(session, &["c"]);
        let at = Utc::now();
        let written = Written::Streamed(vec![Some((7, at)), None, Some((8, at))]);
        let events = shared_events(&[first, second], written);
        assert_eq!(events.iter().map(Vec::len).collect::<Vec<_>>(), [1, 1], "the dropped one is left out");
        let expected = SharedEvent::with_payload_json(session, 8, EventKind::Update, at, r#"{"text":"c"}"#);
        assert_eq!(events[1][0].json, expected.json, "byte for byte what the catch-up sends");
        assert_eq!(events[0][0].seq, 7);
    }

    #[tokio::test]
    async fn outcomes_are_answered_and_published_in_commit_order() {
        let hub = Arc::new(Hub::default());
        let session = SessionId::new();
        let mut live = hub.subscribe(session);
        let publisher = Publisher::spawn(Arc::clone(&hub));
        // A flood's batch (handed to the task), then a small one and a failure: the small ones
        // must not overtake it although they could be published on the spot.
        let texts: Vec<String> = (0..HAND_OFF_EVENTS).map(|i| i.to_string()).collect();
        let (large, large_done) = request(session, &texts.iter().map(String::as_str).collect::<Vec<_>>());
        let (small, small_done) = request(session, &["last"]);
        let (refused, refused_done) = request(session, &["b"]);
        let at = Utc::now();
        let slots = (1..=HAND_OFF_EVENTS as i64).map(|seq| Some((seq, at))).collect();
        publisher
            .publish(Outcome::Stored { requests: vec![large], written: Written::Streamed(slots), seconds: 0.0 })
            .await;
        let next = HAND_OFF_EVENTS as i64 + 1;
        let written = Written::Streamed(vec![Some((next, at))]);
        publisher.publish(Outcome::Stored { requests: vec![small], written, seconds: 0.0 }).await;
        publisher.publish(Outcome::Failed { requests: vec![refused], rejected: true }).await;
        publisher.finish().await;
        assert_eq!(large_done.await.expect("answered").expect("stored").len(), HAND_OFF_EVENTS);
        let committed = small_done.await.expect("answered").expect("stored");
        assert_eq!(committed.iter().map(|e| e.seq).collect::<Vec<_>>(), [next]);
        assert!(refused_done.await.expect("answered").is_err_and(|failed| failed.rejected));
        let seqs: Vec<i64> = std::iter::from_fn(|| live.try_recv().ok().map(|e| e.seq)).collect();
        assert_eq!(seqs, (1..=next).collect::<Vec<_>>(), "published once each, in order");
    }

    #[tokio::test]
    async fn a_small_batch_with_none_waiting_is_published_before_publish_returns() {
        let hub = Arc::new(Hub::default());
        let session = SessionId::new();
        let mut live = hub.subscribe(session);
        let publisher = Publisher::spawn(Arc::clone(&hub));
        let (small, mut small_done) = request(session, &["a"]);
        let written = Written::Streamed(vec![Some((1, Utc::now()))]);
        publisher.publish(Outcome::Stored { requests: vec![small], written, seconds: 0.0 }).await;
        assert!(small_done.try_recv().is_ok_and(|c| c.is_ok()), "answered on the appender's task");
        assert_eq!(live.try_recv().expect("published").seq, 1);
        publisher.finish().await;
    }
}
