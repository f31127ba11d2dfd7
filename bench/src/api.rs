//! The agenthold REST calls the benchmarks make (agents, sessions, prompts, sleep, wake, list,
//! show) and the stream, through the CLI's client ([`agenthold_cli::api::Client`]: reqwest and
//! tokio-tungstenite over rustls, so `https://` servers work too).

use std::time::Duration;

use agenthold_cli::api::{Client, Options, Socket};
use agenthold_cli::endpoint::Endpoint;
use agenthold_cli::secret::Token;
use anyhow::{Context, Result, anyhow, bail};
use serde_json::{Value, json};

/// The server under test.
#[derive(Debug, Clone)]
pub struct Api {
    /// The client, with the admin token.
    client: Client,
}

impl Api {
    /// The API at `url` (`http[s]://host:port`).
    pub fn new(url: &str, token: &Token) -> Result<Self> {
        let endpoint = Endpoint::parse(url).map_err(|e| anyhow!("the server URL: {e}"))?;
        // Generous: a sleep or a delete waits for the container.
        let options = Options { timeout: Duration::from_secs(300), ..Options::default() };
        Ok(Self { client: Client::new(endpoint, Some(token.clone()), options)? })
    }

    async fn call(&self, method: &str, path: &str, body: Option<&Value>, expect: u16) -> Result<Value> {
        let reply = self.client.send(method, path, body).await?;
        if reply.status != expect {
            let body = String::from_utf8_lossy(&reply.body);
            bail!("{method} {path}: HTTP {} (expected {expect}): {}", reply.status, body.trim());
        }
        Ok(reply.json().with_context(|| format!("{method} {path}"))?.unwrap_or(Value::Null))
    }

    /// Creates a `fake`-harness agent; returns its id.
    pub async fn create_agent(&self, name: &str) -> Result<String> {
        self.create_agent_of(name, None).await
    }

    /// Creates a `fake`-harness agent of `image` (`None`: the server's default, which a warm
    /// pool sandbox may serve); returns its id.
    pub async fn create_agent_of(&self, name: &str, image: Option<&str>) -> Result<String> {
        let mut body = json!({"name": name, "harness": "fake"});
        if let Some(image) = image {
            body["image"] = json!(image);
        }
        let body = self.call("POST", "/api/v1/agents", Some(&body), 201).await?;
        id_of(&body)
    }

    /// Creates an agent from a whole `POST /api/v1/agents` body; returns its id.
    pub async fn create_agent_from(&self, body: &Value) -> Result<String> {
        let body = self.call("POST", "/api/v1/agents", Some(body), 201).await?;
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

    /// Starts a sleeping agent's sandbox; answered once it is started and dialing in (or
    /// connected).
    pub async fn wake(&self, agent_id: &str) -> Result<()> {
        self.call("POST", &format!("/api/v1/agents/{agent_id}/wake"), None, 200).await.map(drop)
    }

    /// `GET /api/v1/agents`: how many agents the caller sees.
    pub async fn list_agents(&self) -> Result<usize> {
        let body = self.call("GET", "/api/v1/agents", None, 200).await?;
        body["agents"].as_array().map(Vec::len).context("no agents array in the agent list")
    }

    /// `GET /api/v1/agents/{id}`: its observed state (`starting`, `awake`, `stopping`, `asleep`,
    /// `error`) and, in `error`, why.
    pub async fn agent_state(&self, agent_id: &str) -> Result<(String, Option<String>)> {
        let body = self.call("GET", &format!("/api/v1/agents/{agent_id}"), None, 200).await?;
        let state = body["state"].as_str().with_context(|| format!("no state in agent {agent_id}"))?;
        Ok((state.to_owned(), body["state_reason"].as_str().map(str::to_owned)))
    }

    /// Deletes an agent with its sandbox.
    pub async fn delete_agent(&self, agent_id: &str) -> Result<()> {
        self.call("DELETE", &format!("/api/v1/agents/{agent_id}"), None, 204).await.map(drop)
    }

    /// Opens the stream WebSocket of a session from a cursor.
    pub async fn stream(&self, session_id: &str, after: i64) -> Result<Socket> {
        let path = format!("/api/v1/sessions/{session_id}/stream?after={after}");
        Ok(self.client.websocket(&path).await?)
    }
}

fn id_of(body: &Value) -> Result<String> {
    body["id"].as_str().map(str::to_owned).with_context(|| format!("no id in {body}"))
}
