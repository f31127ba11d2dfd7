//! A minimal ACP client harness around a spawned `fakeagent` process.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// How long any single wait may take before the test fails.
pub const DEADLINE: Duration = Duration::from_secs(20);

/// A directory under the system temp dir, removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> Self {
        static N: AtomicU64 = AtomicU64::new(0);
        let nanos =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.subsec_nanos()).unwrap_or(0);
        let path = std::env::temp_dir().join(format!(
            "fakeagent-test-{tag}-{}-{}-{nanos}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&path).unwrap();
        TempDir(path)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }

    pub fn str(&self) -> &str {
        self.0.to_str().unwrap()
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A running fakeagent.
pub struct Agent {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: Receiver<String>,
    stderr: Receiver<String>,
    next_id: u64,
}

impl Agent {
    /// Starts fakeagent with HOME = `home` and the given extra environment.
    pub fn start(home: &Path, env: &[(&str, &str)]) -> Self {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_fakeagent"));
        cmd.env_remove("FAKEAGENT_CAPS")
            .env_remove("FAKEAGENT_HANG_ON")
            .env_remove("FAKEAGENT_STATE_DIR")
            .env("HOME", home)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().expect("spawn fakeagent");
        let stdin = child.stdin.take();
        let stdout = lines(child.stdout.take().unwrap());
        let stderr = lines(child.stderr.take().unwrap());
        Agent { child, stdin, stdout, stderr, next_id: 1 }
    }

    /// Writes one raw line to the agent's stdin.
    pub fn send_raw(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(line.as_bytes()).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
    }

    /// Writes raw bytes (not necessarily UTF-8) to the agent's stdin.
    pub fn send_bytes(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(bytes).unwrap();
        stdin.flush().unwrap();
    }

    pub fn send(&mut self, message: &Value) {
        self.send_raw(&message.to_string());
    }

    /// Sends a request and returns its id.
    pub fn request(&mut self, method: &str, params: Value) -> Value {
        let id = json!(self.next_id);
        self.next_id += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        id
    }

    pub fn notify(&mut self, method: &str, params: Value) {
        self.send(&json!({"jsonrpc": "2.0", "method": method, "params": params}));
    }

    /// The next stdout line within `timeout`, or None.
    pub fn line_within(&self, timeout: Duration) -> Option<String> {
        match self.stdout.recv_timeout(timeout) {
            Ok(line) => Some(line),
            Err(RecvTimeoutError::Timeout) => None,
            Err(RecvTimeoutError::Disconnected) => None,
        }
    }

    /// The next stdout message (a non-JSON line becomes a JSON string); fails after DEADLINE.
    pub fn next(&self) -> Value {
        let line = self.line_within(DEADLINE).expect("a line from fakeagent before the deadline");
        serde_json::from_str(&line).unwrap_or(Value::String(line))
    }

    /// Collects everything up to the response to `id`; returns (what came before, response).
    pub fn until_response(&self, id: &Value) -> (Vec<Value>, Value) {
        let mut before = Vec::new();
        loop {
            let message = self.next();
            if message.get("id") == Some(id) && message.get("method").is_none() {
                return (before, message);
            }
            before.push(message);
        }
    }

    /// A request and its response, with nothing expected in between.
    pub fn call(&mut self, method: &str, params: Value) -> Value {
        let id = self.request(method, params);
        let (before, response) = self.until_response(&id);
        assert!(before.is_empty(), "unexpected messages before the {method} response: {before:?}");
        response
    }

    pub fn initialize(&mut self) -> Value {
        self.call("initialize", json!({"protocolVersion": 1, "clientCapabilities": {}}))
    }

    pub fn new_session(&mut self, cwd: &Path) -> String {
        let r = self.call("session/new", json!({"cwd": cwd, "mcpServers": []}));
        r["result"]["sessionId"].as_str().expect("a sessionId").to_owned()
    }

    pub fn start_prompt(&mut self, session_id: &str, script: &str) -> Value {
        self.request("session/prompt", json!({"sessionId": session_id, "prompt": [{"type": "text", "text": script}]}))
    }

    /// Runs a prompt to its end; returns the `update` objects sent before the response, and
    /// the response. Fails on any other message in between.
    pub fn prompt(&mut self, session_id: &str, script: &str) -> (Vec<Value>, Value) {
        let id = self.start_prompt(session_id, script);
        let (before, response) = self.until_response(&id);
        (updates_of(session_id, before), response)
    }

    /// A stderr line containing `needle`, within DEADLINE.
    pub fn stderr_line_containing(&self, needle: &str) -> String {
        let end = Instant::now() + DEADLINE;
        loop {
            let left = end.saturating_duration_since(Instant::now());
            match self.stderr.recv_timeout(left) {
                Ok(line) if line.contains(needle) => return line,
                Ok(_) => {}
                Err(e) => panic!("no stderr line containing {needle:?}: {e}"),
            }
        }
    }

    /// Waits (with a deadline) for the process to exit.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let end = Instant::now() + timeout;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return Some(status);
            }
            if Instant::now() >= end {
                return None;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Closes stdin.
    pub fn close_stdin(&mut self) {
        self.stdin = None;
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Checks that every message is a `session/update` for `session_id`; returns the updates.
pub fn updates_of(session_id: &str, messages: Vec<Value>) -> Vec<Value> {
    messages
        .into_iter()
        .map(|m| {
            assert_eq!(m["method"], "session/update", "not a session/update: {m}");
            assert_eq!(m["params"]["sessionId"], session_id, "{m}");
            m["params"]["update"].clone()
        })
        .collect()
}

/// The text of a message/thought chunk update.
pub fn chunk_text(update: &Value) -> &str {
    update["content"]["text"].as_str().unwrap_or_else(|| panic!("no text in {update}"))
}

fn lines(pipe: impl std::io::Read + Send + 'static) -> Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(pipe).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

/// A fakeagent with its own temp HOME, already initialised, and a fresh work dir.
pub struct Fixture {
    pub agent: Agent,
    pub home: TempDir,
    pub work: TempDir,
}

impl Fixture {
    pub fn new(env: &[(&str, &str)]) -> Self {
        let home = TempDir::new("home");
        let work = TempDir::new("work");
        let mut agent = Agent::start(home.path(), env);
        let init = agent.initialize();
        assert_eq!(init["result"]["protocolVersion"], 1, "{init}");
        Fixture { agent, home, work }
    }

    pub fn session(&mut self) -> String {
        let cwd = self.work.0.clone();
        self.agent.new_session(&cwd)
    }
}
