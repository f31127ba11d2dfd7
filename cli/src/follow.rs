//! `prompt --follow`: sends a prompt, then follows the session's stream from the prompt's own
//! event to the turn's `turn_end`, printing the events (JSON lines with `--json`, else a
//! transcript: the agent's message text as it streams, one bracketed line per tool call,
//! permission question, error or notice). The exit code comes from the stop reason
//! ([`crate::error::stop_exit_code`]).

use std::io::Write;
use std::time::Duration;

use anyhow::{Context, anyhow};
use serde_json::{Value, json};
use tokio::time::Instant;

use crate::api::Client;
use crate::endpoint::segment;
use crate::error::Failure;
use crate::output::{self, Printer};
use crate::watch::{self, Next};

/// Posts `text` to the session and follows the turn it starts. A prompt that answered a waiting
/// permission question instead (`{"answered", "decision"}`) starts no turn: the answer is printed.
pub async fn prompt_and_follow(
    client: &Client,
    session: &str,
    text: &str,
    timeout: Option<Duration>,
    printer: Printer,
    out: &mut dyn Write,
) -> Result<(), Failure> {
    let deadline = timeout.map(|t| Instant::now() + t);
    let path = format!("/api/v1/sessions/{}/prompt", segment(session));
    let answer = client.call("POST", &path, Some(&json!({"text": text}))).await?.context("an empty prompt answer")?;
    let (Some(turn_id), Some(seq)) = (answer["turn_id"].as_str(), answer["seq"].as_u64()) else {
        return printer.print(Some(answer), output::fields, "");
    };
    let goal = match timeout {
        Some(t) => format!("the end of turn {turn_id} within {t:?}"),
        None => format!("the end of turn {turn_id}"),
    };
    let mut transcript = Transcript::default();
    let mut stop_reason = None;
    // From the prompt's own event, so the JSON lines hold the whole turn.
    watch::follow(client, session, seq.saturating_sub(1), deadline, &goal, |raw| {
        let event: Value =
            serde_json::from_str(raw).map_err(|e| anyhow!("the stream sent a message that is not an event ({e})"))?;
        let text = if printer.is_json() { format!("{raw}\n") } else { transcript.feed(&event) };
        if !text.is_empty() {
            out.write_all(text.as_bytes())
                .and_then(|()| out.flush())
                .or_else(|e| if e.kind() == std::io::ErrorKind::BrokenPipe { Ok(()) } else { Err(e) })
                .context("writing to stdout")?;
        }
        let ours = event["payload"]["turn_id"].as_str().is_none_or(|id| id == turn_id);
        if event["type"] == "turn_end" && ours {
            stop_reason = Some(event["payload"]["stop_reason"].as_str().unwrap_or("unknown").to_owned());
            return Ok(Next::Stop);
        }
        Ok(Next::More)
    })
    .await?;
    match stop_reason.as_deref() {
        Some("end_turn") => Ok(()),
        Some(reason) => Err(Failure::TurnEnded { stop_reason: reason.to_owned() }),
        None => Err(anyhow!("the stream stopped before the turn ended").into()),
    }
}

/// Turns events into a readable transcript.
#[derive(Debug, Default)]
pub struct Transcript {
    /// The last text written did not end with a newline.
    mid_line: bool,
}

impl Transcript {
    /// The text to print for one event (often none).
    pub fn feed(&mut self, event: &Value) -> String {
        let payload = &event["payload"];
        let line = match event["type"].as_str().unwrap_or_default() {
            "update" => match payload["sessionUpdate"].as_str().unwrap_or_default() {
                "agent_message_chunk" => {
                    let Some(text) = payload["content"]["text"].as_str() else { return String::new() };
                    self.mid_line = !text.is_empty() && !text.ends_with('\n') || self.mid_line && text.is_empty();
                    return text.to_owned();
                }
                "tool_call" => format!("[tool] {}", payload["title"].as_str().unwrap_or("(untitled)")),
                "tool_call_update" if payload["status"] == "failed" => {
                    format!("[tool failed] {}", payload["title"].as_str().unwrap_or_default())
                }
                _ => return String::new(),
            },
            "permission" => {
                let what = payload["tool_call"]["title"].as_str().or(payload["message"].as_str()).unwrap_or_default();
                format!("[permission {}] {what}: waiting for an answer", output::scalar(&payload["permission_id"]))
            }
            "permission_resolved" => format!(
                "[permission {}] {}",
                output::scalar(&payload["permission_id"]),
                output::scalar(&payload["outcome"])
            ),
            "error" | "notice" => format!(
                "[{} {}] {}",
                event["type"].as_str().unwrap_or_default(),
                output::scalar(&payload["code"]),
                output::scalar(&payload["message"])
            ),
            "turn_end" => format!(
                "[turn_end] {} ({} ms)",
                output::scalar(&payload["stop_reason"]),
                output::scalar(&payload["duration_ms"])
            ),
            _ => return String::new(),
        };
        let lead = if self.mid_line { "\n" } else { "" };
        self.mid_line = false;
        format!("{lead}{line}\n")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_transcript_streams_text_and_marks_the_rest() {
        let mut t = Transcript::default();
        let chunk = |text: &str| {
            json!({"type": "update", "payload": {"sessionUpdate": "agent_message_chunk",
                "content": {"type": "text", "text": text}}})
        };
        let mut out = String::new();
        out += &t.feed(&json!({"type": "prompt", "payload": {"prompt": []}}));
        out += &t.feed(&chunk("Hello, "));
        out += &t.feed(&chunk("world"));
        out += &t.feed(&json!({"type": "update", "payload": {"sessionUpdate": "tool_call", "title": "cat x"}}));
        out += &t.feed(&json!({"type": "update", "payload": {"sessionUpdate": "agent_thought_chunk"}}));
        out += &t.feed(&json!({"type": "turn_end", "payload": {"stop_reason": "end_turn", "duration_ms": 5}}));
        assert_eq!(out, "Hello, world\n[tool] cat x\n[turn_end] end_turn (5 ms)\n");
    }
}
