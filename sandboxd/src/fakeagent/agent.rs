//! The agent's shared state and the stdin reader: it reads every line, answers requests,
//! routes the client's responses to the prompt thread waiting for them, and delivers
//! `session/cancel` to the running prompt of that session.

use std::collections::HashMap;
use std::hash::{BuildHasher, RandomState};
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::Sender;

use parking_lot::Mutex;
use serde_json::{Map, Value, json};

use super::config::Config;
use super::history;
use super::turn::{self, Cancel};
use super::wire::{self, Out, RpcError, code};

/// One session fakeagent knows in this process.
struct Session {
    /// Where relative script paths resolve and `run` commands run.
    cwd: PathBuf,
    /// The running prompt's cancel flag, if a prompt is running.
    turn: Option<Arc<Cancel>>,
    /// The MCP servers the client offered for it (`http` ones).
    mcp: Vec<super::mcp::Server>,
    /// What listing the first one's tools gave when `session/new` opened it (as real harnesses
    /// connect their MCP servers then, in the background): `None` until it is done.
    tools_at_start: Arc<Mutex<Option<ToolsListed>>>,
}

/// The names of an MCP server's tools, or why they could not be listed.
pub type ToolsListed = Result<Vec<String>, String>;

/// Everything the reader thread and the prompt threads share.
pub struct Agent {
    /// The settings from the environment.
    pub config: Config,
    /// The serialised stdout.
    pub out: Out,
    /// Sessions created, loaded or resumed in this process, by id.
    sessions: Mutex<HashMap<String, Session>>,
    /// Requests fakeagent sent to the client, by id (as JSON text), and who waits for the answer.
    pending: Mutex<HashMap<String, Sender<Value>>>,
    /// Numbers `call-N` tool call ids.
    next_call: AtomicU64,
    /// Numbers fakeagent's own request ids.
    next_request: AtomicU64,
    /// Whether the client advertised `elicitation.form` at `initialize` (like Claude Code, the
    /// fake asks its own questions only then).
    pub elicitation_form: std::sync::atomic::AtomicBool,
    /// Whether `authenticate` succeeded with the required method (`FAKEAGENT_REQUIRE_AUTH`).
    authenticated: std::sync::atomic::AtomicBool,
}

/// How a request gets answered.
enum Reply {
    /// Answer now with this result or error.
    Now(Result<Value, RpcError>),
    /// A prompt thread answers when the turn ends.
    Later,
}

