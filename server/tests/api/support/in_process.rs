//! A server built and served in the test's own process on a database of its own (the local
//! driver): requests go straight to the router with `tower::ServiceExt::oneshot` (WebSocket
//! handshakes, which need a connection, to its listener), so a check of validation,
//! authorization or an error code costs a request, not a process.

use std::net::SocketAddr;

use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::{Method, Request};
use clap::Parser;
use http_body_util::BodyExt;
use serde_json::Value;
use tower::ServiceExt;

/// The server admin's token.
pub const ADMIN_TOKEN: &str = "in-process-admin-token-0123456789";

/// A built server and its router.
pub struct InProcess {
    /// Stops the server (its listeners serve sandboxes' tunnels and replicas in the background).
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    served: Option<tokio::task::JoinHandle<anyhow::Result<()>>>,
    router: axum::Router,
    /// The API listener's address (WebSocket handshakes need a connection).
    api: SocketAddr,
    database_url: String,
    _data_dir: TempDir,
}

/// A request's answer: the status and the body (JSON, or the text as a JSON string).
pub type Answer = (u16, Value);

/// A request's whole answer.
pub struct Reply {
    /// The status.
    pub status: u16,
    /// The headers.
    pub headers: axum::http::HeaderMap,
    /// The body (JSON, or the text as a JSON string).
    pub body: Value,
}

impl InProcess {
    /// Builds a server on a fresh database with the local driver.
    pub async fn start() -> Self {
        let database_url = super::server::create_database().await;
        let data_dir = TempDir::new();
        let bin_dir = std::path::PathBuf::from(env!("CARGO_BIN_EXE_agenthold"));
        let bin_dir = bin_dir.parent().expect("bin dir").to_owned();
        let args: Vec<String> = [
            ("--mode", "test"),
            ("--database-url", database_url.as_str()),
            ("--listen", "127.0.0.1:0"),
            ("--tunnel-listen", "127.0.0.1:0"),
            ("--internal-listen", "127.0.0.1:0"),
            ("--driver", "local"),
            ("--data-dir", data_dir.path().to_str().expect("utf-8")),
            ("--sandbox-bin-dir", bin_dir.to_str().expect("utf-8")),
            ("--admin-token", ADMIN_TOKEN),
            ("--warm-pool-size", "0"),
            ("--instance", &format!("inproc{}", &uuid::Uuid::new_v4().simple().to_string()[..8])),
        ]
        .into_iter()
        .flat_map(|(flag, value)| [flag.to_owned(), value.to_owned()])
        .collect();
        let config =
            agenthold_server::config::Config::try_parse_from(std::iter::once("agenthold".to_owned()).chain(args))
                .expect("the test's configuration");
        let listeners = agenthold_server::app::Listeners::bind(&config).await.expect("binding port 0");
        let app = agenthold_server::app::build(config, &listeners).await.expect("building the server");
        let router = agenthold_server::api::router(app.state.clone());
        let api = listeners.api_addr().expect("the API's address");
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let served = tokio::spawn(agenthold_server::app::serve(app, listeners, async move {
            let _ = stopped.await;
        }));
        Self { stop: Some(stop), served: Some(served), router, api, database_url, _data_dir: data_dir }
    }

