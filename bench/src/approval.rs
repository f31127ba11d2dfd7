//! The approval round trip: a gated call (`ask` under the `approval` posture) → its `permission`
//! event at a watcher → the answer posted → the harness receives it (fakeagent stamps
//! `_meta.fakeagent.answeredAtUs` on the chunk it says next). Wall clocks of one machine.

use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde_json::Value;

use crate::api::Api;
use crate::watch::Watcher;

/// The round trips in milliseconds, one per turn; the agent is added to `agents` for cleanup.
pub async fn roundtrips(api: &Api, rounds: usize, tag: &str, agents: &mut Vec<String>) -> Result<Vec<f64>> {
    let agent = api.create_asking_agent(&format!("bench-approval-{tag}")).await?;
    agents.push(agent.clone());
    let session = api.create_session(&agent).await?;
    let mut samples = Vec::with_capacity(rounds);
    for round in 0..=rounds {
        let after = api.last_seq(&session).await?;
        let mut watcher = Watcher::connect(api, &session, after).await?.keep_payloads();
        api.prompt(&session, "ask execute bench").await?;
        let deadline = Instant::now() + Duration::from_secs(120);
        let (asked_at_us, permission_id) = loop {
            let event = watcher.next_event(deadline).await?;
            match event.kind.as_str() {
                "permission" => {
                    let payload: Value = serde_json::from_str(event.payload.as_deref().unwrap_or("null"))?;
                    let id = payload["permission_id"].as_str().context("no permission_id")?.to_owned();
                    break (event.at_unix_us, id);
                }
                "turn_end" => bail!("the turn ended without a question; errors: {:?}", watcher.errors),
                _ => {}
            }
        };
        api.approve(&permission_id).await?;
        let answered_at_us = loop {
            let event = watcher.next_event(deadline).await?;
            if event.kind == "turn_end" {
                bail!("the turn ended before the harness said it got the answer");
            }
            let payload: Value = serde_json::from_str(event.payload.as_deref().unwrap_or("null"))?;
            if let Some(at) = payload.pointer("/_meta/fakeagent/answeredAtUs").and_then(Value::as_i64) {
                break at;
            }
        };
        watcher.until_turn_end(deadline).await?;
        // The first round warms the harness up.
        if round > 0 {
            samples.push((answered_at_us - asked_at_us) as f64 / 1000.0);
        }
    }
    Ok(samples)
}
