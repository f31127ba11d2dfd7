//! Starting a pooled harness and keeping it until the claim ([`super`]'s module docs): [`warm`]
//! starts it over the held tunnel, reads its `initialize` answer, runs a throwaway turn for a
//! harness that boots services at its first prompt ([`warm_up`]) and opens the spare session;
//! [`Keeper`] reads the tunnel until the claim.

use std::time::Duration;

use agenthold_core::acp::wire::{self, FromHarness};
use agenthold_sandboxd::protocol::{Control, DataKind, ProcessState};
use bytes::BytesMut;
use tokio::sync::oneshot;

use super::{CHANNEL, MAX_INIT_BYTES, Plan};
use crate::fleet::warm_pool::Held;

/// A pooled harness, started and initialised.
pub struct Warmed {
    /// The sandbox's tunnel.
    pub held: Held,
    /// What it was started with.
    pub plan: Plan,
    /// Its `initialize` answer (the result).
    pub init: serde_json::Value,
    /// The session it opened for the agent to be (its ACP id), if it could.
    pub spare_session: Option<String>,
    /// How long its warm-up turn took ([`warm_up`]; `None`: its harness runs none).
    pub warm_up_ms: Option<u64>,
    /// Its sandbox's address, as the engine gave it once the harness was warmed (`None`: not
    /// known; the claim asks the engine).
    pub source_addr: Option<std::net::IpAddr>,
    /// Its pid in the sandbox.
    pub pid: Option<u32>,
    /// stdout read up to the end of the `initialize` answer (acknowledged to sandboxd).
    pub stdout_read: u64,
    /// stdout received so far.
    pub stdout_end: u64,
    /// stdin written (the `initialize` request), as sandboxd confirmed.
    pub stdin_written: u64,
    /// stdin sent.
    pub stdin_sent: u64,
}

impl Warmed {
    /// The `Hello` the claiming agent's supervisor is handed: sandboxd's own, with the harness
    /// where it stands, so the takeover picks it up ([`crate::supervisor::core`]'s takeover).
    pub fn hello(&self) -> Control {
        let (protocol, version) = match &self.held.hello {
            Control::Hello { protocol, version, .. } => (*protocol, version.clone()),
            _ => (agenthold_sandboxd::protocol::PROTOCOL_VERSION, String::new()),
        };
        let process = ProcessState {
            channel: CHANNEL,
            pid: self.pid,
            stdout_acked: self.stdout_read,
            stdout_end: self.stdout_end,
            stdin_written: self.stdin_written,
            stdin_accepted: self.stdin_sent,
            exit: None,
        };
        Control::Hello { protocol, version, processes: vec![process] }
    }
}

/// Why a pooled harness could not be warmed (with the end of its stderr).
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct WarmError {
    /// Why, for the log.
    pub message: String,
}

/// Starts the harness of `plan` over `held`, waits (at most `timeout`) for its `initialize`
/// answer, then opens a session for the agent to be (`session/new` with the plan's folder and MCP
/// servers): its first session takes it instead of opening one. A harness that cannot open one
/// now is still warmed, without it. The tunnel is made live first (`Resume` of nothing: sandboxd
/// holds no process yet).
pub async fn warm(mut held: Held, plan: Plan, timeout: Duration) -> Result<Warmed, WarmError> {
    use agenthold_core::acp::messages::{self, method};
    let deadline = tokio::time::Instant::now() + timeout;
    held.link.send(&Control::Resume { channels: Vec::new() });
    let start = Control::Start {
        channel: CHANNEL,
        argv: plan.argv.clone(),
        env: plan.env.clone(),
        cwd: plan.cwd.clone(),
        user: plan.user.clone(),
    };
    if !held.link.send(&start) {
        return Err(WarmError { message: "the tunnel closed before the harness started".to_owned() });
    }
    let mut reading = Reading::default();
    let mut stdin_sent = 0;
    let init = ask(&mut held, &mut reading, &mut stdin_sent, method::INITIALIZE, &messages::initialize(), deadline)
        .await
        .and_then(|answer| answer.map_err(|error| format!("the harness refused `initialize`: {error}")))
        .and_then(|init| messages::parse_initialize(&init).map(|capabilities| (init, capabilities)));
    let (init, capabilities) = init
        .map_err(|message| WarmError { message: crate::supervisor::core::with_stderr(&message, &reading.stderr()) })?;
    let mcp: &[agent_client_protocol::v1::schema::McpServer] =
        if capabilities.mcp_http { &plan.mcp_servers } else { &[] };
    let mut warm_up_ms = None;
    if crate::harness::adapter(&plan.profile.harness).is_some_and(|a| a.profile().warm_up_turn) {
        let began = tokio::time::Instant::now();
        warm_up(&mut held, &mut reading, &mut stdin_sent, &plan.cwd, mcp, deadline).await.map_err(|message| {
            WarmError { message: crate::supervisor::core::with_stderr(&message, &reading.stderr()) }
        })?;
        warm_up_ms = Some(began.elapsed().as_millis() as u64);
    }
    let opened = ask(
        &mut held,
        &mut reading,
        &mut stdin_sent,
        method::SESSION_NEW,
        &messages::new_session(&plan.cwd, mcp),
        deadline,
    )
    .await;
    let spare_session = match opened {
        Ok(Ok(result)) => messages::parse_new_session(&result).ok(),
        Ok(Err(error)) => {
            tracing::debug!(%error, "a pooled harness opened no session ahead");
            None
        }
        Err(message) => {
            return Err(WarmError { message: crate::supervisor::core::with_stderr(&message, &reading.stderr()) });
        }
    };
    held.link.send(&Control::Ack { channel: CHANNEL, offset: reading.line_start });
    Ok(Warmed {
        held,
        plan,
        init,
        spare_session,
        warm_up_ms,
        source_addr: None,
        pid: reading.pid,
        stdout_read: reading.line_start,
        stdout_end: reading.stdout_end,
        stdin_written: reading.stdin_written,
        stdin_sent,
    })
}

