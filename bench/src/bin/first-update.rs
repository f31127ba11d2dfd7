//! `first-update`: one agent's start as a scripted client sees it, over one kept-alive client —
//! `POST /api/v1/agents` with the body given, a session, its stream opened, the prompt, then the
//! first `update` on the stream. Prints one JSON object: the agent and session ids and the time
//! from the create call's start to the end of each step (`created_ms`, `session_ms`,
//! `streaming_ms`, `prompted_ms`, `first_update_ms`), so that a slow start says where it went,
//! and to the first text (`first_text_ms`: the first `agent_message_chunk` — a harness's first
//! update may be its own list of commands, sent before it asks the model anything; `null` if the
//! turn ended without text) and its kind (`first_update_kind`).
//! The server is `AGENTHOLD_URL` with `AGENTHOLD_TOKEN`; `make bench` runs it for the pooled
//! harnesses (scripts/bench/run.sh).

use std::time::{Duration, Instant};

use agenthold_bench::api::Api;
use agenthold_bench::watch::Watcher;
use anyhow::{Context, Result};
use clap::Parser;
use serde_json::{Value, json};

/// One agent's start, timed step by step.
#[derive(Debug, Parser)]
struct Args {
    /// The server.
    #[arg(long, env = "AGENTHOLD_URL")]
    url: String,
    /// An admin token of that server.
    #[arg(long, env = "AGENTHOLD_TOKEN", hide_env_values = true, value_parser = agenthold_cli::secret::parse_token)]
    token: agenthold_cli::secret::Token,
    /// The `POST /api/v1/agents` body (JSON).
    #[arg(long)]
    agent: String,
    /// The prompt's text.
    #[arg(long, default_value = "hello")]
    prompt: String,
    /// How long to wait for the first update, seconds.
    #[arg(long, default_value_t = 120)]
    timeout_secs: u64,
}

#[tokio::main]
async fn main() -> Result<()> {
    let args = Args::parse();
    let body: Value = serde_json::from_str(&args.agent).context("--agent is not JSON")?;
    let api = Api::new(&args.url, &args.token)?;
    // The connection is open before the clock starts, as a client's that already talks to the
    // server (the UI's, a script's second agent).
    api.list_agents().await.context("reaching the server")?;
    let deadline = Instant::now() + Duration::from_secs(args.timeout_secs);
    let started = Instant::now();
    let since = |at: Instant| (at - started).as_secs_f64() * 1000.0;
    let agent_id = api.create_agent_from(&body).await?;
    let created = Instant::now();
    let session_id = api.create_session(&agent_id).await?;
    let session = Instant::now();
    let mut watcher = Watcher::connect(&api, &session_id, 0).await?.keep_payloads();
    let streaming = Instant::now();
    api.prompt(&session_id, &args.prompt).await?;
    let prompted = Instant::now();
    let first = watcher.first_update(deadline).await?;
    let kind = |payload: &Option<String>| {
        payload
            .as_deref()
            .and_then(|p| serde_json::from_str::<Value>(p).ok())
            .and_then(|p| p["sessionUpdate"].as_str().map(str::to_owned))
    };
    let first_kind = kind(&first.payload);
    let mut first_text = (first_kind.as_deref() == Some("agent_message_chunk")).then_some(first.at);
    while first_text.is_none() {
        let Ok(event) = watcher.next_event(deadline).await else { break };
        match event.kind.as_str() {
            "update" if kind(&event.payload).as_deref() == Some("agent_message_chunk") => first_text = Some(event.at),
            "turn_end" => break,
            _ => {}
        }
    }
    watcher.close().await;
    let round = |ms: f64| (ms * 10.0).round() / 10.0;
    println!(
        "{}",
        json!({
            "agent_id": agent_id,
            "session_id": session_id,
            "created_ms": round(since(created)),
            "session_ms": round(since(session)),
            "streaming_ms": round(since(streaming)),
            "prompted_ms": round(since(prompted)),
            "first_update_ms": round(since(first.at)),
            "first_update_kind": first_kind,
            "first_text_ms": first_text.map(|at| round(since(at))),
        })
    );
    Ok(())
}
