//! `first-update`: one agent's start as a scripted client sees it, over one kept-alive client —
//! `POST /api/v1/agents` with the body given, a session, its stream opened, the prompt, then the
//! first `update` on the stream. Prints one JSON object: the agent and session ids and the time
//! from the create call's start to the end of each step (`created_ms`, `session_ms`,
//! `streaming_ms`, `prompted_ms`, `first_update_ms`), so that a slow start says where it went,
//! and to the first text (`first_text_ms`: the first `agent_message_chunk` — a harness's first
//! update may be its own list of commands, sent before it asks the model anything; `null` if the
//! turn ended without text) and its kind (`first_update_kind`).
//! With `--session` instead of `--agent`, a prompt to a session that exists (an agent's first
//! turn on a new sandbox, or a warm second one): its stream opened after the session's last
//! event, then the clock starts at the prompt's request — as a direct run's starts at the prompt
//! written to the harness's stdin — and stops at the first `update` (`created_ms` and
//! `session_ms` are then absent).
//! The server is `AGENTHOLD_URL` with `AGENTHOLD_TOKEN`; `make bench` runs it for the real
//! harnesses (scripts/bench/run.sh).

use std::time::{Duration, Instant};

use agenthold_bench::api::Api;
use agenthold_bench::watch::Watcher;
use anyhow::{Context, Result, bail};
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
    #[arg(long, required_unless_present = "session", conflicts_with = "session")]
    agent: Option<String>,
    /// A session that exists: only its next prompt is timed.
    #[arg(long)]
    session: Option<String>,
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
    let api = Api::new(&args.url, &args.token)?;
    // The connection is open before the clock starts, as a client's that already talks to the
    // server (the UI's, a script's second agent).
    api.list_agents().await.context("reaching the server")?;
    let deadline = Instant::now() + Duration::from_secs(args.timeout_secs);
    let (started, created, session_id, mut watcher) = match (&args.agent, &args.session) {
        (Some(agent), _) => {
            let body: Value = serde_json::from_str(agent).context("--agent is not JSON")?;
            let started = Instant::now();
            let agent_id = api.create_agent_from(&body).await?;
            let created = Instant::now();
            let session_id = api.create_session(&agent_id).await?;
            let session = Instant::now();
            let watcher = Watcher::connect(&api, &session_id, 0).await?.keep_payloads();
            (started, Some((agent_id, created, session)), session_id, watcher)
        }
        (None, Some(session_id)) => {
            let after = api.last_seq(session_id).await?;
            let watcher = Watcher::connect(&api, session_id, after).await?.keep_payloads();
            (Instant::now(), None, session_id.clone(), watcher)
        }
        (None, None) => bail!("--agent or --session is needed"),
    };
    let streaming = Instant::now();
    let since = |at: Instant| (at - started).as_secs_f64() * 1000.0;
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
            "agent_id": created.as_ref().map(|(agent_id, _, _)| agent_id),
            "session_id": session_id,
            "created_ms": created.as_ref().map(|(_, at, _)| round(since(*at))),
            "session_ms": created.as_ref().map(|(_, _, at)| round(since(*at))),
            "streaming_ms": round(since(streaming)),
            "prompted_ms": round(since(prompted)),
            "first_update_ms": round(since(first.at)),
            "first_update_kind": first_kind,
            "first_text_ms": first_text.map(|at| round(since(at))),
        })
    );
    Ok(())
}