    /// Sends `method path` with `headers` and `body` (the raw text of a JSON request, when given).
    pub async fn request(&self, method: &str, path: &str, headers: &[(&str, String)], body: Option<&str>) -> Reply {
        let mut request = Request::builder().method(Method::from_bytes(method.as_bytes()).expect("method")).uri(path);
        for (name, value) in headers {
            request = request.header(*name, value);
        }
        let body = match body {
            Some(text) => {
                request = request.header("content-type", "application/json");
                Body::from(text.to_owned())
            }
            None => Body::empty(),
        };
        let mut request = request.body(body).expect("request");
        request.extensions_mut().insert(ConnectInfo(SocketAddr::from(([127, 0, 0, 1], 40000))));
        let response = self.router.clone().oneshot(request).await.expect("the router answers");
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let bytes = response.into_body().collect().await.expect("body").to_bytes();
        let body = serde_json::from_slice(&bytes)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()));
        Reply { status, headers, body }
    }

    /// `method path` with `token` (none when empty) and a JSON `body` (none for GET and DELETE).
    pub async fn as_user(&self, method: &str, path: &str, token: &str, body: Value) -> Answer {
        let route = path.split('?').next().unwrap_or(path);
        if route.ends_with("/stream") || route.ends_with("/terminal") {
            return self.websocket(path, token).await;
        }
        let headers: Vec<(&str, String)> =
            if token.is_empty() { Vec::new() } else { vec![("authorization", format!("Bearer {token}"))] };
        let text = (!matches!(method, "GET" | "DELETE")).then(|| body.to_string());
        let reply = self.request(method, path, &headers, text.as_deref()).await;
        (reply.status, reply.body)
    }

    /// A WebSocket handshake on the served API listener (an upgrade needs a connection): 101 when
    /// it succeeds, else the refusal.
    pub async fn websocket(&self, path: &str, token: &str) -> Answer {
        use tokio_tungstenite::tungstenite::client::IntoClientRequest;
        let mut request = format!("ws://{}{path}", self.api).into_client_request().expect("request");
        if !token.is_empty() {
            request.headers_mut().insert("authorization", format!("Bearer {token}").parse().expect("header"));
        }
        match tokio_tungstenite::connect_async(request).await {
            Ok(_) => (101, Value::Null),
            Err(tokio_tungstenite::tungstenite::Error::Http(response)) => {
                let body =
                    response.body().as_deref().and_then(|b| serde_json::from_slice(b).ok()).unwrap_or(Value::Null);
                (response.status().as_u16(), body)
            }
            Err(other) => panic!("handshake: {other}"),
        }
    }

    /// `method path` as the server admin.
    pub async fn admin(&self, method: &str, path: &str, body: Value) -> Answer {
        self.as_user(method, path, ADMIN_TOKEN, body).await
    }

    /// Creates a `fake` agent (with `extra` fields) as the server admin; its id.
    pub async fn create_agent(&self, extra: Value) -> String {
        let mut body = serde_json::json!({"name": format!("a{}", &uuid::Uuid::new_v4().simple().to_string()[..12]), "harness": "fake"});
        if let (Some(body), Some(extra)) = (body.as_object_mut(), extra.as_object()) {
            body.extend(extra.clone());
        }
        let (status, agent) = self.admin("POST", "/api/v1/agents", body).await;
        assert_eq!(status, 201, "creating an agent: {agent}");
        agent["id"].as_str().expect("agent id").to_owned()
    }

    /// Opens a session of `agent` as the server admin; its id.
    pub async fn create_session(&self, agent: &str) -> String {
        let (status, session) =
            self.admin("POST", &format!("/api/v1/agents/{agent}/sessions"), serde_json::json!({})).await;
        assert_eq!(status, 201, "creating a session: {session}");
        session["id"].as_str().expect("session id").to_owned()
    }

    /// Sends `script` to the fake agent of `session`.
    pub async fn prompt(&self, session: &str, script: &str) {
        let (status, body) = self
            .admin("POST", &format!("/api/v1/sessions/{session}/prompt"), serde_json::json!({"text": script}))
            .await;
        assert_eq!(status, 202, "prompting: {body}");
    }

    /// Every stored event of `session`.
    pub async fn events(&self, session: &str) -> Vec<Value> {
        let mut all = Vec::new();
        let mut after = 0;
        loop {
            let path = format!("/api/v1/sessions/{session}/events?after={after}&limit=1000");
            let (status, page) = self.admin("GET", &path, Value::Null).await;
            assert_eq!(status, 200, "{page}");
            let events = page["events"].as_array().cloned().unwrap_or_default();
            let Some(last) = events.last().and_then(|e| e["seq"].as_i64()) else { return all };
            after = last;
            all.extend(events);
        }
    }

    /// Waits until `session` has `turns` ended turns.
    pub async fn wait_turns(&self, session: &str, turns: usize, timeout: std::time::Duration) {
        let deadline = std::time::Instant::now() + timeout;
        loop {
            let events = self.events(session).await;
            if events.iter().filter(|e| e["type"] == "turn_end").count() >= turns {
                return;
            }
            assert!(std::time::Instant::now() < deadline, "waited {timeout:?} for {turns} turn(s): {events:?}");
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    }

    /// Stops the server's tasks and drops its database.
    pub async fn stop(mut self) {
        if let (Some(stop), Some(served)) = (self.stop.take(), self.served.take()) {
            let _ = stop.send(());
            served.await.expect("the server task").expect("the server stops cleanly");
        }
        super::server::drop_database(&self.database_url);
    }
}

/// A server's data directory, removed (its sandboxes killed) when dropped.
struct TempDir(std::path::PathBuf);

impl TempDir {
    fn new() -> Self {
        let path = std::env::temp_dir().join(format!("agenthold-inproc-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&path).expect("temp dir");
        Self(path)
    }

    fn path(&self) -> &std::path::Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        // The sandboxes the server started outlive it (the local driver's design): ended here.
        super::server::kill_local_sandboxes(&self.0);
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
