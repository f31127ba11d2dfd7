//! Commands for an agent whose supervisor runs on another replica: sent to that replica's
//! `POST /internal/v1/agents/{id}/commands` ([`crate::api::internal`]) and its answer handed
//! back to the waiting handler, so an API request for any agent works on any replica. Each call
//! is signed with a key derived from the master key the replicas share ([`super::signing`]):
//! its time, path and body, taken once within a short window; the call is plain HTTP to the
//! other replica's own internal listener, on the replicas' network (docs/replicas.md), with the
//! server's outbound client ([`crate::outbound`]: kept-alive connections, no handshake per call).
//!
//! What cannot travel: a sandbox's connection (the tunnel redirects it instead) and a terminal
//! (it needs the sandbox's connection: it opens on the owning replica).

use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::sync::oneshot;
use uuid::Uuid;

use crate::ids::{AgentId, SessionId};
use crate::outbound;
use crate::permissions::Choice;
use crate::store::replicas::ReplicaRow;
use crate::supervisor::core::AnswerError;
use crate::supervisor::{Command, LifecycleError, TerminalAccess};

/// How long a forwarded command may take (a wake starts a sandbox and its harness).
const CALL_TIMEOUT: Duration = Duration::from_secs(180);
/// Largest answer read from another replica.
const MAX_ANSWER_BYTES: usize = 64 << 10;

/// The route of forwarded commands.
pub fn path_template() -> String {
    "/internal/v1/agents/{id}/commands".to_owned()
}

/// The path of a forwarded command.
pub fn path(agent_id: AgentId) -> String {
    path_template().replace("{id}", &agent_id.0.to_string())
}

/// A command as it travels between replicas.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "command", rename_all = "snake_case")]
pub enum Forwarded {
    /// [`Command::Prompt`].
    Prompt,
    /// [`Command::EnvironmentChanged`].
    EnvironmentChanged,
    /// [`Command::Cancel`].
    Cancel {
        /// The session.
        session_id: Uuid,
    },
    /// [`Command::Sleep`].
    Sleep,
    /// [`Command::Wake`].
    Wake,
    /// [`Command::Destroy`].
    Destroy,
    /// [`Command::GateChanged`].
    GateChanged,
    /// [`Command::AuthMethodChanged`].
    AuthMethodChanged,
    /// [`Command::RevokeGrant`].
    RevokeGrant {
        /// The question whose answer made it.
        permission_id: Uuid,
        /// Its session.
        session_id: Uuid,
        /// Who revokes it.
        by: serde_json::Value,
    },
    /// [`Command::AnswerPermission`].
    AnswerPermission {
        /// The question.
        permission_id: Uuid,
        /// The answer.
        choice: Choice,
        /// Who answered.
        by: serde_json::Value,
    },
}

/// The owning replica's answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum Answer {
    /// Taken (nothing to answer).
    Done,
    /// Whether a turn was cancelled.
    Cancelled {
        /// Whether one was in progress.
        was_running: bool,
    },
    /// A lifecycle command's result.
    Lifecycle {
        /// `busy`, or the failure's message; `None`: done.
        error: Option<WireError>,
    },
    /// A permission answer's result.
    Answered {
        /// Why it was refused; `None`: taken.
        error: Option<WireError>,
    },
    /// The supervisor stopped before answering.
    Gone,
}

/// An error as it travels.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WireError {
    /// `busy`, `failed`, `not_pending`, `bad_choice`, `not_recorded`.
    pub kind: String,
    /// The message.
    pub message: String,
}

impl From<&LifecycleError> for WireError {
    fn from(error: &LifecycleError) -> Self {
        let kind = match error {
            LifecycleError::Busy => "busy",
            LifecycleError::Failed(_) => "failed",
        };
        Self { kind: kind.to_owned(), message: error.to_string() }
    }
}

impl From<WireError> for LifecycleError {
    fn from(error: WireError) -> Self {
        match error.kind.as_str() {
            "busy" => Self::Busy,
            _ => Self::Failed(error.message),
        }
    }
}

