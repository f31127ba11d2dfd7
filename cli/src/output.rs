//! What the commands print on stdout: the server's JSON (`--json`, indented, or `--compact` on
//! one line), or short text for people (the default). Text renderers pick the fields that matter
//! and fall back to `key: value` lines for anything else.

use std::io::{self, Write};

use anyhow::Context;
use serde_json::Value;

use crate::error::Failure;

/// The output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Text for people.
    Text,
    /// The server's JSON; `compact`: one line.
    Json {
        /// On one line instead of indented.
        compact: bool,
    },
}

/// Prints results in a [`Format`].
#[derive(Debug, Clone, Copy)]
pub struct Printer {
    /// The format.
    pub format: Format,
}

impl Printer {
    /// Prints a response body with `text` in text mode; an empty one (204) prints nothing in JSON
    /// mode and `empty` in text mode.
    pub fn print(&self, value: Option<Value>, text: fn(&Value) -> String, empty: &str) -> Result<(), Failure> {
        let out = match (self.format, value) {
            (Format::Json { .. }, None) => return Ok(()),
            (Format::Json { compact: true }, Some(value)) => serde_json::to_string(&value).context("encoding")?,
            (Format::Json { compact: false }, Some(value)) => {
                serde_json::to_string_pretty(&value).context("encoding")?
            }
            (Format::Text, None) => empty.to_owned(),
            (Format::Text, Some(value)) => text(&value),
        };
        if out.is_empty() {
            return Ok(());
        }
        write_stdout(&format!("{}\n", out.trim_end_matches('\n')))
    }

    /// Whether this is JSON output.
    pub fn is_json(&self) -> bool {
        matches!(self.format, Format::Json { .. })
    }
}

/// Writes to stdout; a reader that went away (broken pipe) is not an error.
pub fn write_stdout(text: &str) -> Result<(), Failure> {
    let mut stdout = io::stdout().lock();
    match stdout.write_all(text.as_bytes()).and_then(|()| stdout.flush()) {
        Err(error) if error.kind() != io::ErrorKind::BrokenPipe => {
            Err(anyhow::Error::new(error).context("writing to stdout").into())
        }
        _ => Ok(()),
    }
}

/// A scalar as text (strings without quotes), anything else as compact JSON.
pub fn scalar(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Null => "-".to_owned(),
        other => other.to_string(),
    }
}

/// `key: value` lines for an object's fields (a non-object prints as JSON).
pub fn fields(value: &Value) -> String {
    match value.as_object() {
        Some(map) => map.iter().map(|(k, v)| format!("{k}: {}", scalar(v))).collect::<Vec<_>>().join("\n"),
        None => scalar(value),
    }
}

/// An agent: the fields a person looks at, in a fixed order, then the rest.
pub fn agent(value: &Value) -> String {
    const FIRST: [&str; 8] = ["id", "name", "harness", "posture", "model", "desired_state", "image", "workspace_id"];
    let mut lines: Vec<String> = FIRST
        .iter()
        .filter_map(|k| value.get(*k).filter(|v| !v.is_null()).map(|v| format!("{k}: {}", scalar(v))))
        .collect();
    if let Some(map) = value.as_object() {
        for (k, v) in map {
            if !FIRST.contains(&k.as_str()) && !v.is_null() {
                lines.push(format!("{k}: {}", scalar(v)));
            }
        }
    }
    lines.join("\n")
}

/// `{"agents": [...]}` as a table: id, name, harness, state.
pub fn agents(value: &Value) -> String {
    let rows: Vec<[String; 4]> = value["agents"]
        .as_array()
        .map(|agents| {
            agents
                .iter()
                .map(|a| [scalar(&a["id"]), scalar(&a["name"]), scalar(&a["harness"]), scalar(&a["desired_state"])])
                .collect()
        })
        .unwrap_or_default();
    table(["ID", "NAME", "HARNESS", "STATE"], &rows)
}

/// `{"sessions": [ids]}`: one id a line.
pub fn sessions(value: &Value) -> String {
    match value["sessions"].as_array() {
        Some(ids) => ids.iter().map(scalar).collect::<Vec<_>>().join("\n"),
        None => fields(value),
    }
}

/// A prompt's answer: the turn it started, or the permission answer it gave.
pub fn prompt(value: &Value) -> String {
    if let Some(turn) = value.get("turn_id") {
        format!("turn {} (prompt seq {})", scalar(turn), scalar(&value["seq"]))
    } else {
        fields(value)
    }
}