/// How long a pooled harness's warm-up turn may take before it is cancelled (and then as long
/// again for its answer).
const WARM_UP_TURN: Duration = Duration::from_secs(10);

/// The warm-up turn's prompt (it never reaches a model: see [`warm_up`]).
const WARM_UP_PROMPT: &str = "agenthold is starting this harness ahead; nothing to do.";

/// The throwaway turn of a harness whose first prompt in a process boots services of its own
/// (`Profile::warm_up_turn`: OpenCode's file watcher, file finder and project copy, ~0.7 s), so
/// that the claiming agent's first prompt finds them up: a session of its own (never the
/// agent's), one prompt, its answer, whatever it says — before the claim the proxy lets the
/// harness reach agenthold's MCP route only, so the turn fails at its first request to the
/// provider, after the boot (refused `403`, counted with the refusals the claim audits).
/// Cancelled past [`WARM_UP_TURN`] (a harness that retries), then answered within as long again;
/// an error only when it does not answer even then, or asks or prints what a warming harness
/// may not.
async fn warm_up(
    held: &mut Held,
    reading: &mut Reading,
    stdin_sent: &mut u64,
    cwd: &str,
    mcp: &[agent_client_protocol::v1::schema::McpServer],
    deadline: tokio::time::Instant,
) -> Result<(), String> {
    use agenthold_core::acp::messages::{self, method};
    let opened =
        ask(held, reading, stdin_sent, method::SESSION_NEW, &messages::new_session(cwd, mcp), deadline).await?;
    let Some(session) = opened.ok().and_then(|result| messages::parse_new_session(&result).ok()) else {
        return Ok(());
    };
    let prompt = serde_json::json!({"sessionId": session, "prompt": [{"type": "text", "text": WARM_UP_PROMPT}]});
    let id = wire::new_request_id();
    send(held, stdin_sent, &wire::request(&id, method::SESSION_PROMPT, &prompt))?;
    let turn = |now: tokio::time::Instant| deadline.min(now + WARM_UP_TURN);
    if answer_to(held, reading, &id, turn(tokio::time::Instant::now())).await?.is_some() {
        return Ok(());
    }
    send(held, stdin_sent, &wire::notification(method::SESSION_CANCEL, &messages::cancel(&session)))?;
    match answer_to(held, reading, &id, turn(tokio::time::Instant::now())).await? {
        Some(_) => Ok(()),
        None => Err("its warm-up turn did not end, even cancelled".to_owned()),
    }
}

/// Writes `bytes` to the harness's stdin; an error when the tunnel closed.
fn send(held: &mut Held, stdin_sent: &mut u64, bytes: &[u8]) -> Result<(), String> {
    let offset = *stdin_sent;
    *stdin_sent += bytes.len() as u64;
    if held.link.send_data(DataKind::Stdin, CHANNEL, offset, bytes.to_vec().into()) {
        Ok(())
    } else {
        Err("the tunnel closed".to_owned())
    }
}