impl Agent {
    /// A fresh agent writing to `out`.
    pub fn new(config: Config, out: Out) -> Arc<Self> {
        Arc::new(Agent {
            config,
            out,
            sessions: Mutex::new(HashMap::new()),
            pending: Mutex::new(HashMap::new()),
            next_call: AtomicU64::new(1),
            next_request: AtomicU64::new(1),
            elicitation_form: std::sync::atomic::AtomicBool::new(false),
            authenticated: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// Reads messages from `input` until end of input.
    pub fn serve(self: &Arc<Self>, mut input: impl BufRead) -> std::io::Result<()> {
        let mut line = Vec::new();
        loop {
            line.clear();
            if input.read_until(b'\n', &mut line)? == 0 {
                return Ok(());
            }
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            match serde_json::from_slice::<Value>(&line) {
                Ok(message) => self.handle(message),
                Err(e) => eprintln!("fakeagent: parse error, ignoring input line: {e}"),
            }
        }
    }

    /// A new unique tool call id, `call-N`.
    pub fn tool_call_id(&self) -> String {
        format!("call-{}", self.next_call.fetch_add(1, Ordering::Relaxed))
    }

    /// Sends a request to the client; its response goes to `reply`. Returns the request id
    /// key to pass to [`Agent::forget`].
    pub fn request(&self, method: &str, params: Value, reply: Sender<Value>) -> String {
        let id = json!(format!("fa-req-{}", self.next_request.fetch_add(1, Ordering::Relaxed)));
        let key = id.to_string();
        self.pending.lock().insert(key.clone(), reply);
        self.out.send(&agenthold_plumbing::jsonrpc::request(&id, method, &params));
        key
    }

    /// Stops waiting for the answer to a request; a late answer is then ignored.
    pub fn forget(&self, key: &str) {
        self.pending.lock().remove(key);
    }

    /// Marks the turn of `session_id` finished (if `cancel` is still its turn), so the session
    /// takes a new prompt. Called before the prompt is answered.
    pub fn end_turn(&self, session_id: &str, cancel: &Arc<Cancel>) {
        if let Some(s) = self.sessions.lock().get_mut(session_id)
            && s.turn.as_ref().is_some_and(|t| Arc::ptr_eq(t, cancel))
        {
            s.turn = None;
        }
    }

    fn handle(self: &Arc<Self>, message: Value) {
        let Value::Object(msg) = message else {
            eprintln!("fakeagent: invalid message (not a JSON object), ignoring it");
            return;
        };
        let id = msg.get("id").cloned();
        let valid_id = id.as_ref().is_none_or(|id| id.is_string() || id.is_number() || id.is_null());
        let version_ok = msg.get("jsonrpc").and_then(Value::as_str) == Some("2.0");
        let invalid = |why: &str| match &id {
            Some(id) => {
                let id = if valid_id { id.clone() } else { Value::Null };
                let err = RpcError::new(code::INVALID_REQUEST, format!("invalid request: {why}"));
                self.out.send(&wire::error_response(&id, &err));
            }
            None => eprintln!("fakeagent: invalid message ({why}), ignoring it"),
        };
        if !version_ok {
            return invalid("jsonrpc must be \"2.0\"");
        }
        if !valid_id {
            return invalid("id must be a string, a number or null");
        }
        match (msg.get("method"), id.clone()) {
            (Some(Value::String(method)), Some(id)) => {
                let params = msg.get("params").cloned().unwrap_or(Value::Null);
                self.request_from_client(id, method, &params);
            }
            (Some(Value::String(method)), None) => {
                self.notification(method, msg.get("params").unwrap_or(&Value::Null));
            }
            (Some(_), _) => invalid("method must be a string"),
            (None, Some(id)) if msg.contains_key("result") || msg.contains_key("error") => {
                let waiter = self.pending.lock().remove(&id.to_string());
                match waiter {
                    Some(tx) => {
                        let _ = tx.send(Value::Object(msg));
                    }
                    None => eprintln!("fakeagent: ignoring a response to unknown request {id}"),
                }
            }
            (None, _) => invalid("no method, and not a response"),
        }
    }

    fn notification(&self, method: &str, params: &Value) {
        if method != "session/cancel" {
            return;
        }
        let Some(session_id) = params.get("sessionId").and_then(Value::as_str) else {
            eprintln!("fakeagent: session/cancel without a sessionId, ignoring it");
            return;
        };
        let turn = self.sessions.lock().get(session_id).and_then(|s| s.turn.clone());
        if let Some(cancel) = turn {
            cancel.cancel();
        }
    }

    fn request_from_client(self: &Arc<Self>, id: Value, method: &str, params: &Value) {
        if self.config.stderr {
            eprintln!("fakeagent: handling {method} (request {id})");
        }
        if self.config.hang_on.as_deref() == Some(method) {
            return;
        }
        let reply = match method {
            "initialize" => {
                let form = params.pointer("/clientCapabilities/elicitation/form").is_some_and(Value::is_object);
                self.elicitation_form.store(form, Ordering::Relaxed);
                let terminal = params.pointer("/clientCapabilities/auth/terminal") == Some(&Value::Bool(true));
                Reply::Now(Ok(self.initialize(terminal)))
            }
            "authenticate" => Reply::Now(self.authenticate(params)),
            "session/new" | "session/load" | "session/resume" if !self.signed_in() => Reply::Now(Err(RpcError::new(
                code::AUTH_REQUIRED,
                "authentication required (FAKEAGENT_REQUIRE_AUTH): call authenticate first".to_owned(),
            ))),
            "session/new" => Reply::Now(self.new_session(params)),
            "session/load" if self.config.load => match self.load(params) {
                // Answered first, the history after (FAKEAGENT_REPLAY_LATE).
                Ok((session_id, history)) if self.config.replay_late => {
                    self.out.send(&wire::response(&id, &json!({})));
                    self.replay(&session_id, &history);
                    return;
                }
                Ok((session_id, history)) => {
                    self.replay(&session_id, &history);
                    Reply::Now(Ok(json!({})))
                }
                Err(e) => Reply::Now(Err(e)),
            },
            "session/resume" if self.config.resume => Reply::Now(self.resume(params)),
            "session/prompt" => match self.prompt(&id, params) {
                Ok(()) => Reply::Later,
                Err(e) => Reply::Now(Err(e)),
            },
            _ => Reply::Now(Err(RpcError::method_not_found(method))),
        };
        match reply {
            Reply::Now(Ok(result)) => self.out.send(&wire::response(&id, &result)),
            Reply::Now(Err(e)) => self.out.send(&wire::error_response(&id, &e)),
            Reply::Later => {}
        }
    }

    /// Whether sessions may open: no authentication required, or it was done.
    fn signed_in(&self) -> bool {
        self.config.require_auth.is_none() || self.authenticated.load(Ordering::Relaxed)
    }

    /// `authenticate {methodId}`: the required method signs in; another is unknown.
    fn authenticate(&self, params: &Value) -> Result<Value, RpcError> {
        let Some(required) = &self.config.require_auth else { return Ok(json!({})) };
        match params.get("methodId").and_then(Value::as_str) {
            Some(method) if method == required => {
                self.authenticated.store(true, Ordering::Relaxed);
                Ok(json!({}))
            }
            _ => {
                Err(RpcError::new(code::INVALID_PARAMS, format!("unknown login method; this agent takes {required:?}")))
            }
        }
    }

    /// The `initialize` answer; a client that runs terminal logins is offered one
    /// (`fakeagent --login`, see `docs/fakeagent.md`).
    fn initialize(&self, terminal_auth: bool) -> Value {
        let mut session_caps = Map::new();
        if self.config.resume {
            session_caps.insert("resume".into(), json!({}));
        }
        let mut methods = Vec::new();
        if let Some(required) = &self.config.require_auth {
            methods.push(json!({"id": required, "name": "Fake key", "description": "authenticate with this id"}));
        }
        if terminal_auth {
            methods.push(json!({"id": "fake-login", "name": "Fake login", "description": "writes ~/.fakeagent/login",
                "type": "terminal", "args": ["--login"], "env": {}}));
        }
        json!({
            "protocolVersion": 1,
            "agentCapabilities": {
                "loadSession": self.config.load,
                "promptCapabilities": {"image": false, "audio": false, "embeddedContext": false},
                "sessionCapabilities": session_caps,
                "mcpCapabilities": {"http": true, "sse": false},
            },
            "authMethods": methods,
            "agentInfo": {"name": "fakeagent", "version": env!("CARGO_PKG_VERSION")},
        })
    }

    fn new_session(&self, params: &Value) -> Result<Value, RpcError> {
        let cwd = cwd_param(params)?;
        let (session_id, path) = loop {
            let id = format!("fa-{}", random_hex());
            if let Some(path) = history::path(&self.config.state_dir, &id)
                && !path.exists()
            {
                break (id, path);
            }
        };
        if let Err(e) = history::create(&path) {
            // The session works without history; only session/load and resume will not find it.
            eprintln!("fakeagent: cannot create history {}: {e}", path.display());
        }
        let mcp = super::mcp::servers(params);
        let tools_at_start = Arc::new(Mutex::new(None));
        if let Some(server) = mcp.first().cloned() {
            let listed = Arc::clone(&tools_at_start);
            std::thread::spawn(move || {
                let env = |name: &str| std::env::var(name).ok();
                *listed.lock() = Some(super::mcp::list_tools(&server, &env));
            });
        }
        self.sessions.lock().insert(session_id.clone(), Session { cwd, turn: None, mcp, tools_at_start });
        Ok(json!({"sessionId": session_id}))
    }

    /// The validated `sessionId` and `cwd` of a load or resume, and the session's history file.
    fn existing_session(&self, params: &Value) -> Result<(String, PathBuf, PathBuf), RpcError> {
        let session_id = session_id_param(params)?;
        let cwd = cwd_param(params)?;
        let path = history::path(&self.config.state_dir, session_id)
            .filter(|p| p.is_file())
            .ok_or_else(|| wire::unknown_session(session_id))?;
        if self.sessions.lock().get(session_id).is_some_and(|s| s.turn.is_some()) {
            return Err(busy(session_id));
        }
        Ok((session_id.to_owned(), cwd, path))
    }

    fn adopt(&self, session_id: String, cwd: PathBuf, mcp: Vec<super::mcp::Server>) {
        self.sessions
            .lock()
            .entry(session_id)
            .and_modify(|s| {
                s.cwd.clone_from(&cwd);
                s.mcp.clone_from(&mcp);
            })
            .or_insert(Session { cwd, turn: None, mcp, tools_at_start: Arc::default() });
    }

    /// The MCP servers offered for a session.
    pub fn mcp_servers(&self, session_id: &str) -> Vec<super::mcp::Server> {
        self.sessions.lock().get(session_id).map(|s| s.mcp.clone()).unwrap_or_default()
    }

    /// What listing the session's first MCP server's tools gave when `session/new` opened it
    /// (`None`: not done, or not opened by `session/new` in this process).
    pub fn tools_at_start(&self, session_id: &str) -> Option<ToolsListed> {
        self.sessions.lock().get(session_id).and_then(|s| s.tools_at_start.lock().clone())
    }

    /// `session/load`: the session is adopted; its id and history come back for [`Agent::replay`]
    /// (before the answer, or after it with `FAKEAGENT_REPLAY_LATE`).
    fn load(&self, params: &Value) -> Result<(String, Vec<Value>), RpcError> {
        let (session_id, cwd, path) = self.existing_session(params)?;
        let updates = history::read(&path)
            .map_err(|e| RpcError::new(code::INTERNAL_ERROR, format!("cannot read {}: {e}", path.display())))?;
        self.adopt(session_id.clone(), cwd, super::mcp::servers(params));
        Ok((session_id, updates))
    }

    /// Sends a session's history as `session/update`s.
    fn replay(&self, session_id: &str, history: &[Value]) {
        for update in history {
            self.out.send(&wire::session_update(session_id, update));
        }
        if self.config.stderr {
            eprintln!("fakeagent: replayed {} updates of {session_id}", history.len());
        }
    }

    fn resume(&self, params: &Value) -> Result<Value, RpcError> {
        let (session_id, cwd, _) = self.existing_session(params)?;
        self.adopt(session_id, cwd, super::mcp::servers(params));
        Ok(json!({}))
    }

    /// Starts the prompt thread, which answers the request when the turn ends.
    fn prompt(self: &Arc<Self>, id: &Value, params: &Value) -> Result<(), RpcError> {
        let session_id = session_id_param(params)?;
        let Some(blocks) = params.get("prompt").and_then(Value::as_array) else {
            return Err(RpcError::new(code::INVALID_PARAMS, "prompt must be an array"));
        };
        let cancel = Arc::new(Cancel::default());
        let cwd = {
            let mut sessions = self.sessions.lock();
            let session = sessions.get_mut(session_id).ok_or_else(|| wire::unknown_session(session_id))?;
            if session.turn.is_some() {
                return Err(busy(session_id));
            }
            session.turn = Some(cancel.clone());
            session.cwd.clone()
        };
        let turn = turn::Turn::new(self.clone(), id.clone(), session_id.to_owned(), cwd, cancel.clone(), blocks);
        std::thread::Builder::new().name(format!("prompt {session_id}")).spawn(move || turn.run()).map(drop).map_err(
            |e| {
                self.end_turn(session_id, &cancel);
                RpcError::new(code::INTERNAL_ERROR, format!("cannot start the prompt: {e}"))
            },
        )
    }
}

fn busy(session_id: &str) -> RpcError {
    RpcError::new(code::INVALID_REQUEST, format!("session {session_id:?} already has a running prompt"))
}

fn session_id_param(params: &Value) -> Result<&str, RpcError> {
    params
        .get("sessionId")
        .and_then(Value::as_str)
        .ok_or_else(|| RpcError::new(code::INVALID_PARAMS, "sessionId must be a string"))
}

fn cwd_param(params: &Value) -> Result<PathBuf, RpcError> {
    match params.get("cwd").and_then(Value::as_str) {
        Some(cwd) if Path::new(cwd).is_absolute() => Ok(PathBuf::from(cwd)),
        _ => Err(RpcError::new(code::INVALID_PARAMS, "cwd must be an absolute path")),
    }
}

/// 128 random bits as hex, from std's randomly keyed hasher (no `rand` dependency).
fn random_hex() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let seed = (std::time::SystemTime::now(), std::process::id(), COUNTER.fetch_add(1, Ordering::Relaxed));
    let a = RandomState::new().hash_one(seed);
    let b = RandomState::new().hash_one((a, seed));
    format!("{a:016x}{b:016x}")
}
