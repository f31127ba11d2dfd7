//! The appender's second half: each committed batch, in commit order, made into the events the
//! stream sends (their JSON built around the stored payload text), published to the live feed,
//! and handed back to the writer of each request. Its own task, so a batch is published while
//! the appender stores the next one; at most [`PUBLISH_DEPTH`] committed batches wait for it
//! (the appender waits beyond that), so memory stays bounded.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use tokio::sync::mpsc;

use super::SharedEvent;
use super::appender::{AppendFailed, Request, Written, is_data_exception};
use super::hub::Hub;

/// Committed batches that may wait to be published.
const PUBLISH_DEPTH: usize = 2;

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

/// Starts the publisher; it ends once the sender is dropped and every outcome is handled.
pub(super) fn spawn(hub: Arc<Hub>) -> (mpsc::Sender<Outcome>, tokio::task::JoinHandle<()>) {
    let (tx, mut rx) = mpsc::channel(PUBLISH_DEPTH);
    let task = tokio::spawn(async move {
        while let Some(outcome) = rx.recv().await {
            handle(&hub, outcome);
            // Watchers run before the next batch is published: one that keeps up never lags on
            // two full batches published back to back (the feed holds one: `hub::CHANNEL_CAPACITY`).
            tokio::task::yield_now().await;
        }
    });
    (tx, task)
}

/// Hands an outcome to the publisher, in order. If its task is gone (it cannot panic on an
/// outcome, but the runtime may be shutting down), the outcome is handled here.
pub(super) async fn send(tx: &mpsc::Sender<Outcome>, outcome: Outcome) {
    if let Err(mpsc::error::SendError(outcome)) = tx.send(outcome).await {
        for request in requests(outcome) {
            let _ = request.done.send(Err(AppendFailed::stopped()));
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
        let (tx, task) = spawn(Arc::clone(&hub));
        let (stored, stored_done) = request(session, &["a"]);
        let (refused, refused_done) = request(session, &["b"]);
        let at = Utc::now();
        send(
            &tx,
            Outcome::Stored { requests: vec![stored], written: Written::Streamed(vec![Some((1, at))]), seconds: 0.0 },
        )
        .await;
        send(&tx, Outcome::Failed { requests: vec![refused], rejected: true }).await;
        drop(tx);
        task.await.expect("the publisher ends once the appender is gone");
        let committed = stored_done.await.expect("answered").expect("stored");
        assert_eq!(committed.iter().map(|e| e.seq).collect::<Vec<_>>(), [1]);
        assert!(refused_done.await.expect("answered").is_err_and(|failed| failed.rejected));
        assert_eq!(live.try_recv().expect("published").seq, 1);
    }
}
