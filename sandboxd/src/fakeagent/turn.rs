//! One prompt turn: runs the script on its own thread, emits `session/update`s (recording them
//! in the session history), and answers the `session/prompt` request when the script ends, is
//! cancelled, or fails.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command as Process, Stdio};
use std::sync::Arc;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use parking_lot::{Condvar, Mutex};
use serde_json::{Value, json};

use super::agent::Agent;
use super::fetch;
use super::history::{self, Recorder};
use super::script::{self, Command};
use super::wire::{self, RpcError, code};

/// The most `run` output (stdout and stderr together) reported in a tool call.
pub const MAX_RUN_OUTPUT: usize = 64 * 1024;

/// The most body a `fetch` reports in its tool call.
pub const MAX_FETCH_OUTPUT: usize = 4 * 1024;

/// How often a step that waits on something other than the cancel flag looks at the flag.
const POLL: Duration = Duration::from_millis(10);

/// The cancel flag of one running prompt. Waits wake the moment it is set.
#[derive(Default)]
pub struct Cancel {
    flag: Mutex<bool>,
    changed: Condvar,
}

impl Cancel {
    /// Sets the flag and wakes every waiter.
    pub fn cancel(&self) {
        *self.flag.lock() = true;
        self.changed.notify_all();
    }

    /// Whether the prompt was cancelled.
    pub fn is_cancelled(&self) -> bool {
        *self.flag.lock()
    }

    /// Waits until `deadline` (forever if `None`) or until cancelled; true if cancelled.
    pub fn wait_until(&self, deadline: Option<Instant>) -> bool {
        let mut cancelled = self.flag.lock();
        while !*cancelled {
            let timeout = match deadline {
                None => Duration::from_secs(3600),
                Some(d) => match d.checked_duration_since(Instant::now()) {
                    Some(left) if !left.is_zero() => left,
                    _ => return false,
                },
            };
            self.changed.wait_for(&mut cancelled, timeout);
        }
        true
    }

    /// Waits for `d` or until cancelled; true if cancelled.
    pub fn wait_for(&self, d: Duration) -> bool {
        self.wait_until(Instant::now().checked_add(d))
    }
}

/// What the script does after a step.
enum Flow {
    /// Run the next command.
    Next,
    /// The prompt was cancelled: answer `cancelled`.
    Cancelled,
    /// `hang`: answer only if cancelled.
    Hang,
    /// `error`: answer with this JSON-RPC error.
    Error(String),
}

/// A prompt turn, owned by its thread.
pub struct Turn {
    agent: Arc<Agent>,
    request_id: Value,
    session_id: String,
    cwd: PathBuf,
    cancel: Arc<Cancel>,
    /// The prompt blocks, recorded as `user_message_chunk`s.
    prompt: Vec<Value>,
    /// The text blocks joined by newlines.
    script: String,
    stop_reason: String,
    usage: Option<(u64, u64)>,
    /// The previous `mcp` call's `structuredContent` (for `$last.<field>`).
    last_mcp: Value,
}

