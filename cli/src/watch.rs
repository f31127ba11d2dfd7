//! `watch`: follows a session's event stream (`/api/v1/sessions/{id}/stream?after=N`) and
//! prints every event — as the server sent it (one JSON line) or as a line of text — until a
//! stop condition, the server closing, or a timeout. [`follow`] is the loop `prompt --follow`
//! shares.

use std::io::{self, Write};
use std::time::Duration;

use anyhow::anyhow;
use futures_util::{SinkExt, StreamExt};
use serde::Deserialize;
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::Message;

use crate::api::{Client, Socket};
use crate::endpoint::segment;
use crate::error::Failure;
use crate::output;

/// When to stop watching.
#[derive(Debug, Clone, Default)]
pub struct StopWhen {
    /// After the first event of this type (`turn_end`, …).
    pub until: Option<String>,
    /// After this many events.
    pub count: Option<u64>,
    /// Give up (exit code 3) after this long.
    pub timeout: Option<Duration>,
}

/// The part of an event `watch` looks at.
#[derive(Debug, Deserialize)]
struct EventHead {
    #[serde(rename = "type")]
    kind: String,
}

/// What a [`follow`] callback says after an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// Keep reading.
    More,
    /// Stop here (success).
    Stop,
}

/// Prints the session's events after `after` to `out`, one per line (raw JSON with `json`, else
/// text), until `stop` says so. Returns how many events were printed.
pub async fn watch(
    client: &Client,
    session: &str,
    after: u64,
    stop: &StopWhen,
    json: bool,
    out: &mut dyn Write,
) -> Result<u64, Failure> {
    let deadline = stop.timeout.map(|t| Instant::now() + t);
    let goal = match stop.timeout {
        Some(timeout) => format!("{} within {timeout:?}", describe_goal(stop)),
        None => describe_goal(stop),
    };
    let mut seen = 0u64;
    if stop.count == Some(0) {
        let mut socket = open(client, session, after, deadline, &goal).await?;
        close(&mut socket).await;
        return Ok(0);
    }
    let result = follow(client, session, after, deadline, &goal, |text| {
        let head: EventHead = serde_json::from_str(text)
            .map_err(|e| anyhow!("the stream sent a message that is not an event ({e}): {text}"))?;
        seen += 1;
        let line = if json { text.to_owned() } else { render(text) };
        if !write_line(out, &line)? {
            return Ok(Next::Stop);
        }
        let reached_type = stop.until.as_deref().is_some_and(|until| head.kind == until);
        let reached_count = stop.count.is_some_and(|count| seen >= count);
        Ok(if reached_type || reached_count { Next::Stop } else { Next::More })
    })
    .await;
    result.map(|_| seen)
}

/// An event as one line of text (the raw JSON if it does not parse).
fn render(text: &str) -> String {
    serde_json::from_str(text).map(|v| output::event(&v)).unwrap_or_else(|_| text.to_owned())
}

/// Writes a line; `false` when whoever reads our output has gone away (nothing left to do).
pub fn write_line(out: &mut dyn Write, line: &str) -> Result<bool, Failure> {
    match writeln!(out, "{line}").and_then(|()| out.flush()) {
        Ok(()) => Ok(true),
        Err(error) if error.kind() == io::ErrorKind::BrokenPipe => Ok(false),
        Err(error) => Err(anyhow::Error::new(error).context("writing to stdout").into()),
    }
}

fn describe_goal(stop: &StopWhen) -> String {
    match (&stop.until, stop.count) {
        (Some(until), Some(count)) => format!("a {until} event or {count} events"),
        (Some(until), None) => format!("a {until} event"),
        (None, Some(count)) => format!("{count} events"),
        (None, None) => "the end of the stream".to_owned(),
    }
}

async fn open(
    client: &Client,
    session: &str,
    after: u64,
    deadline: Option<Instant>,
    goal: &str,
) -> Result<Socket, Failure> {
    let path = format!("/api/v1/sessions/{}/stream?after={after}", segment(session));
    let connect = client.websocket(&path);
    match deadline {
        Some(deadline) => tokio::time::timeout_at(deadline, connect).await.map_err(|_| timed_out(goal, 0))?,
        None => connect.await,
    }
}

/// Close codes after which the stream is opened again from the last event seen: the server
/// restarting (1012), its log unreadable for a while (1011), this client too slow (4408).
const RESUMABLE_CLOSES: [u16; 3] = [1011, 1012, 4408];
/// Reconnects in a row without an event in between before giving up.
const MAX_RESUMES: u32 = 8;