impl From<&AnswerError> for WireError {
    fn from(error: &AnswerError) -> Self {
        let kind = match error {
            AnswerError::NotPending => "not_pending",
            AnswerError::BadChoice(_) => "bad_choice",
            AnswerError::NotRecorded => "not_recorded",
        };
        Self { kind: kind.to_owned(), message: error.to_string() }
    }
}

impl From<WireError> for AnswerError {
    fn from(error: WireError) -> Self {
        match error.kind.as_str() {
            "not_pending" => Self::NotPending,
            "bad_choice" => Self::BadChoice(error.message),
            _ => Self::NotRecorded,
        }
    }
}

/// Where a forwarded command's answer goes.
pub enum Waiting {
    /// Nobody waits.
    Nobody,
    /// A cancel's caller.
    Cancel(oneshot::Sender<bool>),
    /// A lifecycle command's caller.
    Lifecycle(oneshot::Sender<Result<(), LifecycleError>>),
    /// A permission answer's caller.
    Answer(oneshot::Sender<Result<(), AnswerError>>),
}

/// A command that cannot travel, with the reason given to its caller.
pub enum Stays {
    /// A sandbox connection (the tunnel redirects those).
    Attach,
    /// A terminal: it is refused with this reply sender.
    Terminal(oneshot::Sender<Result<TerminalAccess, LifecycleError>>),
    /// The engine's report that a container stopped: the owning replica hears it itself.
    SandboxExited,
}

/// Splits a command into what travels and who waits for the answer.
pub fn split(command: Command) -> Result<(Forwarded, Waiting), Stays> {
    Ok(match command {
        Command::Prompt => (Forwarded::Prompt, Waiting::Nobody),
        Command::EnvironmentChanged => (Forwarded::EnvironmentChanged, Waiting::Nobody),
        Command::Cancel { session_id, reply } => {
            (Forwarded::Cancel { session_id: session_id.0 }, Waiting::Cancel(reply))
        }
        Command::Sleep { reply } => (Forwarded::Sleep, Waiting::Lifecycle(reply)),
        Command::Wake { reply } => (Forwarded::Wake, Waiting::Lifecycle(reply)),
        Command::Destroy { reply } => (Forwarded::Destroy, Waiting::Lifecycle(reply)),
        Command::AnswerPermission { permission_id, choice, by, reply } => {
            (Forwarded::AnswerPermission { permission_id, choice, by }, Waiting::Answer(reply))
        }
        Command::GateChanged => (Forwarded::GateChanged, Waiting::Nobody),
        Command::AuthMethodChanged => (Forwarded::AuthMethodChanged, Waiting::Nobody),
        Command::RevokeGrant { permission_id, session_id, by, reply } => {
            (Forwarded::RevokeGrant { permission_id, session_id: session_id.0, by }, Waiting::Answer(reply))
        }
        Command::Attach { .. } => return Err(Stays::Attach),
        Command::Terminal { reply } => return Err(Stays::Terminal(reply)),
        Command::SandboxExited(_) => return Err(Stays::SandboxExited),
    })
}