impl Turn {
    /// A turn for `session/prompt` request `request_id` with the given prompt blocks.
    pub fn new(
        agent: Arc<Agent>,
        request_id: Value,
        session_id: String,
        cwd: PathBuf,
        cancel: Arc<Cancel>,
        prompt: &[Value],
    ) -> Self {
        let script = prompt
            .iter()
            .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
            .filter_map(|b| b.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n");
        Turn {
            agent,
            request_id,
            session_id,
            cwd,
            cancel,
            prompt: prompt.to_vec(),
            script,
            stop_reason: "end_turn".to_owned(),
            usage: None,
            last_mcp: Value::Null,
        }
    }

    /// Runs the script and answers the prompt.
    pub fn run(mut self) {
        let mut recorder = match history::path(&self.agent.config.state_dir, &self.session_id) {
            Some(path) => Recorder::open(&path),
            None => Recorder::disabled(),
        };
        for block in std::mem::take(&mut self.prompt) {
            recorder.append(&json!({"sessionUpdate": "user_message_chunk", "content": block}));
        }
        let lines: Vec<String> = self.script.lines().map(str::to_owned).collect();
        let flow = self.run_lines(&mut recorder, &lines, true);
        if let Some(path) = self.unfinished_path() {
            // The turn ended (it was not interrupted): nothing to resume.
            let _ = std::fs::remove_file(path);
        }
        if let Flow::Hang = flow {
            self.cancel.wait_until(None);
        }
        let answer = match flow {
            Flow::Error(message) => Err(RpcError::new(code::INTERNAL_ERROR, message)),
            _ if self.cancel.is_cancelled() => Ok(self.result("cancelled")),
            _ => Ok(self.result(&self.stop_reason)),
        };
        self.agent.end_turn(&self.session_id, &self.cancel);
        let message = match answer {
            Ok(result) => wire::response(&self.request_id, &result),
            Err(e) => wire::error_response(&self.request_id, &e),
        };
        self.agent.out.send(&message);
    }

    /// Runs script lines; before each `ask`, the lines from it on are saved, so that a resumed
    /// turn (`Command::Resume`, only at the top level) can run them again.
    fn run_lines(&mut self, recorder: &mut Recorder, lines: &[String], top: bool) -> Flow {
        for (index, line) in lines.iter().enumerate() {
            let Some(command) = script::parse_line(line) else { continue };
            if self.cancel.is_cancelled() {
                return Flow::Cancelled;
            }
            let flow = match command {
                Command::Resume if top => self.resume(recorder),
                Command::Resume => Flow::Next,
                Command::Ask { .. } | Command::Elicit(_) => {
                    self.save_unfinished(&lines[index..]);
                    self.step(recorder, command)
                }
                command => self.step(recorder, command),
            };
            if !matches!(flow, Flow::Next) {
                return flow;
            }
        }
        Flow::Next
    }

    /// Where the unfinished rest of an interrupted script is kept.
    fn unfinished_path(&self) -> Option<PathBuf> {
        history::path(&self.agent.config.state_dir, &self.session_id).map(|p| p.with_extension("unfinished"))
    }

    fn save_unfinished(&self, lines: &[String]) {
        if let Some(path) = self.unfinished_path()
            && let Err(e) = std::fs::write(&path, lines.join("\n"))
        {
            eprintln!("fakeagent: cannot save the unfinished script in {}: {e}", path.display());
        }
    }

    /// Runs what an interrupted turn of this session left unfinished (nothing if none).
    fn resume(&mut self, recorder: &mut Recorder) -> Flow {
        let Some(path) = self.unfinished_path() else { return Flow::Next };
        let Ok(text) = std::fs::read_to_string(&path) else {
            self.emit(recorder, chunk("agent_message_chunk", "fakeagent: nothing to resume"));
            return Flow::Next;
        };
        let _ = std::fs::remove_file(&path);
        self.emit(recorder, chunk("agent_message_chunk", "fakeagent: resuming"));
        let lines: Vec<String> = text.lines().map(str::to_owned).collect();
        self.run_lines(recorder, &lines, false)
    }

    fn result(&self, stop_reason: &str) -> Value {
        let mut result = json!({"stopReason": stop_reason});
        if let Some((input, output)) = self.usage {
            result["usage"] = json!({
                "inputTokens": input,
                "outputTokens": output,
                "totalTokens": input.saturating_add(output),
            });
        }
        result
    }

    /// Records and sends one update.
    /// Three updates in one write (so one tunnel frame): `before the unstorable line`, one whose
    /// text is a lone surrogate escape, `after the unstorable line`. Only the two good ones are
    /// recorded for a load (the history file is JSON values, which cannot hold it).
    fn unstorable(&self, recorder: &mut Recorder) {
        let (before, after) = (
            chunk("agent_message_chunk", "before the unstorable line"),
            chunk("agent_message_chunk", "after the unstorable line"),
        );
        let session = Value::String(self.session_id.clone()).to_string();
        let bad = r#"{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"\ud800"}}"#;
        let mut block = Vec::new();
        wire::push_session_update_line(&mut block, &session, &before.to_string());
        wire::push_session_update_line(&mut block, &session, bad);
        wire::push_session_update_line(&mut block, &session, &after.to_string());
        recorder.append(&before);
        recorder.append(&after);
        self.agent.out.lines(&block);
    }

    fn emit(&self, recorder: &mut Recorder, update: Value) {
        recorder.append(&update);
        self.agent.out.send(&wire::session_update(&self.session_id, &update));
    }

    fn step(&mut self, rec: &mut Recorder, command: Command) -> Flow {
        match command {
            Command::Text(text) => self.emit(rec, chunk("agent_message_chunk", &text)),
            Command::Think(text) => self.emit(rec, chunk("agent_thought_chunk", &text)),
            Command::Echo(line) => {
                self.emit(rec, chunk("agent_message_chunk", &format!("fakeagent: {line}")));
            }
            Command::Write { path, content } => self.edit(rec, &path, &content, false),
            Command::Append { path, content } => self.edit(rec, &path, &content, true),
            Command::Run(command) => return self.run_shell(rec, &command),
            Command::Fetch { url, headers } => self.fetch(rec, &url, &headers),
            Command::Mcp { tool, args } => self.mcp(rec, &tool, &args),
            Command::McpTools => {
                let text = match self.agent.tools_at_start(&self.session_id) {
                    Some(Ok(names)) => format!("mcp tools at session start: {}", names.join(", ")),
                    Some(Err(e)) => format!("mcp tools at session start failed: {e}"),
                    None => "mcp tools at session start: not listed".to_owned(),
                };
                self.emit(rec, chunk("agent_message_chunk", &format!("{text}\n")));
            }
            Command::Tool { kind, title } => {
                let id = self.agent.tool_call_id();
                self.emit(
                    rec,
                    json!({"sessionUpdate": "tool_call", "toolCallId": id,
                    "title": title, "kind": kind, "status": "pending"}),
                );
                self.emit(
                    rec,
                    json!({"sessionUpdate": "tool_call_update", "toolCallId": id,
                    "status": "completed"}),
                );
            }
            Command::Plan(entries) => {
                let entries: Vec<Value> = entries
                    .iter()
                    .enumerate()
                    .map(|(i, e)| {
                        let status = if i == 0 { "in_progress" } else { "pending" };
                        json!({"content": e, "priority": "medium", "status": status})
                    })
                    .collect();
                self.emit(rec, json!({"sessionUpdate": "plan", "entries": entries}));
            }
            Command::Ask { kind, title } => return self.ask(rec, &kind, &title),
            Command::Elicit(question) => return self.elicit(rec, &question),
            Command::Sleep(ms) => {
                if self.cancel.wait_for(Duration::from_millis(ms)) {
                    return Flow::Cancelled;
                }
            }
            Command::Flood { count, rate } => return self.flood(rec, count, rate),
            Command::Big(bytes) => {
                let text: String = (0..bytes).map(|i| char::from(b'a' + (i % 26) as u8)).collect();
                self.emit(rec, chunk("agent_message_chunk", &text));
            }
            Command::Unknown => {
                self.emit(rec, json!({"sessionUpdate": "fakeagent_future_variant", "detail": "x"}));
            }
            Command::Garbage => self.agent.out.line("this is not json {"),
            Command::Unstorable => self.unstorable(rec),
            Command::Stderr(words) => {
                let mut err = std::io::stderr().lock();
                let _ = writeln!(err, "{words}").and_then(|()| err.flush());
            }
            Command::Crash(code) => std::process::exit(code),
            Command::Hang => return Flow::Hang,
            // Only a script's own lines resume (see `run_lines`).
            Command::Resume => {}
            Command::Error(message) => return Flow::Error(message),
            Command::Stop(reason) => self.stop_reason = reason,
            Command::Usage { input, output } => self.usage = Some((input, output)),
            Command::Cost { amount, currency } => self.emit(
                rec,
                json!({"sessionUpdate": "usage_update", "used": 1000, "size": 200_000,
                    "cost": {"amount": amount, "currency": currency}}),
            ),
        }
        Flow::Next
    }

    /// `write` and `append`.
    fn edit(&self, rec: &mut Recorder, path: &str, content: &str, append: bool) {
        let id = self.agent.tool_call_id();
        let abs = self.cwd.join(path);
        let abs_text = abs.to_string_lossy().into_owned();
        let title = format!("{} {path}", if append { "Append" } else { "Write" });
        self.emit(
            rec,
            json!({"sessionUpdate": "tool_call", "toolCallId": id, "title": title,
            "kind": "edit", "status": "pending", "locations": [{"path": abs_text}]}),
        );
        let old = std::fs::read(&abs).ok().map(|b| String::from_utf8_lossy(&b).into_owned());
        let new = match (&old, append) {
            (Some(old), true) => format!("{old}{content}"),
            _ => content.to_owned(),
        };
        match write_file(&abs, content, append) {
            Ok(()) => self.emit(
                rec,
                json!({"sessionUpdate": "tool_call_update", "toolCallId": id,
                "status": "completed", "content": [{"type": "diff", "path": abs_text,
                "oldText": old, "newText": new}]}),
            ),
            Err(e) => self.emit(rec, failed(&id, &format!("cannot write {abs_text}: {e}"))),
        }
    }

    /// `run`: `sh -c` in the session cwd, killed if the prompt is cancelled.
    fn run_shell(&self, rec: &mut Recorder, command: &str) -> Flow {
        let id = self.agent.tool_call_id();
        self.emit(
            rec,
            json!({"sessionUpdate": "tool_call", "toolCallId": id, "title": command,
            "kind": "execute", "status": "pending", "rawInput": {"command": command}}),
        );
        match run_sh(command, &self.cwd, &self.cancel) {
            Ok(None) => Flow::Cancelled,
            Ok(Some((exit_code, output))) => {
                let status = if exit_code == Some(0) { "completed" } else { "failed" };
                self.emit(
                    rec,
                    json!({"sessionUpdate": "tool_call_update", "toolCallId": id,
                    "status": status,
                    "content": [{"type": "content", "content": {"type": "text", "text": output}}],
                    "rawOutput": {"exitCode": exit_code}}),
                );
                Flow::Next
            }
            Err(e) => {
                self.emit(rec, failed(&id, &format!("cannot run sh: {e}")));
                Flow::Next
            }
        }
    }

    /// `fetch`: one HTTPS GET (bounded by [`fetch::TIMEOUT`]); the output is the status line
    /// and the first [`MAX_FETCH_OUTPUT`] bytes of the body.
    fn fetch(&self, rec: &mut Recorder, url: &str, headers: &[(String, String)]) {
        let id = self.agent.tool_call_id();
        self.emit(
            rec,
            json!({"sessionUpdate": "tool_call", "toolCallId": id, "title": format!("GET {url}"),
            "kind": "fetch", "status": "pending", "rawInput": {"url": url}}),
        );
        let env = |name: &str| std::env::var(name).ok();
        let expanded: Vec<(String, String)> =
            headers.iter().map(|(name, value)| (name.clone(), fetch::expand(value, &env))).collect();
        match fetch::get(url, &expanded, &env) {
            Ok(response) => {
                let shown = &response.body[..response.body.len().min(MAX_FETCH_OUTPUT)];
                let text = format!("{}\n\n{}", response.status_line, String::from_utf8_lossy(shown));
                let status = if (200..300).contains(&response.status) { "completed" } else { "failed" };
                self.emit(
                    rec,
                    json!({"sessionUpdate": "tool_call_update", "toolCallId": id, "status": status,
                    "content": [{"type": "content", "content": {"type": "text", "text": text}}],
                    "rawOutput": {"status": response.status, "fromProxy": response.from_proxy}}),
                );
            }
            Err(e) => self.emit(rec, failed(&id, &format!("fetch {url}: {e}"))),
        }
    }

    /// `mcp`: a tool call of the first MCP server the client offered; its text is reported as
    /// the tool call's output and as a message (`mcp <tool>: <text>`).
    fn mcp(&mut self, rec: &mut Recorder, tool: &str, args: &str) {
        let id = self.agent.tool_call_id();
        let args = super::mcp::substitute(args, &self.last_mcp);
        self.emit(
            rec,
            json!({"sessionUpdate": "tool_call", "toolCallId": id, "title": format!("mcp {tool}"),
            "kind": "other", "status": "pending", "rawInput": {"tool": tool, "arguments": args}}),
        );
        let env = |name: &str| std::env::var(name).ok();
        let outcome = match (self.agent.mcp_servers(&self.session_id).first(), serde_json::from_str::<Value>(&args)) {
            (None, _) => Err("the client offered no MCP server over HTTP".to_owned()),
            (_, Err(e)) => Err(format!("the arguments are not JSON: {e}")),
            (Some(server), Ok(arguments)) => super::mcp::call(server, tool, arguments, &env),
        };
        match outcome {
            Ok(result) => {
                let text = super::mcp::text(&result);
                let is_error = result.get("isError").and_then(Value::as_bool).unwrap_or(false);
                self.last_mcp = result.get("structuredContent").cloned().unwrap_or(Value::Null);
                let status = if is_error { "failed" } else { "completed" };
                self.emit(
                    rec,
                    json!({"sessionUpdate": "tool_call_update", "toolCallId": id, "status": status,
                    "content": [{"type": "content", "content": {"type": "text", "text": text}}],
                    "rawOutput": result}),
                );
                self.emit(rec, chunk("agent_message_chunk", &format!("mcp {tool}: {text}\n")));
            }
            Err(e) => {
                self.emit(rec, failed(&id, &format!("mcp {tool}: {e}")));
                self.emit(rec, chunk("agent_message_chunk", &format!("mcp {tool} failed: {e}\n")));
            }
        }
    }

    /// `ask`: a pending tool call and a `session/request_permission` to the client.
    fn ask(&self, rec: &mut Recorder, kind: &str, title: &str) -> Flow {
        let id = self.agent.tool_call_id();
        self.emit(
            rec,
            json!({"sessionUpdate": "tool_call", "toolCallId": id, "title": title,
            "kind": kind, "status": "pending"}),
        );
        let options: Vec<Value> = PERMISSION_OPTIONS
            .iter()
            .map(|(option_id, name, kind)| json!({"optionId": option_id, "name": name, "kind": kind}))
            .collect();
        let params = json!({"sessionId": self.session_id,
            "toolCall": {"toolCallId": id, "title": title, "kind": kind}, "options": options});
        let Some(response) = self.ask_client("session/request_permission", params) else { return Flow::Cancelled };
        let outcome = response.as_ref().and_then(|r| r.pointer("/result/outcome"));
        let chosen = match outcome {
            Some(o) if o.get("outcome").and_then(Value::as_str) == Some("selected") => {
                o.get("optionId").and_then(Value::as_str)
            }
            _ => None,
        };
        let allowed =
            chosen.is_some_and(|c| PERMISSION_OPTIONS.iter().any(|(o, _, kind)| *o == c && kind.starts_with("allow")));
        // When the answer arrived, for benchmarks (µs since the Unix epoch).
        let answered_at_us = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX));
        let mut said = chunk("agent_message_chunk", &format!("permission: {}", chosen.unwrap_or("cancelled")));
        said["_meta"] = json!({"fakeagent": {"answeredAtUs": answered_at_us}});
        self.emit(rec, said);
        let status = if allowed { "completed" } else { "failed" };
        self.emit(
            rec,
            json!({"sessionUpdate": "tool_call_update", "toolCallId": id,
            "status": status}),
        );
        Flow::Next
    }

    /// `elicit`: asks the client a question of its own and says what came back
    /// (`elicitation: accept <answer>`, `elicitation: decline`, …).
    fn elicit(&self, rec: &mut Recorder, question: &str) -> Flow {
        if !self.agent.elicitation_form.load(std::sync::atomic::Ordering::Relaxed) {
            self.emit(rec, chunk("agent_message_chunk", "elicitation: the client does not take questions"));
            return Flow::Next;
        }
        let params = json!({"sessionId": self.session_id, "mode": "form", "message": question,
            "requestedSchema": {"type": "object", "properties": {"answer": {"type": "string", "title": "Answer"}},
            "required": ["answer"]}});
        let Some(response) = self.ask_client("elicitation/create", params) else { return Flow::Cancelled };
        let result = response.as_ref().and_then(|r| r.get("result"));
        let said = match result.and_then(|r| r.get("action")).and_then(Value::as_str) {
            Some("accept") => {
                let answer = result.and_then(|r| r.pointer("/content/answer")).and_then(Value::as_str).unwrap_or("");
                format!("elicitation: accept {answer}")
            }
            Some(action) => format!("elicitation: {action}"),
            None => "elicitation: no answer".to_owned(),
        };
        self.emit(rec, chunk("agent_message_chunk", &said));
        Flow::Next
    }

    /// Sends a request to the client and waits for its answer: `None` when the prompt was
    /// cancelled meanwhile (the request is forgotten), `Some(None)` when no answer can come.
    fn ask_client(&self, method: &str, params: Value) -> Option<Option<Value>> {
        let (tx, rx) = mpsc::channel();
        let key = self.agent.request(method, params, tx);
        loop {
            if self.cancel.is_cancelled() {
                self.agent.forget(&key);
                return None;
            }
            match rx.recv_timeout(POLL) {
                Ok(response) => return Some(Some(response)),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => return Some(None),
            }
        }
    }

    /// `flood`: `count` chunks paced against one start instant. Unpaced (`rate` 0), the chunks
    /// go out in blocks of whole lines ([`FLOOD_BLOCK_BYTES`]), each block one write to stdout
    /// and one to the history: the stand-in's own cost stays small beside what it measures.
    fn flood(&self, rec: &mut Recorder, count: u64, rate: f64) -> Flow {
        if rate <= 0.0 {
            return self.flood_unpaced(rec, count);
        }
        let start = Instant::now();
        for i in 1..=count {
            // Where chunk i is due; None (wait until cancelled) if that is out of range.
            let due =
                Duration::try_from_secs_f64((i - 1) as f64 / rate).ok().and_then(|offset| start.checked_add(offset));
            if due.is_none_or(|due| due > Instant::now()) && self.cancel.wait_until(due) {
                return Flow::Cancelled;
            }
            if self.cancel.is_cancelled() {
                return Flow::Cancelled;
            }
            self.emit(rec, flood_chunk(i));
        }
        Flow::Next
    }

    fn flood_unpaced(&self, rec: &mut Recorder, count: u64) -> Flow {
        let session = Value::String(self.session_id.clone()).to_string();
        let mut wire = Vec::with_capacity(FLOOD_BLOCK_BYTES + 1024);
        let mut history = Vec::with_capacity(FLOOD_BLOCK_BYTES + 1024);
        for i in 1..=count {
            if self.cancel.is_cancelled() {
                return Flow::Cancelled;
            }
            let update = flood_chunk(i).to_string();
            history.extend_from_slice(update.as_bytes());
            history.push(b'\n');
            wire::push_session_update_line(&mut wire, &session, &update);
            if wire.len() >= FLOOD_BLOCK_BYTES || i == count {
                rec.append_lines(&history);
                self.agent.out.lines(&wire);
                history.clear();
                wire.clear();
            }
        }
        Flow::Next
    }
}