/// Streams the session's events after `after`, handing each text message to `on_event` until it
/// says [`Next::Stop`] (then `Ok` with the number of events), the deadline passes
/// ([`Failure::Timeout`] naming `goal`) or the stream fails for good (an error). A server that
/// restarts or drops the connection is reconnected to (1 s, doubling to 16 s, at most
/// [`MAX_RESUMES`] times in a row), from the last event's seq: no event is missed or repeated.
pub async fn follow(
    client: &Client,
    session: &str,
    after: u64,
    deadline: Option<Instant>,
    goal: &str,
    mut on_event: impl FnMut(&str) -> Result<Next, Failure>,
) -> Result<u64, Failure> {
    let mut cursor = after;
    let mut seen = 0u64;
    let mut resumes = 0u32;
    let mut socket = open(client, session, cursor, deadline, goal).await?;
    loop {
        let next = socket.next();
        let message = match deadline {
            Some(deadline) => match tokio::time::timeout_at(deadline, next).await {
                Ok(message) => message,
                Err(_) => {
                    close(&mut socket).await;
                    return Err(timed_out(goal, seen));
                }
            },
            None => next.await,
        };
        let broken = match message {
            Some(Ok(Message::Text(text))) => {
                seen += 1;
                resumes = 0;
                if let Some(seq) = seq_of(text.as_str()) {
                    cursor = cursor.max(seq);
                }
                match on_event(text.as_str()) {
                    Ok(Next::More) => continue,
                    Ok(Next::Stop) => {
                        close(&mut socket).await;
                        return Ok(seen);
                    }
                    Err(error) => {
                        close(&mut socket).await;
                        return Err(error);
                    }
                }
            }
            Some(Ok(Message::Close(frame))) => {
                let why = frame.as_ref().map(|f| format!(" ({} {})", f.code, f.reason)).unwrap_or_default();
                if !frame.is_some_and(|f| RESUMABLE_CLOSES.contains(&u16::from(f.code))) {
                    return Err(anyhow!("the server closed the stream{why} after {seen} events").into());
                }
                format!("the server closed the stream{why}")
            }
            Some(Ok(_)) => continue,
            Some(Err(error)) => format!("reading the stream: {error}"),
            None => "the stream ended".to_owned(),
        };
        socket = reopen(client, session, cursor, deadline, goal, &mut resumes, (&broken, seen)).await?;
    }
}

/// Opens the stream again from `cursor` after a pause (1 s, doubling to 16 s), trying while the
/// server is away, until [`MAX_RESUMES`] tries in a row or the deadline.
async fn reopen(
    client: &Client,
    session: &str,
    cursor: u64,
    deadline: Option<Instant>,
    goal: &str,
    resumes: &mut u32,
    (broken, seen): (&str, u64),
) -> Result<Socket, Failure> {
    loop {
        if *resumes >= MAX_RESUMES {
            return Err(anyhow!("{broken} after {seen} events; gave up after {resumes} reconnects").into());
        }
        let pause = Duration::from_secs(1 << (*resumes).min(4));
        *resumes += 1;
        if deadline.is_some_and(|deadline| Instant::now() + pause >= deadline) {
            return Err(timed_out(goal, seen));
        }
        eprintln!("agentholdctl: {broken}; reconnecting in {} s from seq {cursor}", pause.as_secs());
        tokio::time::sleep(pause).await;
        match open(client, session, cursor, deadline, goal).await {
            Ok(socket) => return Ok(socket),
            Err(Failure::Timeout(message)) => return Err(Failure::Timeout(message)),
            Err(_) => {}
        }
    }
}

/// The `seq` of an event's JSON text.
fn seq_of(text: &str) -> Option<u64> {
    #[derive(Deserialize)]
    struct Seq {
        seq: u64,
    }
    serde_json::from_str::<Seq>(text).ok().map(|event| event.seq)
}

fn timed_out(goal: &str, seen: u64) -> Failure {
    Failure::Timeout(format!("gave up waiting for {goal}; saw {seen} events"))
}

/// Says goodbye politely, but never waits long for it.
pub async fn close(socket: &mut Socket) {
    let _ = tokio::time::timeout(Duration::from_secs(2), socket.close(None)).await;
}

/// Sends a message, mapping errors.
pub async fn send(socket: &mut Socket, message: Message) -> Result<(), Failure> {
    socket.send(message).await.map_err(|e| anyhow::Error::new(e).context("sending on the WebSocket").into())
}