/// Reads until the answer to request `id` (the result, or the error object); `None` when
/// `deadline` passed first; an error when the harness asked something first, printed what is
/// not JSON-RPC, exited, or the tunnel closed.
async fn answer_to(
    held: &mut Held,
    reading: &mut Reading,
    id: &str,
    deadline: tokio::time::Instant,
) -> Result<Option<Answer>, String> {
    let answered = tokio::time::timeout_at(deadline, async {
        while let Some(incoming) = held.inbox.recv().await {
            if let Some(answer) = reading.take(incoming, id)? {
                return Ok(answer);
            }
        }
        Err("the tunnel closed".to_owned())
    })
    .await;
    match answered {
        Ok(answer) => answer.map(Some),
        Err(_) => Ok(None),
    }
}

/// Sends one request and reads until its answer (the result, or the error object), by
/// `deadline`; an error when the harness asked something first, printed what is not JSON-RPC,
/// exited or went silent.
async fn ask(
    held: &mut Held,
    reading: &mut Reading,
    stdin_sent: &mut u64,
    method: &str,
    params: &serde_json::Value,
    deadline: tokio::time::Instant,
) -> Result<Answer, String> {
    let id = wire::new_request_id();
    send(held, stdin_sent, &wire::request(&id, method, params))
        .map_err(|_| format!("the tunnel closed before `{method}` was sent"))?;
    answer_to(held, reading, &id, deadline).await?.ok_or_else(|| format!("no `{method}` answer in time"))
}

/// What [`warm`] has read so far.
#[derive(Default)]
struct Reading {
    pid: Option<u32>,
    /// stdout received, from the start of the line not read yet.
    pending: BytesMut,
    /// The offset of `pending`'s first byte.
    line_start: u64,
    stdout_end: u64,
    stdin_written: u64,
    stderr_tail: Vec<u8>,
}

/// An answer: the result, or the error object.
type Answer = Result<serde_json::Value, serde_json::Value>;

impl Reading {
    /// Takes one message; the answer to `id` once it has arrived whole.
    fn take(&mut self, incoming: crate::tunnel::link::Incoming, id: &str) -> Result<Option<Answer>, String> {
        use crate::tunnel::link::Incoming;
        match incoming {
            Incoming::Control(Control::Started { channel: CHANNEL, pid }) => self.pid = Some(pid),
            Incoming::Control(Control::StartFailed { message, .. }) => {
                return Err(format!("the harness did not start: {message}"));
            }
            Incoming::Control(Control::Exited { status, .. }) => {
                return Err(format!("the harness exited before it was warmed ({status:?})"));
            }
            Incoming::Control(Control::StdinWritten { channel: CHANNEL, offset }) => self.stdin_written = offset,
            Incoming::Control(Control::StdinRejected { reason, .. }) => {
                return Err(format!("sandboxd refused a request to the harness: {reason}"));
            }
            Incoming::Control(_) => {}
            Incoming::Data(frame) if frame.channel != CHANNEL => {}
            Incoming::Data(frame) => match frame.kind {
                DataKind::Stderr => {
                    self.stderr_tail.extend_from_slice(&frame.payload);
                    let excess = self.stderr_tail.len().saturating_sub(crate::supervisor::core::STDERR_TAIL_BYTES);
                    self.stderr_tail.drain(..excess);
                }
                DataKind::Stdout => return self.stdout(frame.offset, &frame.payload, id),
                _ => {}
            },
        }
        Ok(None)
    }

    fn stdout(&mut self, offset: u64, payload: &[u8], id: &str) -> Result<Option<Answer>, String> {
        // Frames come in order; a frame resent from before what was read adds only its new end.
        let end = offset + payload.len() as u64;
        if end <= self.stdout_end {
            return Ok(None);
        }
        if offset > self.stdout_end {
            return Err("stdout skipped bytes".to_owned());
        }
        let skip = usize::try_from(self.stdout_end - offset).unwrap_or(usize::MAX);
        self.pending.extend_from_slice(&payload[skip..]);
        self.stdout_end = end;
        while let Some(newline) = self.pending.iter().position(|b| *b == b'\n') {
            let line = self.pending.split_to(newline + 1);
            self.line_start += line.len() as u64;
            let text = line.strip_suffix(b"\n").unwrap_or(&line);
            if text.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            match wire::parse_line(text) {
                Ok(FromHarness::Response { id: answered, outcome }) if answered == id => return Ok(Some(outcome)),
                // Notifications meanwhile (a harness announcing itself, its commands) are not kept.
                Ok(FromHarness::Notification { .. }) => {}
                Ok(_) => return Err("the harness asked something before it was warmed".to_owned()),
                Err(garbage) => return Err(format!("the harness printed {garbage}")),
            }
        }
        if self.pending.len() > MAX_INIT_BYTES {
            return Err(format!("the harness printed over {MAX_INIT_BYTES} bytes without answering"));
        }
        Ok(None)
    }

    fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.stderr_tail).trim().to_owned()
    }
}

/// A warmed harness waiting for its claim: reads its tunnel (so sandboxd's messages never back
/// up) and notes anything that rules out handing it over (it exited, its tunnel closed). What it
/// prints meanwhile stays in sandboxd, unacknowledged: the claiming agent's supervisor reads it
/// from the end of the `initialize` answer on, as any harness output.
pub struct Keeper {
    stop: oneshot::Sender<()>,
    task: tokio::task::JoinHandle<Result<Warmed, String>>,
}

impl Keeper {
    /// Starts reading; `ended` hears when the harness is no longer fit (logged with why).
    pub fn keep(mut warmed: Warmed, agent_id: crate::ids::AgentId, ended: std::sync::Arc<tokio::sync::Notify>) -> Self {
        use crate::tunnel::link::Incoming;
        let (stop, mut stopped) = oneshot::channel();
        let task = tokio::spawn(async move {
            let why = loop {
                tokio::select! {
                    biased;
                    _ = &mut stopped => return Ok(warmed),
                    incoming = warmed.held.inbox.recv() => match incoming {
                        None => break "its tunnel closed".to_owned(),
                        Some(Incoming::Control(Control::Exited { status, .. })) => break format!("it exited ({status:?})"),
                        Some(Incoming::Control(Control::StdinWritten { channel: CHANNEL, offset })) => {
                            warmed.stdin_written = offset;
                        }
                        Some(Incoming::Data(frame)) if frame.kind == DataKind::Stdout && frame.channel == CHANNEL => {
                            warmed.stdout_end = warmed.stdout_end.max(frame.offset + frame.payload.len() as u64);
                        }
                        Some(_) => {}
                    },
                }
            };
            tracing::warn!(agent.id = %agent_id, %why, "a pooled harness is no longer fit to hand over; its sandbox is replaced");
            warmed.held.link.close();
            ended.notify_one();
            Err(why)
        });
        Self { stop, task }
    }

    /// Whether it is still fit to hand over (it has not exited, closed or spoken).
    pub fn alive(&self) -> bool {
        !self.task.is_finished()
    }

    /// Stops reading: the warmed harness, or why it is not fit to be handed over.
    pub async fn take(self) -> Result<Warmed, String> {
        let _ = self.stop.send(());
        self.task.await.unwrap_or_else(|error| Err(format!("its keeper failed: {error}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reading_of(lines: &[&str]) -> (Reading, Result<Option<Answer>, String>) {
        let mut reading = Reading::default();
        let bytes = lines.concat();
        let mut result = Ok(None);
        // Split anywhere: frames do not follow lines.
        for (at, chunk) in bytes.as_bytes().chunks(7).enumerate() {
            result = reading.stdout((at * 7) as u64, chunk, "id-1");
            if !matches!(result, Ok(None)) {
                break;
            }
        }
        (reading, result)
    }

    #[test]
    fn an_answer_is_read_across_frames_and_its_end_is_where_stdout_is_acknowledged() {
        let notice = "{\"jsonrpc\":\"2.0\",\"method\":\"hello\",\"params\":{}}\n";
        let answer =
            "{\"jsonrpc\":\"2.0\",\"id\":\"id-1\",\"result\":{\"protocolVersion\":1,\"agentCapabilities\":{}}}\n";
        let (reading, result) = reading_of(&[notice, "\n", answer]);
        let init = result.expect("read").expect("answered").expect("a result");
        assert_eq!(init["protocolVersion"], 1);
        assert_eq!(reading.line_start, (notice.len() + 1 + answer.len()) as u64);

        let (_, refused) =
            reading_of(&["{\"jsonrpc\":\"2.0\",\"id\":\"id-1\",\"error\":{\"code\":-1,\"message\":\"no\"}}\n"]);
        assert_eq!(refused.expect("read").expect("answered").expect_err("an error")["message"], "no");
        let (_, asked) =
            reading_of(&["{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"fs/read_text_file\",\"params\":{}}\n"]);
        assert!(asked.expect_err("asked").contains("asked something"));
        let (_, garbage) = reading_of(&["Loading...\n"]);
        assert!(garbage.expect_err("garbage").contains("printed"));
        let mut reading = Reading::default();
        assert!(reading.stdout(5, b"x", "id-1").is_err(), "a gap in stdout");
        let mut reading = Reading::default();
        let endless = vec![b'x'; MAX_INIT_BYTES + 1];
        assert!(reading.stdout(0, &endless, "id-1").expect_err("too long").contains("without answering"));
    }
}