/// How many bytes of an unpaced flood's lines go out in one write.
const FLOOD_BLOCK_BYTES: usize = 32 * 1024;

/// Flood chunk `i`, stamped with the wall clock when it was made (microseconds).
fn flood_chunk(i: u64) -> Value {
    let emitted_at_us =
        SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX));
    let mut update = chunk("agent_message_chunk", &format!("flood {i}"));
    update["_meta"] = json!({"fakeagent": {"emittedAtUs": emitted_at_us, "i": i}});
    update
}

/// The options of every permission request: id, name, kind.
const PERMISSION_OPTIONS: [(&str, &str, &str); 4] = [
    ("allow-once", "Allow once", "allow_once"),
    ("allow-always", "Always allow", "allow_always"),
    ("reject-once", "Reject", "reject_once"),
    ("reject-always", "Always reject", "reject_always"),
];

fn chunk(kind: &str, text: &str) -> Value {
    json!({"sessionUpdate": kind, "content": {"type": "text", "text": text}})
}

fn failed(tool_call_id: &str, error: &str) -> Value {
    json!({"sessionUpdate": "tool_call_update", "toolCallId": tool_call_id, "status": "failed",
        "content": [{"type": "content", "content": {"type": "text", "text": error}}]})
}

fn write_file(path: &Path, content: &str, append: bool) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let mut file = std::fs::OpenOptions::new().create(true).write(true).append(append).truncate(!append).open(path)?;
    file.write_all(content.as_bytes())
}

