//! The test harness: a real `agenthold` process (so tests can SIGKILL and restart it) on its own
//! database and ports, with the Docker driver (or `AGENTHOLD_TEST_DRIVER=local`), and small
//! HTTP and WebSocket clients. Every wait has a deadline.
//!
//! The server binds port 0 and says where it listens (`agenthold … listening on <addr>` on its
//! stdout, the run's log file): no port is picked for it ahead, so none can be taken meanwhile.
//! A restart binds the ports of the first run again (sandboxes keep dialling the tunnel's).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde_json::{Value, json};
use sqlx::Connection;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

type Http = Client<hyper_util::client::legacy::connect::HttpConnector, Full<Bytes>>;

/// A running server under test.
pub struct TestServer {
    /// `http://127.0.0.1:<port>`.
    pub url: String,
    /// The bootstrap admin token.
    pub token: String,
    /// The server's own database.
    pub database_url: String,
    /// The address the server process is given for it, when not `database_url` (through a
    /// [`crate::support::db_gate::DbGate`]).
    server_database_url: Option<String>,
    /// Container/volume/network name prefix.
    pub instance: String,
    /// The data directory (logs are in it).
    pub data_dir: PathBuf,
    /// The API's port: 0 until the first run has bound one, then that one (a restart binds it
    /// again).
    api_port: u16,
    /// The tunnel's, likewise.
    tunnel_port: u16,
    /// The replicas' own listener (`AGENTHOLD_INTERNAL_LISTEN`), likewise.
    pub internal_port: u16,
    env: Vec<(String, String)>,
    child: Option<Child>,
    http: Http,
    runs: u32,
    /// Another replica of a server: its database and Docker objects are the first one's to
    /// clean up.
    replica: bool,
}

/// A port free when asked, for what must be named before it listens (a listener of the test's
/// own is better: it holds the port). Not for the server's: it binds port 0 and says where.
pub fn free_port(host: &str) -> u16 {
    let listener = std::net::TcpListener::bind((host, 0)).expect("binding an ephemeral port");
    listener.local_addr().expect("local addr").port()
}

/// Which driver the tests use.
pub fn driver() -> String {
    std::env::var("AGENTHOLD_TEST_DRIVER").unwrap_or_else(|_| "docker".to_owned())
}

pub(crate) async fn create_database() -> String {
    let admin = std::env::var("DATABASE_URL")
        .expect("DATABASE_URL (an admin URL of a Postgres cluster) must be set for the tests");
    let name = format!("agenthold_test_{}", uuid::Uuid::new_v4().simple());
    let mut connection = sqlx::PgConnection::connect(&admin).await.expect("connecting to DATABASE_URL");
    sqlx::query(&format!("CREATE DATABASE {name}")).execute(&mut connection).await.expect("creating the test database");
    let (base, query) = match admin.split_once('?') {
        Some((base, query)) => (base.to_owned(), format!("?{query}")),
        None => (admin.clone(), String::new()),
    };
    let base = base.rsplit_once('/').map(|(server, _)| server.to_owned()).unwrap_or(base);
    format!("{base}/{name}{query}")
}

impl TestServer {
    /// Starts a server with extra environment variables.
    pub async fn start_with(env: &[(&str, &str)]) -> Self {
        let database_url = create_database().await;
        Self::launch(env, database_url, None).await
    }

    /// Starts a server that reaches its database through a gate the test can shut (a Postgres
    /// outage as the server sees it).
    pub async fn start_behind_gate(env: &[(&str, &str)]) -> (Self, crate::support::db_gate::DbGate) {
        let database_url = create_database().await;
        let gate = crate::support::db_gate::DbGate::start(&database_url).await;
        let through_gate = gate.url(&database_url);
        (Self::launch(env, database_url, Some(through_gate)).await, gate)
    }

    /// A server on `database_url` (given to the process as `server_database_url` when set).
    async fn launch(env: &[(&str, &str)], database_url: String, server_database_url: Option<String>) -> Self {
        let instance = format!("aht{}", &uuid::Uuid::new_v4().simple().to_string()[..10]);
        let data_dir = std::env::temp_dir().join(&instance);
        std::fs::create_dir_all(&data_dir).expect("creating the data dir");
        let mut server = Self {
            url: String::new(),
            token: format!("test-token-{}", uuid::Uuid::new_v4().simple()),
            database_url,
            server_database_url,
            instance,
            data_dir,
            api_port: 0,
            tunnel_port: 0,
            internal_port: 0,
            env: env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            child: None,
            http: Client::builder(TokioExecutor::new()).build_http(),
            runs: 0,
            replica: false,
        };
        server.spawn().await;
        server
    }

