//! A sandbox asking to refresh its ChatGPT login (seed 003): Codex refreshes only when its token
//! is refused or about to expire, and the egress proxy answers that request itself with the
//! placeholders again (only the server may use the single-use refresh token). The proxy counts the
//! answers per sandbox in its report file (`agenthold_proxy::cut::Report::answered`); this task
//! reads it and refreshes the asking agent's login at once — at most once a minute per login — so
//! a revoked token is noticed within a minute (the login turns "connect again"), not at the next
//! scheduled round.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use agenthold_proxy::cut::Report;
use uuid::Uuid;

use super::chatgpt;
use super::kinds::LoginKind;
use super::refresh::Refresher;
use crate::ids::AgentId;
use crate::store;

/// How often the report is read.
pub const EVERY: Duration = Duration::from_secs(5);
/// At most one refresh per login this often on sandboxes' asking.
pub const AT_MOST_EVERY: Duration = Duration::from_secs(60);

/// The sandboxes whose asks to refresh are new since `seen` (per sandbox, the time of the last
/// ask already handled), which it then holds too, with the time of each one's last ask. Pure.
pub fn new_asks(report: &Report, seen: &mut HashMap<String, u64>) -> Vec<(AgentId, u64)> {
    let mut asking = Vec::new();
    for (sandbox, answered) in &report.answered {
        if answered.host != chatgpt::TOKEN_HOST || answered.path != chatgpt::TOKEN_PATH {
            continue;
        }
        let last = seen.entry(sandbox.clone()).or_insert(0);
        if answered.last_at_ms > *last {
            *last = answered.last_at_ms;
            if let Ok(id) = Uuid::parse_str(sandbox) {
                asking.push((AgentId(id), answered.last_at_ms));
            }
        }
    }
    asking
}

/// Reads the report every [`EVERY`] and refreshes the logins of the agents that asked. Asks made
/// before the server started count as handled.
pub async fn run(refresher: Refresher, report: PathBuf) {
    let mut seen: HashMap<String, u64> = HashMap::new();
    let started_ms = u64::try_from(chrono::Utc::now().timestamp_millis()).unwrap_or(0);
    let mut last_refresh: HashMap<Uuid, Instant> = HashMap::new();
    loop {
        tokio::time::sleep(EVERY).await;
        let path = report.clone();
        let Some(read) = tokio::task::spawn_blocking(move || Report::read(&path)).await.ok().flatten() else {
            continue;
        };
        for (agent_id, asked_at) in new_asks(&read, &mut seen) {
            if asked_at < started_ms {
                continue;
            }
            if let Err(error) = refresh_for(&refresher, agent_id, &mut last_refresh).await {
                tracing::warn!(agent.id = %agent_id, %error, "refreshing the login a sandbox asked for");
            }
        }
        last_refresh.retain(|_, at| at.elapsed() < AT_MOST_EVERY);
    }
}

async fn refresh_for(
    refresher: &Refresher,
    agent_id: AgentId,
    last_refresh: &mut HashMap<Uuid, Instant>,
) -> sqlx::Result<()> {
    let Some(user_id) = store::provider_logins::login_user_of(&refresher.pool, agent_id).await? else { return Ok(()) };
    let kind = LoginKind::ChatgptLogin.as_str();
    let Some(login) = store::provider_logins::get_by_kind(&refresher.pool, user_id, kind).await? else { return Ok(()) };
    if last_refresh.get(&login.id).is_some_and(|at| at.elapsed() < AT_MOST_EVERY) {
        return Ok(());
    }
    last_refresh.insert(login.id, Instant::now());
    let renewed = refresher.refresh_now(login.id).await?;
    tracing::info!(agent.id = %agent_id, login.id = %login.id, ?renewed, "a sandbox asked to refresh its ChatGPT login");
    Ok(())
}

#[cfg(test)]
mod tests {
    use agenthold_proxy::cut::SandboxAnswered;

    use super::*;

    fn ask(report: &mut Report, sandbox: Uuid, at_ms: u64, path: &str) {
        let entry =
            SandboxAnswered { count: 1, last_at_ms: at_ms, host: chatgpt::TOKEN_HOST.into(), path: path.into() };
        report.answered.insert(sandbox.to_string(), entry);
    }

    #[test]
    fn each_ask_is_taken_once_and_only_asks_to_refresh_count() {
        let (a, b) = (Uuid::new_v4(), Uuid::new_v4());
        let mut report = Report::default();
        let mut seen = HashMap::new();
        ask(&mut report, a, 1_000, chatgpt::TOKEN_PATH);
        ask(&mut report, b, 1_000, "/api/other");
        assert_eq!(new_asks(&report, &mut seen), vec![(AgentId(a), 1_000)]);
        assert!(new_asks(&report, &mut seen).is_empty(), "the same ask twice is one");
        ask(&mut report, a, 2_000, chatgpt::TOKEN_PATH);
        assert_eq!(new_asks(&report, &mut seen), vec![(AgentId(a), 2_000)], "a later ask is new");
        report.answered.insert("not-an-agent".into(), report.answered[&a.to_string()].clone());
        assert_eq!(new_asks(&report, &mut seen), Vec::<(AgentId, u64)>::new());
    }
}
