//! The agenthold REST calls the benchmarks make (agents, sessions, prompts, sleep) and the
//! stream URL.

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};

use crate::http;

/// The server under test.
#[derive(Debug, Clone)]
pub struct Api {
    /// `host:port` of the API.
    pub addr: String,
    /// The admin token.
    pub token: String,
}

impl Api {
    /// The API at `url` (`http://host:port`).
    pub fn new(url: &str, token: &str) -> Result<Self> {
        let addr = url.strip_prefix("http://").context("the URL must be http://host:port")?.trim_end_matches('/');
        Ok(Self { addr: addr.to_owned(), token: token.to_owned() })
    }

    async fn call(&self, method: &str, path: &str, body: Option<&Value>, expect: u16) -> Result<Value> {
        let response = http::request(&self.addr, method, path, &self.token, body).await?;
        if response.status != expect {
            bail!("{method} {path}: HTTP {} (expected {expect}): {}", response.status, response.body);
        }
        Ok(response.body)
    }

    /// Creates a `fake`-harness agent; returns its id.
    pub async fn create_agent(&self, name: &str) -> Result<String> {
        let body = self.call("POST", "/api/v1/agents", Some(&json!({"name": name, "harness": "fake"})), 201).await?;
        id_of(&body)
    }

    /// Creates a `fake`-harness agent with the `approval` posture; returns its id.
    pub async fn create_asking_agent(&self, name: &str) -> Result<String> {
        let body = json!({"name": name, "harness": "fake", "posture": "approval"});
        let body = self.call("POST", "/api/v1/agents", Some(&body), 201).await?;
        id_of(&body)
    }

    /// Answers a waiting permission question with allow.
    pub async fn approve(&self, permission_id: &str) -> Result<()> {
        let path = format!("/api/v1/permissions/{permission_id}/answer");
        self.call("POST", &path, Some(&json!({"decision": "allow"})), 200).await.map(drop)
    }

    /// Opens a session on an agent; returns its id.
    pub async fn create_session(&self, agent_id: &str) -> Result<String> {
        let body = self.call("POST", &format!("/api/v1/agents/{agent_id}/sessions"), Some(&json!({})), 201).await?;
        id_of(&body)
    }

    /// The session's highest stored seq.
    pub async fn last_seq(&self, session_id: &str) -> Result<i64> {
        let body = self.call("GET", &format!("/api/v1/sessions/{session_id}"), None, 200).await?;
        body["last_seq"].as_i64().context("no last_seq in the session")
    }

    /// Sends a prompt (a fakeagent script); returns the prompt event's seq.
    pub async fn prompt(&self, session_id: &str, script: &str) -> Result<i64> {
        let body = self
            .call("POST", &format!("/api/v1/sessions/{session_id}/prompt"), Some(&json!({"text": script})), 202)
            .await?;
        body["seq"].as_i64().context("no seq in the prompt answer")
    }

    /// Puts an agent to sleep (its container stops).
    pub async fn sleep(&self, agent_id: &str) -> Result<()> {
        self.call("POST", &format!("/api/v1/agents/{agent_id}/sleep"), None, 200).await.map(drop)
    }

    /// Deletes an agent with its sandbox.
    pub async fn delete_agent(&self, agent_id: &str) -> Result<()> {
        self.call("DELETE", &format!("/api/v1/agents/{agent_id}"), None, 204).await.map(drop)
    }

    /// The stream WebSocket URL of a session from a cursor.
    pub fn stream_url(&self, session_id: &str, after: i64) -> String {
        format!("ws://{}/api/v1/sessions/{session_id}/stream?after={after}", self.addr)
    }
}

fn id_of(body: &Value) -> Result<String> {
    body["id"].as_str().map(str::to_owned).with_context(|| format!("no id in {body}"))
}