/// The command a forwarded one stands for, and the receiver of its answer.
pub fn join(forwarded: Forwarded) -> (Command, oneshot::Receiver<Answer>) {
    let (answer_tx, answer_rx) = oneshot::channel();
    let command = match forwarded {
        Forwarded::Prompt => {
            let _ = answer_tx.send(Answer::Done);
            Command::Prompt
        }
        Forwarded::EnvironmentChanged => {
            let _ = answer_tx.send(Answer::Done);
            Command::EnvironmentChanged
        }
        Forwarded::Cancel { session_id } => {
            let (reply, answer) = oneshot::channel();
            relay(answer, answer_tx, |was_running| Answer::Cancelled { was_running });
            Command::Cancel { session_id: SessionId(session_id), reply }
        }
        Forwarded::Sleep => Command::Sleep { reply: lifecycle(answer_tx) },
        Forwarded::Wake => Command::Wake { reply: lifecycle(answer_tx) },
        Forwarded::Destroy => Command::Destroy { reply: lifecycle(answer_tx) },
        Forwarded::AnswerPermission { permission_id, choice, by } => {
            let (reply, answer) = oneshot::channel::<Result<(), AnswerError>>();
            relay(answer, answer_tx, |result| Answer::Answered { error: result.err().as_ref().map(WireError::from) });
            Command::AnswerPermission { permission_id, choice, by, reply }
        }
        Forwarded::GateChanged => {
            let _ = answer_tx.send(Answer::Done);
            Command::GateChanged
        }
        Forwarded::AuthMethodChanged => {
            let _ = answer_tx.send(Answer::Done);
            Command::AuthMethodChanged
        }
        Forwarded::RevokeGrant { permission_id, session_id, by } => {
            let (reply, answer) = oneshot::channel::<Result<(), AnswerError>>();
            relay(answer, answer_tx, |result| Answer::Answered { error: result.err().as_ref().map(WireError::from) });
            Command::RevokeGrant { permission_id, session_id: SessionId(session_id), by, reply }
        }
    };
    (command, answer_rx)
}

fn lifecycle(answer_tx: oneshot::Sender<Answer>) -> oneshot::Sender<Result<(), LifecycleError>> {
    let (reply, answer) = oneshot::channel::<Result<(), LifecycleError>>();
    relay(answer, answer_tx, |result| Answer::Lifecycle { error: result.err().as_ref().map(WireError::from) });
    reply
}

/// Turns the supervisor's reply into the wire answer when it comes ([`Answer::Gone`] if never).
fn relay<T: Send + 'static>(
    reply: oneshot::Receiver<T>,
    answer: oneshot::Sender<Answer>,
    wrap: impl FnOnce(T) -> Answer + Send + 'static,
) {
    tokio::spawn(async move {
        let _ = answer.send(reply.await.map_or(Answer::Gone, wrap));
    });
}

/// Hands the owning replica's answer to whoever waits (nothing reaches a caller whose answer did
/// not come: its `ask` sees the reply dropped).
pub fn deliver(waiting: Waiting, answer: Answer) {
    match (waiting, answer) {
        (Waiting::Nobody, _) => {}
        (Waiting::Cancel(reply), Answer::Cancelled { was_running }) => {
            let _ = reply.send(was_running);
        }
        (Waiting::Lifecycle(reply), Answer::Lifecycle { error }) => {
            let _ = reply.send(error.map_or(Ok(()), |e| Err(e.into())));
        }
        (Waiting::Answer(reply), Answer::Answered { error }) => {
            let _ = reply.send(error.map_or(Ok(()), |e| Err(e.into())));
        }
        (_, answer) => tracing::warn!(?answer, "another replica answered a forwarded command unexpectedly"),
    }
}

/// Sends a command to the replica that owns the agent and waits for its answer.
pub async fn call(
    http: &reqwest::Client,
    owner: &ReplicaRow,
    key: &super::signing::CallKey,
    agent_id: AgentId,
    command: &Forwarded,
) -> Result<Answer, String> {
    let body = serde_json::to_vec(command).map_err(|e| e.to_string())?;
    tokio::time::timeout(CALL_TIMEOUT, post(http, &owner.internal_url, &path(agent_id), key, body))
        .await
        .map_err(|_| format!("replica {} did not answer in time", owner.id))?
}

