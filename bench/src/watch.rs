//! A stream watcher: one WebSocket on `/api/v1/sessions/{id}/stream?after=N`, recording when
//! each event arrived (monotonic and wall clock) and, for fakeagent `flood` chunks, when
//! fakeagent emitted them (`_meta.fakeagent.emittedAtUs`).

use std::borrow::Cow;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use agenthold_cli::api::Socket;
use anyhow::{Context, Result, bail};
use futures_util::StreamExt;
use serde::Deserialize;
use serde_json::value::RawValue;
use tokio_tungstenite::tungstenite::Message;

use crate::api::Api;

/// One event as a watcher saw it.
#[derive(Debug, Clone)]
pub struct Received {
    /// Its seq.
    pub seq: i64,
    /// Its type (`update`, `turn_end`, …).
    pub kind: String,
    /// When it arrived (monotonic).
    pub at: Instant,
    /// When it arrived, µs since the Unix epoch.
    pub at_unix_us: i64,
    /// For a flood chunk: its index and when fakeagent emitted it (µs since the epoch).
    pub flood: Option<FloodMark>,
    /// The payload as sent, when the watcher keeps payloads.
    pub payload: Option<String>,
    /// `created_at` (the storing transaction's `now()`), when the watcher keeps payloads.
    pub created_at: Option<String>,
}

/// `_meta.fakeagent` of a flood chunk.
#[derive(Debug, Clone, Copy, Deserialize)]
pub struct FloodMark {
    /// The chunk's index (from 1).
    pub i: u64,
    /// When fakeagent wrote it, µs since the Unix epoch.
    #[serde(rename = "emittedAtUs")]
    pub emitted_at_us: i64,
}

#[derive(Deserialize)]
struct WireEvent<'a> {
    seq: i64,
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(borrow)]
    payload: &'a RawValue,
    #[serde(borrow)]
    created_at: Cow<'a, str>,
}

#[derive(Deserialize)]
struct UpdateMeta {
    #[serde(rename = "_meta")]
    meta: Option<MetaFields>,
}

#[derive(Deserialize)]
struct MetaFields {
    fakeagent: Option<FloodMark>,
}

/// Microseconds since the Unix epoch, now.
pub fn unix_us() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_micros() as i64).unwrap_or(0)
}

/// A connected stream.
pub struct Watcher {
    ws: Socket,
    keep_payloads: bool,
    /// Messages of `error` events seen so far.
    pub errors: Vec<String>,
}

impl Watcher {
    /// Opens the stream of `session_id` after `after`. Once this returns the server has
    /// subscribed the watcher to the live feed.
    pub async fn connect(api: &Api, session_id: &str, after: i64) -> Result<Self> {
        let ws = api.stream(session_id, after).await.context("opening the stream")?;
        Ok(Self { ws, keep_payloads: false, errors: Vec::new() })
    }

    /// Keeps each event's payload text (for the raw-insert baseline).
    pub fn keep_payloads(mut self) -> Self {
        self.keep_payloads = true;
        self
    }

    /// The next event, or an error at the deadline or when the stream ends.
    pub async fn next_event(&mut self, deadline: Instant) -> Result<Received> {
        loop {
            let message = tokio::time::timeout_at(deadline.into(), self.ws.next())
                .await
                .context("timed out waiting for an event")?
                .context("the stream ended")?
                .context("reading the stream")?;
            let (at, at_unix_us) = (Instant::now(), unix_us());
            let text = match message {
                Message::Text(text) => text,
                Message::Close(frame) => bail!("the server closed the stream: {frame:?}"),
                _ => continue,
            };
            let event: WireEvent<'_> = serde_json::from_str(text.as_str()).context("an event that is not JSON")?;
            let flood = if event.kind == "update" {
                serde_json::from_str::<UpdateMeta>(event.payload.get())
                    .ok()
                    .and_then(|m| m.meta)
                    .and_then(|m| m.fakeagent)
            } else {
                None
            };
            if event.kind == "error" {
                self.errors.push(event.payload.get().to_owned());
            }
            return Ok(Received {
                seq: event.seq,
                kind: event.kind.into_owned(),
                at,
                at_unix_us,
                flood,
                payload: self.keep_payloads.then(|| event.payload.get().to_owned()),
                created_at: self.keep_payloads.then(|| event.created_at.into_owned()),
            });
        }
    }

    /// Every event up to and including the next `turn_end`.
    pub async fn until_turn_end(&mut self, deadline: Instant) -> Result<Vec<Received>> {
        let mut events = Vec::new();
        loop {
            let event = self.next_event(deadline).await?;
            let end = event.kind == "turn_end";
            events.push(event);
            if end {
                return Ok(events);
            }
        }
    }

    /// Waits for the first `update`; fails if the turn ends first.
    pub async fn first_update(&mut self, deadline: Instant) -> Result<Received> {
        loop {
            let event = self.next_event(deadline).await?;
            match event.kind.as_str() {
                "update" => return Ok(event),
                "turn_end" => bail!("the turn ended without an update; errors: {:?}", self.errors),
                _ => {}
            }
        }
    }

    /// Counts text messages until `count` arrived; returns the seq of the last one (only that
    /// one is parsed, so the client spends as little as possible per event).
    pub async fn count(&mut self, count: usize, deadline: Instant) -> Result<i64> {
        let mut seen = 0;
        loop {
            let message = tokio::time::timeout_at(deadline.into(), self.ws.next())
                .await
                .with_context(|| format!("timed out after {seen} events"))?
                .context("the stream ended")??;
            let Message::Text(text) = message else { continue };
            seen += 1;
            if seen == count {
                let event: WireEvent<'_> = serde_json::from_str(text.as_str())?;
                return Ok(event.seq);
            }
        }
    }

    /// Closes the stream politely.
    pub async fn close(mut self) {
        let _ = self.ws.close(None).await;
    }
}