    /// Another replica of this server (docs/replicas.md): the same database, instance, admin
    /// token and master key; its own ports, data directory and replica id; `env` on top of this
    /// server's own.
    pub async fn replica(&self, env: &[(&str, &str)]) -> Self {
        let data_dir = std::env::temp_dir().join(format!(
            "{}-r{}",
            self.instance,
            &uuid::Uuid::new_v4().simple().to_string()[..6]
        ));
        std::fs::create_dir_all(&data_dir).expect("creating the data dir");
        let mut own_env = self.env.clone();
        own_env.push(("AGENTHOLD_MASTER_KEY_FILE".into(), self.data_dir.join("master.key").display().to_string()));
        own_env.extend(env.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        let mut replica = Self {
            url: String::new(),
            token: self.token.clone(),
            database_url: self.database_url.clone(),
            server_database_url: self.server_database_url.clone(),
            instance: self.instance.clone(),
            data_dir,
            api_port: 0,
            tunnel_port: 0,
            internal_port: 0,
            env: own_env,
            child: None,
            http: Client::builder(TokioExecutor::new()).build_http(),
            runs: 0,
            replica: true,
        };
        replica.spawn().await;
        replica
    }

    /// Starts a server with the defaults.
    pub async fn start() -> Self {
        Self::start_with(&[]).await
    }

    /// Starts the process (on the ports of the first run, if there was one) and waits until it
    /// says where it listens and answers `/readyz`.
    async fn spawn(&mut self) {
        self.runs += 1;
        let log = std::fs::File::create(self.run_log()).expect("log file");
        let exe = PathBuf::from(env!("CARGO_BIN_EXE_agenthold"));
        let bin_dir = exe.parent().expect("bin dir").to_owned();
        let mut command = Command::new(&exe);
        command
            .env("DATABASE_URL", self.server_database_url.as_ref().unwrap_or(&self.database_url))
            .env("AGENTHOLD_LISTEN", format!("127.0.0.1:{}", self.api_port))
            .env("AGENTHOLD_INTERNAL_LISTEN", format!("127.0.0.1:{}", self.internal_port))
            .env("AGENTHOLD_TUNNEL_LISTEN", format!("0.0.0.0:{}", self.tunnel_port))
            .env("AGENTHOLD_DRIVER", driver())
            .env(
                "AGENTHOLD_IMAGE",
                std::env::var("AGENTHOLD_TEST_IMAGE").unwrap_or_else(|_| "agenthold/test:latest".to_owned()),
            )
            .env("AGENTHOLD_DATA_DIR", &self.data_dir)
            .env("AGENTHOLD_ADMIN_TOKEN", &self.token)
            .env("AGENTHOLD_SANDBOX_BIN_DIR", &bin_dir)
            .env("AGENTHOLD_INSTANCE", &self.instance)
            .env("AGENTHOLD_DEFAULT_MEMORY_MIB", "512")
            // The images the tests build and tag (a test may name its own list).
            .env("AGENTHOLD_ALLOWED_IMAGES", "agenthold/*,agenthold-test/*")
            // Density tests make hundreds of agents as one user (a test may set its own quotas).
            .env("AGENTHOLD_MAX_AGENTS_PER_WORKSPACE", "100000")
            .env("AGENTHOLD_MAX_AGENTS_PER_USER", "100000")
            // Density tests run many turns of one user's agents at once (tests/api/turn_limits.rs
            // sets its own).
            .env("AGENTHOLD_MAX_RUNNING_TURNS_PER_WORKSPACE", "0")
            .env("AGENTHOLD_MAX_RUNNING_TURNS_PER_USER", "0")
            // The schedule tests run every second or two.
            .env("AGENTHOLD_SCHEDULE_MIN_INTERVAL_SECS", "1")
            // No warm pool unless a test asks for one (tests/api/warm_pool.rs).
            .env("AGENTHOLD_WARM_POOL_SIZE", "0")
            // A master key is made in the data dir (tests that need production mode override it).
            .env("AGENTHOLD_MODE", "test")
            .env_remove("AGENTHOLD_MASTER_KEY")
            .env_remove("AGENTHOLD_MASTER_KEY_FILE")
            .env("RUST_LOG", "info,agenthold_server=debug")
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log"))
            .stderr(log);
        for (key, value) in &self.env {
            command.env(key, value);
        }
        self.child = Some(command.spawn().expect("starting agenthold"));
        let deadline = Instant::now() + Duration::from_secs(30);
        let ports = (self.api_port, self.tunnel_port, self.internal_port);
        self.api_port = self.bound("", deadline).await.port();
        self.tunnel_port = self.bound("tunnel ", deadline).await.port();
        self.internal_port = self.bound("internal ", deadline).await.port();
        assert!(
            ports == (0, 0, 0) || ports == (self.api_port, self.tunnel_port, self.internal_port),
            "a restart binds the first run's ports"
        );
        self.url = format!("http://127.0.0.1:{}", self.api_port);
        loop {
            if let Ok((200, _)) = self.try_request("GET", "/readyz", None).await {
                return;
            }
            assert!(Instant::now() < deadline, "the server did not become ready; log: {}", self.log());
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// This run's log file: the process's stdout and stderr.
    fn run_log(&self) -> PathBuf {
        self.data_dir.join(format!("server-{}.log", self.runs))
    }

    /// Where this run's `<which>`listener is bound (`which`: "" for the API, or "tunnel ",
    /// "internal ", "metrics "), once it said so: `agenthold <which>listening on <addr>`.
    fn said(&self, which: &str) -> Option<SocketAddr> {
        let prefix = format!("agenthold {which}listening on ");
        let log = std::fs::read_to_string(self.run_log()).ok()?;
        // Whole lines only: a line being written may be read half (`127.0.0.1:4` of `:4321`).
        let addr = log
            .split_inclusive('\n')
            .filter(|line| line.ends_with('\n'))
            .find_map(|line| line.strip_prefix(&prefix))?;
        Some(addr.trim().parse().unwrap_or_else(|e| panic!("{prefix}{addr}: {e}")))
    }

    /// [`Self::said`], waited for until `deadline` (or the process's end).
    async fn bound(&mut self, which: &str, deadline: Instant) -> SocketAddr {
        loop {
            if let Some(addr) = self.said(which) {
                return addr;
            }
            let exited = self.child.as_mut().and_then(|child| child.try_wait().ok().flatten());
            assert!(exited.is_none(), "the server exited ({exited:?}) before it listened; log: {}", self.log());
            assert!(
                Instant::now() < deadline,
                "the server did not say where its {which}listener is; log: {}",
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Where this run's metrics listener (`AGENTHOLD_METRICS_LISTEN`; port 0 is fine) is bound
    /// (before the server is ready, so said by now).
    pub fn metrics_addr(&self) -> SocketAddr {
        self.said("metrics ").unwrap_or_else(|| panic!("no metrics listener; log: {}", self.log()))
    }

    /// The server process's pid, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Kills the server with SIGKILL (no shutdown at all).
    /// The server's resident memory in KiB (`VmRSS`), while it runs.
    pub fn rss_kib(&self) -> Option<u64> {
        let pid = self.child.as_ref()?.id();
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
        let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
        line.split_whitespace().nth(1)?.parse().ok()
    }

    /// Sends SIGTERM (a graceful shutdown) and waits up to `timeout` for the process to end;
    /// whether it did.
    pub fn terminate(&mut self, timeout: Duration) -> bool {
        let Some(child) = self.child.as_mut() else { return true };
        let _ = Command::new("kill").args(["-TERM", &child.id().to_string()]).status();
        self.exited_within(timeout)
    }

    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Stops the server gracefully (SIGTERM, 20 s) and starts it again on the same database,
    /// ports and data directory (a rolling restart's step).
    pub async fn restart_gracefully(&mut self) {
        if !self.terminate(Duration::from_secs(20)) {
            self.kill();
        }
        self.spawn().await;
    }

    /// The API's port.
    pub fn api_port(&self) -> u16 {
        self.api_port
    }

    /// Sets (`Some`) or removes (`None`) a variable of the server's environment for its next
    /// start.
    pub fn set_env(&mut self, key: &str, value: Option<&str>) {
        self.env.retain(|(k, _)| k != key);
        if let Some(value) = value {
            self.env.push((key.to_owned(), value.to_owned()));
        }
    }

    /// Whether the server's process has ended (waited for up to `timeout`).
    pub fn exited_within(&mut self, timeout: Duration) -> bool {
        let Some(child) = self.child.as_mut() else { return true };
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if let Ok(Some(_)) = child.try_wait() {
                self.child = None;
                return true;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        false
    }

    /// Starts the server again on the same database and ports.
    pub async fn restart(&mut self) {
        self.kill();
        self.spawn().await;
    }

    /// Everything the server logged so far.
    pub fn log(&self) -> String {
        (1..=self.runs)
            .filter_map(|run| std::fs::read_to_string(self.data_dir.join(format!("server-{run}.log"))).ok())
            .collect::<Vec<_>>()
            .join("\n--- restart ---\n")
    }

    async fn try_request(&self, method: &str, path: &str, body: Option<Bytes>) -> Result<(u16, Value), String> {
        let mut request = hyper::Request::builder()
            .method(method)
            .uri(format!("{}{path}", self.url))
            .header("authorization", format!("Bearer {}", self.token));
        if body.is_some() {
            request = request.header("content-type", "application/json");
        }
        let request = request.body(Full::new(body.unwrap_or_default())).map_err(|e| e.to_string())?;
        let response = self.http.request(request).await.map_err(|e| e.to_string())?;
        let status = response.status().as_u16();
        let bytes = response.into_body().collect().await.map_err(|e| e.to_string())?.to_bytes();
        let value = if bytes.is_empty() { Value::Null } else { serde_json::from_slice(&bytes).unwrap_or(Value::Null) };
        Ok((status, value))
    }

    /// A request with a JSON body, an optional bearer token and extra headers; returns the status,
    /// the `Set-Cookie` header (empty if none) and the body.
    pub async fn raw_with_headers(
        &self,
        method: &str,
        path: &str,
        bearer: Option<&str>,
        headers: &[(&str, String)],
        body: Value,
    ) -> (u16, String, Value) {
        self.raw_at(&self.url, method, path, bearer, headers, body).await
    }

    /// [`Self::raw_with_headers`] to another of the server's listeners (`base`: `http://host:port`).
    pub async fn raw_at(
        &self,
        base: &str,
        method: &str,
        path: &str,
        bearer: Option<&str>,
        headers: &[(&str, String)],
        body: Value,
    ) -> (u16, String, Value) {
        let mut request = hyper::Request::builder()
            .method(method)
            .uri(format!("{base}{path}"))
            .header("content-type", "application/json");
        if let Some(token) = bearer {
            request = request.header("authorization", format!("Bearer {token}"));
        }
        for (name, value) in headers {
            request = request.header(*name, value);
        }
        let request = request.body(Full::new(Bytes::from(body.to_string()))).expect("request");
        let response = self.http.request(request).await.expect("request");
        let status = response.status().as_u16();
        let cookie =
            response.headers().get("set-cookie").and_then(|v| v.to_str().ok()).map(str::to_owned).unwrap_or_default();
        let bytes = response.into_body().collect().await.expect("body").to_bytes();
        let value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        (status, cookie, value)
    }

    /// Opens a session's stream with another user's token.
    pub async fn watch_as(&self, session_id: &str, token: &str) -> Watcher {
        let url = format!("ws://127.0.0.1:{}/api/v1/sessions/{session_id}/stream?after=0", self.api_port);
        let mut request = url.into_client_request().expect("ws request");
        request.headers_mut().insert("authorization", format!("Bearer {token}").parse().expect("header"));
        let (socket, _) = tokio_tungstenite::connect_async(request).await.expect("connecting the stream");
        Watcher { socket }
    }

    /// A request with a raw body (for malformed-input tests).
    pub async fn raw(&self, method: &str, path: &str, body: &str) -> (u16, Value) {
        self.try_request(method, path, Some(Bytes::from(body.to_owned()))).await.expect("request")
    }

    /// A request without the token.
    pub async fn anonymous(&self, method: &str, path: &str) -> u16 {
        let request = hyper::Request::builder()
            .method(method)
            .uri(format!("{}{path}", self.url))
            .body(Full::new(Bytes::new()))
            .expect("request");
        self.http.request(request).await.expect("request").status().as_u16()
    }

    /// GET.
    pub async fn get(&self, path: &str) -> (u16, Value) {
        self.try_request("GET", path, None).await.expect("request")
    }

    /// POST with a JSON body.
    pub async fn post(&self, path: &str, body: Value) -> (u16, Value) {
        self.try_request("POST", path, Some(Bytes::from(body.to_string()))).await.expect("request")
    }

    /// POST with a JSON body; an error when no answer came (the server went away).
    pub async fn try_post(&self, path: &str, body: Value) -> Result<(u16, Value), String> {
        self.try_request("POST", path, Some(Bytes::from(body.to_string()))).await
    }

    /// PUT with a JSON body.
    pub async fn put_json(&self, path: &str, body: Value) -> (u16, Value) {
        self.try_request("PUT", path, Some(Bytes::from(body.to_string()))).await.expect("request")
    }

    /// DELETE.
    pub async fn delete(&self, path: &str) -> (u16, Value) {
        self.try_request("DELETE", path, None).await.expect("request")
    }

    /// Creates an agent running the fake harness (with `extra` fields merged in).
    pub async fn create_agent(&self, extra: Value) -> String {
        let mut body =
            json!({"name": format!("a{}", &uuid::Uuid::new_v4().simple().to_string()[..12]), "harness": "fake"});
        if let (Some(body), Some(extra)) = (body.as_object_mut(), extra.as_object()) {
            body.extend(extra.clone());
        }
        let (status, agent) = self.post("/api/v1/agents", body).await;
        assert_eq!(status, 201, "creating an agent: {agent}");
        agent["id"].as_str().expect("agent id").to_owned()
    }

    /// Opens a session.
    pub async fn create_session(&self, agent_id: &str) -> String {
        let (status, session) = self.post(&format!("/api/v1/agents/{agent_id}/sessions"), json!({})).await;
        assert_eq!(status, 201, "creating a session: {session}");
        session["id"].as_str().expect("session id").to_owned()
    }

    /// Prompts a script; asserts it was accepted.
    pub async fn prompt(&self, session_id: &str, script: &str) -> Value {
        let (status, body) = self.post(&format!("/api/v1/sessions/{session_id}/prompt"), json!({"text": script})).await;
        assert_eq!(status, 202, "prompting: {body}");
        body
    }

    /// The whole log of a session.
    pub async fn events(&self, session_id: &str) -> Vec<Value> {
        let mut all = Vec::new();
        let mut after = 0;
        loop {
            let (status, page) =
                self.get(&format!("/api/v1/sessions/{session_id}/events?after={after}&limit=1000")).await;
            assert_eq!(status, 200, "{page}");
            let events = page["events"].as_array().cloned().unwrap_or_default();
            if events.is_empty() {
                return all;
            }
            after = events.last().and_then(|e| e["seq"].as_i64()).expect("seq");
            all.extend(events);
        }
    }

    /// The last lines each of this server's Docker sandboxes printed (sandboxd's log), for a
    /// failure's message; empty with another driver.
    pub fn sandbox_logs(&self) -> String {
        let listed = std::process::Command::new("docker")
            .args(["ps", "-a", "--format", "{{.Names}} {{.Status}}"])
            .args(["--filter", &format!("label=agenthold.instance={}", self.instance)])
            .output();
        let Ok(listed) = listed else { return String::new() };
        let mut out = String::new();
        for line in String::from_utf8_lossy(&listed.stdout).lines() {
            let name = line.split_whitespace().next().unwrap_or_default();
            let logs = std::process::Command::new("docker").args(["logs", "--tail", "30", name]).output();
            let text = logs
                .map(|o| String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr))
                .unwrap_or_default();
            out.push_str(&format!("--- {line}\n{text}\n"));
        }
        out
    }

    /// Waits until the session has `turns` turn_end events; returns the whole log.
    pub async fn wait_turns(&self, session_id: &str, turns: usize, timeout: Duration) -> Vec<Value> {
        let deadline = Instant::now() + timeout;
        loop {
            let events = self.events(session_id).await;
            if events.iter().filter(|e| e["type"] == "turn_end").count() >= turns {
                return events;
            }
            assert!(
                Instant::now() < deadline,
                "waited {timeout:?} for {turns} turn(s) to end; log so far: {}\n\nserver log:\n{}\n\nsandboxes:\n{}",
                serde_json::to_string_pretty(&events).unwrap_or_default(),
                self.log(),
                self.sandbox_logs()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Opens the session's stream from a cursor.
    pub async fn watch(&self, session_id: &str, after: &str) -> Watcher {
        let url = format!("ws://127.0.0.1:{}/api/v1/sessions/{session_id}/stream?after={after}", self.api_port);
        let mut request = url.into_client_request().expect("ws request");
        request.headers_mut().insert("authorization", format!("Bearer {}", self.token).parse().expect("header"));
        let (socket, _) = tokio_tungstenite::connect_async(request).await.expect("connecting the stream");
        Watcher { socket }
    }

    /// Opens any WebSocket of the API (`path` with its query) with `token`.
    pub async fn websocket(&self, path: &str, token: &str) -> Watcher {
        let url = format!("ws://127.0.0.1:{}{path}", self.api_port);
        let mut request = url.into_client_request().expect("ws request");
        request.headers_mut().insert("authorization", format!("Bearer {token}").parse().expect("header"));
        let (socket, _) = tokio_tungstenite::connect_async(request).await.expect("connecting the websocket");
        Watcher { socket }
    }

    /// The tunnel's port.
    pub fn tunnel_port(&self) -> u16 {
        self.tunnel_port
    }

    /// The agent's container name (Docker driver).
    pub fn container(&self, agent_id: &str) -> String {
        format!("{}-{agent_id}", self.instance)
    }

    /// The agent's network holder (Docker driver): the container whose network namespace, and
    /// so whose address, the sandbox has.
    pub fn network_holder(&self, agent_id: &str) -> String {
        format!("{}-netns-{agent_id}", self.instance)
    }
}

/// One stream connection.
pub struct Watcher {
    socket: tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>,
}

impl Watcher {
    /// The next event, or `None` on close or after `timeout`.
    pub async fn next(&mut self, timeout: Duration) -> Option<Value> {
        loop {
            let message = tokio::time::timeout(timeout, self.socket.next()).await.ok()??.ok()?;
            if let tokio_tungstenite::tungstenite::Message::Text(text) = message {
                return serde_json::from_str(text.as_str()).ok();
            }
        }
    }

    /// Whether the server closes the stream within `timeout` (events meanwhile are skipped).
    pub async fn closes_within(&mut self, timeout: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            match tokio::time::timeout_at(deadline, self.socket.next()).await {
                Err(_) => return false,
                Ok(None | Some(Err(_)) | Some(Ok(tokio_tungstenite::tungstenite::Message::Close(_)))) => return true,
                Ok(Some(Ok(_))) => {}
            }
        }
    }

    /// The close code the server sends within `timeout` (events meanwhile are skipped).
    pub async fn close_code(&mut self, timeout: Duration) -> Option<u16> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            match tokio::time::timeout_at(deadline, self.socket.next()).await.ok()?? {
                Ok(tokio_tungstenite::tungstenite::Message::Close(frame)) => return frame.map(|f| u16::from(f.code)),
                Ok(_) => {}
                Err(_) => return None,
            }
        }
    }

    /// Events until one of type `until` (included), each within `timeout` of the previous one.
    pub async fn until(&mut self, until: &str, timeout: Duration) -> Vec<Value> {
        let mut events = Vec::new();
        while let Some(event) = self.next(timeout).await {
            let done = event["type"] == until;
            events.push(event);
            if done {
                return events;
            }
        }
        panic!("the stream ended or stalled before a {until} event; got {} events", events.len());
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.kill();
        kill_local_sandboxes(&self.data_dir);
        if self.replica {
            if !std::thread::panicking() {
                let _ = std::fs::remove_dir_all(&self.data_dir);
            }
            return;
        }
        if driver() == "docker" {
            remove_docker_objects(&self.instance);
        }
        // A passing test leaves nothing behind (a failing one keeps its database and logs to
        // look at): each run would otherwise leave ~100 databases and their data directories.
        if !std::thread::panicking() {
            drop_database(&self.database_url);
            let _ = std::fs::remove_dir_all(&self.data_dir);
        }
    }
}

/// Kills every sandboxd (and its harness) that a server with this data directory started with
/// the local driver: they outlive their server by design, so a test's must be ended by the test.
pub fn kill_local_sandboxes(data_dir: &std::path::Path) {
    let pid_files = std::fs::read_dir(data_dir.join("sandboxes")).into_iter().flatten().flatten();
    for entry in pid_files {
        if let Some(pid) =
            std::fs::read_to_string(entry.path().join("sandboxd.pid")).ok().and_then(|p| p.trim().parse().ok())
        {
            agenthold_server::sandbox::local::kill_group(pid);
        }
    }
}

/// Drops a test's database (from a thread of its own: `Drop` is not async).
pub(crate) fn drop_database(database_url: &str) {
    let (Ok(admin), Some(name)) = (std::env::var("DATABASE_URL"), database_url.split('?').next()) else { return };
    let Some(name) = name.rsplit('/').next().filter(|n| n.starts_with("agenthold_test_")).map(str::to_owned) else {
        return;
    };
    let dropping = std::thread::spawn(move || {
        let Ok(runtime) = tokio::runtime::Builder::new_current_thread().enable_all().build() else { return };
        runtime.block_on(async {
            if let Ok(mut connection) = sqlx::PgConnection::connect(&admin).await {
                let _ =
                    sqlx::query(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")).execute(&mut connection).await;
            }
        });
    });
    let _ = dropping.join();
}

/// The seqs of events, in order.
pub fn seqs(events: &[Value]) -> Vec<i64> {
    events.iter().filter_map(|e| e["seq"].as_i64()).collect()
}

/// The events of one type.
pub fn of_type<'a>(events: &'a [Value], kind: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["type"] == kind).collect()
}

/// The texts of agent message chunks, in order.
pub fn texts(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .filter(|e| e["type"] == "update" && e["payload"]["sessionUpdate"] == "agent_message_chunk")
        .filter_map(|e| e["payload"]["content"]["text"].as_str().map(str::to_owned))
        .collect()
}

/// The output of the last `run` (fakeagent's shell command) in `events`.
pub fn last_run_output(events: &[Value]) -> String {
    events
        .iter()
        .rev()
        .find(|e| {
            e["payload"]["sessionUpdate"] == "tool_call_update" && !e["payload"]["rawOutput"]["exitCode"].is_null()
        })
        .and_then(|e| e["payload"]["content"][0]["content"]["text"].as_str())
        .unwrap_or_default()
        .to_owned()
}

/// Asserts seqs are exactly 1..=n.
pub fn assert_gap_free(events: &[Value]) {
    let seqs = seqs(events);
    let expected: Vec<i64> = (1..=seqs.len() as i64).collect();
    assert_eq!(seqs, expected, "seqs must be 1..=n with no gap or duplicate");
}

/// Removes every container, volume and network labelled with this instance name, and the
/// instance's sandbox firewall. A server stopped while it was making something (a ready network
/// and its holder, made at start) may have the engine finish that after the first pass: passes
/// repeat until one finds nothing (at most five, 300 ms apart).
pub fn remove_docker_objects(instance: &str) {
    agenthold_server::sandbox::firewall::remove(&agenthold_server::sandbox::firewall::Rules::new(instance, []));
    let label = format!("label=agenthold.instance={instance}");
    let script = format!(
        "found=$( (docker ps -aq --filter {label}; docker volume ls -q --filter {label}; \
                   docker network ls -q --filter {label}) 2>/dev/null | wc -l); \
         docker ps -aq --filter {label} | xargs -r docker rm -f >/dev/null 2>&1; \
         docker volume ls -q --filter {label} | xargs -r docker volume rm -f >/dev/null 2>&1; \
         docker network ls -q --filter {label} | xargs -r docker network rm >/dev/null 2>&1; \
         [ \"$found\" -eq 0 ]"
    );
    for pass in 0..5 {
        if pass > 0 {
            std::thread::sleep(std::time::Duration::from_millis(300));
        }
        let nothing_found = Command::new("sh").arg("-c").arg(&script).status().is_ok_and(|s| s.success());
        if nothing_found {
            break;
        }
    }
}
