//! A stand-in for the Kubernetes API server that replays recorded exchanges
//! (`server/tests/data/kube/*.json`): an HTTP server on 127.0.0.1 that answers each request with
//! the recorded response of the first unanswered exchange of the same method, path and query
//! (so requests the driver makes concurrently may come in any order), and keeps every request
//! (its body as JSON) for the test to check. A request nothing was recorded for is answered 500
//! and reported by [`Replay::finish`], which also reports exchanges never asked for.

use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::Value;

/// One recorded request and its answer.
#[derive(Debug, Clone, Deserialize)]
pub struct Exchange {
    pub method: String,
    pub path: String,
    /// The query string, percent-encoded (absent: the request has none).
    #[serde(default)]
    pub query: Option<String>,
    pub status: u16,
    pub response: Value,
}

#[derive(Debug, Deserialize)]
struct Recording {
    #[expect(dead_code, reason = "documents the recording for its readers")]
    description: String,
    exchanges: Vec<Exchange>,
}

/// A request the stand-in received.
#[derive(Debug, Clone)]
pub struct Seen {
    pub method: String,
    pub path: String,
    pub query: Option<String>,
    /// The body as JSON (`Null` when empty).
    pub body: Value,
}

#[derive(Default)]
struct Inner {
    pending: Vec<Option<Exchange>>,
    seen: Vec<Seen>,
    unexpected: Vec<String>,
}

/// The running stand-in.
pub struct Replay {
    /// `http://127.0.0.1:<port>`.
    pub url: String,
    inner: Arc<Mutex<Inner>>,
    task: tokio::task::JoinHandle<()>,
}

/// Percent-decodes a query string (`+` stays `+`: Kubernetes clients encode spaces as `%20`).
fn decode(query: &str) -> String {
    let bytes = query.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes.get(i + 1..i + 3).and_then(|h| std::str::from_utf8(h).ok());
        match (bytes[i], hex.and_then(|h| u8::from_str_radix(h, 16).ok())) {
            (b'%', Some(byte)) => {
                out.push(byte);
                i += 3;
            }
            (byte, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A query's parameters, decoded and sorted (clients may add an empty one: `?&labelSelector=…`).
pub fn pairs(query: Option<&str>) -> Vec<String> {
    let mut pairs: Vec<String> = query.unwrap_or("").split('&').filter(|p| !p.is_empty()).map(decode).collect();
    pairs.sort();
    pairs
}

async fn answer(State(inner): State<Arc<Mutex<Inner>>>, method: Method, uri: Uri, body: Bytes) -> Response {
    let query = uri.query().filter(|q| !q.is_empty()).map(str::to_owned);
    let body_json = if body.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&body).unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&body).into_owned()))
    };
    let mut inner = inner.lock().expect("replay lock");
    inner.seen.push(Seen {
        method: method.to_string(),
        path: uri.path().to_owned(),
        query: query.clone(),
        body: body_json,
    });
    let matches = |e: &Exchange| {
        e.method == method.as_str() && e.path == uri.path() && pairs(e.query.as_deref()) == pairs(query.as_deref())
    };
    let found = inner.pending.iter_mut().find(|slot| slot.as_ref().is_some_and(matches)).and_then(Option::take);
    match found {
        Some(exchange) => {
            let status = StatusCode::from_u16(exchange.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            (status, [("content-type", "application/json")], exchange.response.to_string()).into_response()
        }
        None => {
            let what = format!("{method} {}{}", uri.path(), query.map(|q| format!("?{q}")).unwrap_or_default());
            inner.unexpected.push(what.clone());
            let body = serde_json::json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": format!("nothing recorded for {what}"), "reason": "InternalError", "code": 500});
            (StatusCode::INTERNAL_SERVER_ERROR, [("content-type", "application/json")], body.to_string())
                .into_response()
        }
    }
}

impl Replay {
    /// Serves the recording `server/tests/data/kube/<name>`.
    pub async fn start(name: &str) -> Self {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/kube").join(name);
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
        let recording: Recording =
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("{} is not a recording: {e}", path.display()));
        let inner = Arc::new(Mutex::new(Inner {
            pending: recording.exchanges.into_iter().map(Some).collect(),
            ..Default::default()
        }));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("binding the stand-in");
        let url = format!("http://{}", listener.local_addr().expect("its address"));
        let app = axum::Router::new().fallback(answer).with_state(Arc::clone(&inner));
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self { url, inner, task }
    }

    /// A client of the stand-in.
    pub fn client(&self) -> kube::Client {
        let config = kube::Config::new(self.url.parse().expect("the stand-in's URL"));
        kube::Client::try_from(config).expect("a client")
    }

    /// The requests received so far.
    pub fn seen(&self) -> Vec<Seen> {
        self.inner.lock().expect("replay lock").seen.clone()
    }

    /// The body of the one request of `method` to `path`.
    pub fn body(&self, method: &str, path: &str) -> Value {
        let seen: Vec<Seen> = self.seen().into_iter().filter(|s| s.method == method && s.path == path).collect();
        assert_eq!(seen.len(), 1, "requests {method} {path}: {seen:#?}");
        seen[0].body.clone()
    }

    /// Stops the stand-in; fails the test if a request was not recorded or a recorded one was
    /// never made.
    pub fn finish(self) {
        self.task.abort();
        let inner = self.inner.lock().expect("replay lock");
        assert!(inner.unexpected.is_empty(), "requests nothing was recorded for: {:#?}", inner.unexpected);
        let left: Vec<String> =
            inner.pending.iter().flatten().map(|e| format!("{} {} {:?}", e.method, e.path, e.query)).collect();
        assert!(left.is_empty(), "recorded exchanges never asked for: {left:#?}");
    }
}