/// Runs `sh -c command` in `cwd` with stdout and stderr on one pipe. Returns the exit code
/// (`None` if killed by a signal) and the first [`MAX_RUN_OUTPUT`] bytes of output, or
/// `Ok(None)` if cancelled (the child is killed).
fn run_sh(command: &str, cwd: &Path, cancel: &Cancel) -> std::io::Result<Option<(Option<i32>, String)>> {
    let (mut reader, writer) = std::io::pipe()?;
    let mut child = {
        let mut cmd = Process::new("sh");
        cmd.arg("-c").arg(command).current_dir(cwd).stdin(Stdio::null()).stdout(writer.try_clone()?).stderr(writer);
        cmd.spawn()?
        // `cmd` drops here, closing our copies of the pipe's write end.
    };
    let output = Arc::new(Mutex::new(Vec::new()));
    let (done_tx, done_rx) = mpsc::channel::<()>();
    let sink = output.clone();
    let drain = std::thread::Builder::new().name("run output".into()).spawn(move || {
        let mut buf = [0u8; 8192];
        while let Ok(n) = reader.read(&mut buf) {
            if n == 0 {
                break;
            }
            let mut out = sink.lock();
            let room = MAX_RUN_OUTPUT.saturating_sub(out.len());
            out.extend_from_slice(&buf[..n.min(room)]);
        }
        let _ = done_tx.send(());
    });
    if let Err(e) = drain {
        let _ = child.kill();
        let _ = child.wait();
        return Err(e);
    }
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        if cancel.wait_for(POLL) {
            let _ = child.kill();
            let _ = child.wait();
            return Ok(None);
        }
    };
    // Background processes the command started may hold the pipe open: give them a moment,
    // then report what arrived.
    let drained_by = Instant::now() + Duration::from_millis(500);
    while Instant::now() < drained_by {
        match done_rx.recv_timeout(POLL) {
            Err(RecvTimeoutError::Timeout) if !cancel.is_cancelled() => {}
            _ => break,
        }
    }
    let bytes = std::mem::take(&mut *output.lock());
    Ok(Some((status.code(), String::from_utf8_lossy(&bytes).into_owned())))
}
