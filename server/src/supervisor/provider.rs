//! The shell's side of `PROVIDER_STREAM_ENDED` ([`super::core`] asks when a harness fails a
//! turn): the egress proxy's report ([`agenthold_proxy::cut`], `proxy-report.json` beside the
//! proxy's configuration file) says whether a provider's response to this agent's sandbox was cut
//! short since the turn began, and [`finding`] says what the proxy saw, in words.

use std::path::Path;
use std::time::Duration;

use agenthold_proxy::cut::{Cut, Report};
use chrono::{DateTime, Utc};

use crate::ids::AgentId;

/// The report is written as the cut happens, before the harness hears of it; read once more
/// after this, should the harness have been quicker.
const SECOND_LOOK: Duration = Duration::from_millis(500);

/// What the proxy saw cut short for `agent_id` since `since` (`None`: nothing, or no report).
pub async fn check(report: Option<&Path>, agent_id: AgentId, since: DateTime<Utc>) -> Option<String> {
    let path = report?.to_owned();
    for attempt in 0..2 {
        if attempt > 0 {
            tokio::time::sleep(SECOND_LOOK).await;
        }
        let read = {
            let path = path.clone();
            tokio::task::spawn_blocking(move || Report::read(&path)).await.ok().flatten()
        };
        if let Some(found) = read.and_then(|report| finding(&report, agent_id, since)) {
            return Some(found);
        }
    }
    None
}

/// The last cut the report holds for `agent_id`, in words, if it happened at or after `since`.
pub fn finding(report: &Report, agent_id: AgentId, since: DateTime<Utc>) -> Option<String> {
    let cuts = report.cut_short.get(&agent_id.to_string())?;
    let since_ms = u64::try_from(since.timestamp_millis()).unwrap_or(0);
    (cuts.last.at_ms >= since_ms).then(|| words(&cuts.last))
}

fn words(cut: &Cut) -> String {
    let of = cut.declared_bytes.map(|d| format!(" of {d}")).unwrap_or_default();
    format!(
        "the egress proxy saw {}'s response to {} (status {}) end after {}{of} bytes: {}",
        cut.host, cut.path, cut.status, cut.bytes_sent, cut.reason
    )
}

#[cfg(test)]
mod tests {
    use agenthold_proxy::cut::{EndedBy, SandboxCuts};

    use super::*;

    #[test]
    fn only_a_cut_of_this_agent_since_the_turn_began_is_named() {
        let agent = AgentId(uuid::Uuid::new_v4());
        let at = Utc::now();
        let cut = Cut {
            at_ms: at.timestamp_millis() as u64,
            host: "api.anthropic.com".into(),
            path: "/v1/messages".into(),
            status: 200,
            bytes_sent: 100,
            declared_bytes: Some(1000),
            ended_by: EndedBy::Upstream,
            reason: "the upstream closed the connection before the response ended".into(),
        };
        let mut report = Report::default();
        report.cut_short.insert(agent.to_string(), SandboxCuts { count: 1, last: cut });
        assert_eq!(
            finding(&report, agent, at - chrono::Duration::seconds(5)).as_deref(),
            Some(
                "the egress proxy saw api.anthropic.com's response to /v1/messages (status 200) end after 100 of \
                 1000 bytes: the upstream closed the connection before the response ended"
            )
        );
        assert_eq!(finding(&report, agent, at + chrono::Duration::seconds(1)), None, "before the turn began");
        assert_eq!(finding(&report, AgentId(uuid::Uuid::new_v4()), at), None, "another agent's");
    }
}