/// A page of events: one line each, then the cursor of the next page.
pub fn events(value: &Value) -> String {
    let mut lines: Vec<String> =
        value["events"].as_array().map(|events| events.iter().map(event).collect()).unwrap_or_default();
    lines.push(format!("next_after: {}", scalar(&value["next_after"])));
    lines.join("\n")
}

/// One event on one line: `seq type summary`.
pub fn event(value: &Value) -> String {
    let kind = value["type"].as_str().unwrap_or("?");
    let payload = &value["payload"];
    let summary = match kind {
        "update" => update_summary(payload),
        "prompt" => prompt_text(payload),
        "turn_end" => format!(
            "{} ({} ms)",
            scalar(&payload["stop_reason"]),
            payload["duration_ms"].as_u64().map(|ms| ms.to_string()).unwrap_or_else(|| "?".into())
        ),
        "error" | "notice" => format!("{}: {}", scalar(&payload["code"]), scalar(&payload["message"])),
        "permission" => {
            let title = payload["tool_call"]["title"].as_str().or(payload["message"].as_str()).unwrap_or("");
            format!("{} {title}", scalar(&payload["permission_id"]))
        }
        "permission_resolved" => format!("{} {}", scalar(&payload["permission_id"]), scalar(&payload["outcome"])),
        _ => payload.to_string(),
    };
    format!("{:>6} {kind:<19} {}", scalar(&value["seq"]), one_line(&summary))
}

/// The text of an `update` payload, with its kind.
fn update_summary(payload: &Value) -> String {
    let kind = payload["sessionUpdate"].as_str().unwrap_or("?");
    let detail = match kind {
        "agent_message_chunk" | "agent_thought_chunk" | "user_message_chunk" => {
            payload["content"]["text"].as_str().map(str::to_owned).unwrap_or_else(|| payload["content"].to_string())
        }
        "tool_call" | "tool_call_update" => {
            let title = payload["title"].as_str().unwrap_or("");
            let status = payload["status"].as_str().unwrap_or("");
            format!("{} {title} {status}", scalar(&payload["toolCallId"])).trim().to_owned()
        }
        _ => String::new(),
    };
    format!("{kind} {detail}").trim_end().to_owned()
}

/// The text blocks of a `prompt` payload.
fn prompt_text(payload: &Value) -> String {
    payload["prompt"]
        .as_array()
        .map(|blocks| blocks.iter().filter_map(|b| b["text"].as_str()).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

/// Control characters and newlines shown escaped, so an event stays on its line; cut at 200
/// characters.
fn one_line(text: &str) -> String {
    let mut out: String = text.chars().take(200).flat_map(char::escape_debug).collect();
    if text.chars().count() > 200 {
        out.push('…');
    }
    out.replace("\\'", "'").replace("\\\"", "\"")
}

fn table<const N: usize>(head: [&str; N], rows: &[[String; N]]) -> String {
    let mut widths = head.map(str::len);
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: [&str; N]| {
        let mut out = String::new();
        for (i, cell) in cells.iter().enumerate() {
            if i + 1 < N {
                out.push_str(&format!("{cell:<w$}  ", w = widths[i]));
            } else {
                out.push_str(cell);
            }
        }
        out
    };
    let mut lines = vec![line(head)];
    lines.extend(rows.iter().map(|r| line(std::array::from_fn(|i| r[i].as_str()))));
    lines.join("\n")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn renders_agents_and_events() {
        let list = json!({"agents": [{"id": "a1", "name": "demo", "harness": "fake", "desired_state": "awake"}]});
        assert_eq!(agents(&list), "ID  NAME  HARNESS  STATE\na1  demo  fake     awake");
        let text = agent(&json!({"name": "demo", "id": "a1", "harness": "fake", "env": {"A": "1"}, "model": null}));
        assert_eq!(text, "id: a1\nname: demo\nharness: fake\nenv: {\"A\":\"1\"}");
        let chunk = json!({"seq": 7, "type": "update",
            "payload": {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "hi\nthere"}}});
        assert_eq!(event(&chunk), "     7 update              agent_message_chunk hi\\nthere");
        let end = json!({"seq": 9, "type": "turn_end", "payload": {"stop_reason": "end_turn", "duration_ms": 12}});
        assert_eq!(event(&end), "     9 turn_end            end_turn (12 ms)");
        assert_eq!(prompt(&json!({"turn_id": "t", "seq": 3})), "turn t (prompt seq 3)");
    }
}