/// One signed POST of JSON to `base` (`http://host:port`) and its JSON answer.
async fn post(
    http: &reqwest::Client,
    base: &str,
    path: &str,
    key: &super::signing::CallKey,
    body: Vec<u8>,
) -> Result<Answer, String> {
    let authority = base
        .strip_prefix("http://")
        .map(|rest| rest.trim_end_matches('/'))
        .ok_or_else(|| format!("the replica address {base} is not http://host:port"))?;
    let timestamp = chrono::Utc::now().timestamp();
    let signed = key.sign(timestamp, path, &body);
    let response = http
        .post(format!("http://{authority}{path}"))
        .header(super::signing::TIMESTAMP_HEADER, timestamp.to_string())
        .header(super::signing::NONCE_HEADER, signed.nonce)
        .header(super::signing::SIGNATURE_HEADER, signed.signature)
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .body(body)
        .send()
        .await
        .map_err(|e| format!("HTTP to {authority}: {e}"))?;
    let status = response.status();
    let bytes =
        outbound::read_body(response, MAX_ANSWER_BYTES).await.map_err(|e| format!("the answer of {authority}: {e}"))?;
    if !status.is_success() {
        return Err(format!("replica {authority} answered {status}: {}", String::from_utf8_lossy(&bytes)));
    }
    serde_json::from_slice(&bytes).map_err(|e| format!("replica {authority} answered unreadably: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_travel_as_json_and_back() {
        let permission_id = Uuid::new_v4();
        for command in [
            Forwarded::Prompt,
            Forwarded::EnvironmentChanged,
            Forwarded::Cancel { session_id: Uuid::new_v4() },
            Forwarded::Sleep,
            Forwarded::Wake,
            Forwarded::Destroy,
            Forwarded::AnswerPermission {
                permission_id,
                choice: Choice::Option("allow_always".into()),
                by: serde_json::json!({"user_id": "u"}),
            },
            Forwarded::AnswerPermission { permission_id, choice: Choice::Deny, by: serde_json::Value::Null },
            Forwarded::AnswerPermission { permission_id, choice: Choice::AllowForSession, by: serde_json::Value::Null },
            Forwarded::GateChanged,
            Forwarded::AuthMethodChanged,
            Forwarded::RevokeGrant {
                permission_id,
                session_id: Uuid::new_v4(),
                by: serde_json::json!({"user_id": "u"}),
            },
        ] {
            let text = serde_json::to_string(&command).expect("encodes");
            assert_eq!(serde_json::from_str::<Forwarded>(&text).expect("decodes"), command, "{text}");
        }
        assert!(serde_json::from_str::<Forwarded>(r#"{"command":"attach"}"#).is_err());
    }

    #[tokio::test]
    async fn answers_reach_the_waiting_caller_with_their_errors() {
        let (reply, answer) = oneshot::channel();
        deliver(
            Waiting::Lifecycle(reply),
            Answer::Lifecycle { error: Some(WireError { kind: "busy".into(), message: "x".into() }) },
        );
        assert!(matches!(answer.await, Ok(Err(LifecycleError::Busy))));

        let (reply, answer) = oneshot::channel();
        deliver(
            Waiting::Answer(reply),
            Answer::Answered { error: Some(WireError { kind: "bad_choice".into(), message: "no such".into() }) },
        );
        assert!(matches!(answer.await, Ok(Err(AnswerError::BadChoice(m))) if m == "no such"));

        let (reply, answer) = oneshot::channel();
        deliver(Waiting::Cancel(reply), Answer::Cancelled { was_running: true });
        assert_eq!(answer.await, Ok(true));

        // A mismatched answer reaches nobody: the caller sees its reply dropped.
        let (reply, answer) = oneshot::channel::<bool>();
        deliver(Waiting::Cancel(reply), Answer::Done);
        assert!(answer.await.is_err());
    }

    #[tokio::test]
    async fn a_forwarded_command_is_answered_from_the_supervisors_reply() {
        let (command, answer) = join(Forwarded::Wake);
        let Command::Wake { reply } = command else { panic!("a wake") };
        reply.send(Err(LifecycleError::Failed("no room".into()))).ok();
        assert_eq!(
            answer.await.expect("answered"),
            Answer::Lifecycle { error: Some(WireError { kind: "failed".into(), message: "no room".into() }) }
        );
        let (command, answer) = join(Forwarded::Cancel { session_id: Uuid::new_v4() });
        drop(command); // the supervisor went away
        assert_eq!(answer.await.expect("answered"), Answer::Gone);
    }
}
