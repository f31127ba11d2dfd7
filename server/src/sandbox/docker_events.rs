//! The engine's event stream, followed for this instance's containers: each `die` of an agent's
//! container is reported at once (so a turn whose sandbox died ends now, not after the reconnect
//! grace). The stream reconnects after an engine restart or error, resuming from the time of the
//! last event it saw, so a die while it was away is still reported.

use std::collections::HashMap;
use std::time::Duration;

use bollard::Docker;
use bollard::query_parameters::EventsOptionsBuilder;
use futures_util::StreamExt;
use tokio::sync::mpsc;

use crate::ids::AgentId;

/// How long to wait before following again after the stream failed or ended; doubled after each
/// failure in a row (an engine that does not answer is not asked every second), up to
/// [`RECONNECT_MAX`].
const RECONNECT: Duration = Duration::from_secs(1);
/// The longest wait between two attempts.
const RECONNECT_MAX: Duration = Duration::from_secs(30);

/// Reports the agent of every container of `instance` that dies, until `exits` is closed.
pub async fn follow_exits(
    docker: Docker,
    instance: String,
    exits: mpsc::Sender<(AgentId, chrono::DateTime<chrono::Utc>)>,
) {
    let mut since: Option<i64> = None;
    let mut delay = RECONNECT;
    loop {
        let mut filters: HashMap<&str, Vec<String>> = HashMap::new();
        filters.insert("type", vec!["container".to_owned()]);
        filters.insert("event", vec!["die".to_owned()]);
        filters.insert("label", vec![format!("agenthold.instance={instance}")]);
        let mut options = EventsOptionsBuilder::default().filters(&filters);
        let resume = since.map(|s| s.to_string());
        if let Some(resume) = &resume {
            options = options.since(resume);
        }
        let mut stream = std::pin::pin!(docker.events(Some(options.build())));
        while let Some(event) = stream.next().await {
            let event = match event {
                Ok(event) => event,
                Err(error) => {
                    tracing::warn!(%error, retry_secs = delay.as_secs(), "the engine's event stream failed; following it again");
                    break;
                }
            };
            delay = RECONNECT;
            if let Some(time) = event.time {
                since = Some(time);
            }
            let agent = event
                .actor
                .and_then(|actor| actor.attributes)
                .and_then(|attributes| attributes.get("agenthold.agent").cloned())
                .and_then(|id| id.parse().ok())
                .map(AgentId);
            let at = event
                .time_nano
                .map(chrono::DateTime::from_timestamp_nanos)
                .or_else(|| event.time.and_then(|s| chrono::DateTime::from_timestamp(s, 0)))
                .unwrap_or_else(chrono::Utc::now);
            let Some(agent_id) = agent else { continue };
            tracing::debug!(agent.id = %agent_id, "the engine reports the sandbox died");
            if exits.send((agent_id, at)).await.is_err() {
                return;
            }
        }
        if exits.is_closed() {
            return;
        }
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(RECONNECT_MAX);
    }
}
