//! Auto-sleep: an awake agent with no running turn, no open terminal and nothing happening — no
//! prompt, no harness output, no stream opened — for its auto-sleep time
//! (`limits.auto_sleep_secs`, else `AGENTHOLD_AUTO_SLEEP_SECS`; 0: never) is put to sleep through
//! the ordinary sleep path (which refuses while a turn runs). Each sleep is recorded in the
//! workspace's audit log (`agent.auto_slept`) and as a `notice` `AUTO_SLEEP` on the agent's
//! sessions; the next prompt wakes it as usual.
//!
//! [`due`] decides (pure); [`run`] checks every few seconds and acts.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use futures_util::StreamExt;

use crate::dispatch::Dispatch;
use crate::events::appender::Appender;
use crate::events::{NewEvent, NoticeCode};
use crate::ids::AgentId;
use crate::store;
use crate::supervisor::Command;

/// How many idle agents are put to sleep at once.
const SLEEPS_AT_ONCE: usize = 4;
/// How long a sleep may take before the check moves on.
const SLEEP_TIMEOUT: Duration = Duration::from_secs(60);

/// An agent found idle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Due {
    /// The agent.
    pub agent_id: AgentId,
    /// How long it has been idle.
    pub idle: Duration,
    /// Its auto-sleep time.
    pub after: Duration,
}

/// The agents to put to sleep: of the awake ones without a terminal (`candidates`, with when the
/// host last saw them used), those still existing (`settings`: their own time, `None` for the
/// server's `default_secs`) whose last event (`last_events`) and last use are both older than
/// their time. A time of 0 never sleeps.
pub fn due(
    now: Instant,
    wall: DateTime<Utc>,
    candidates: &[(AgentId, Instant)],
    settings: &HashMap<AgentId, Option<i32>>,
    default_secs: u64,
    last_events: &HashMap<AgentId, DateTime<Utc>>,
) -> Vec<Due> {
    let mut due: Vec<Due> = candidates
        .iter()
        .filter_map(|(agent_id, last_used)| {
            let own = settings.get(agent_id)?;
            let secs = own.map_or(default_secs, |s| u64::try_from(s).unwrap_or(0));
            if secs == 0 {
                return None;
            }
            let mut idle = now.saturating_duration_since(*last_used);
            if let Some(at) = last_events.get(agent_id) {
                idle = idle.min((wall - *at).to_std().unwrap_or_default());
            }
            let after = Duration::from_secs(secs);
            (idle >= after).then_some(Due { agent_id: *agent_id, idle, after })
        })
        .collect();
    due.sort_by_key(|d| std::cmp::Reverse(d.idle));
    due
}

/// How often to look: a quarter of the shortest time in force, between 1 s and 60 s.
pub fn interval(default_secs: u64) -> Duration {
    let quarter = if default_secs == 0 { 60 } else { default_secs / 4 };
    Duration::from_secs(quarter.clamp(1, 60))
}

/// Checks for idle agents every `every` until the process ends.
pub async fn run(dispatch: Arc<Dispatch>, pool: sqlx::PgPool, appender: Appender, default_secs: u64, every: Duration) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        if let Err(error) = check(&dispatch, &pool, &appender, default_secs).await {
            tracing::warn!(%error, "looking for idle agents");
        }
    }
}

async fn check(dispatch: &Dispatch, pool: &sqlx::PgPool, appender: &Appender, default_secs: u64) -> sqlx::Result<()> {
    let candidates = dispatch.supervisors().host().idle_candidates();
    if candidates.is_empty() {
        return Ok(());
    }
    let ids: Vec<uuid::Uuid> = candidates.iter().map(|(id, _)| id.0).collect();
    let settings: HashMap<_, _> = store::agents::auto_sleep_of(pool, &ids).await?.into_iter().collect();
    let last_events: HashMap<_, _> = store::sessions::last_event_at(pool, &ids).await?.into_iter().collect();
    let found = due(Instant::now(), Utc::now(), &candidates, &settings, default_secs, &last_events);
    // A few at a time: each stop waits for its container.
    futures_util::stream::iter(found)
        .for_each_concurrent(SLEEPS_AT_ONCE, |due| async move {
            if let Err(error) = sleep(dispatch, pool, appender, due).await {
                tracing::warn!(%error, agent.id = %due.agent_id, "recording an auto-sleep");
            }
        })
        .await;
    Ok(())
}

/// Puts one idle agent to sleep, then records it (a sleep the supervisor refuses — a turn started
/// meanwhile — is not recorded).
async fn sleep(dispatch: &Dispatch, pool: &sqlx::PgPool, appender: &Appender, due: Due) -> sqlx::Result<()> {
    let agent_id = due.agent_id;
    let asked = dispatch.ask(agent_id, |reply| Command::Sleep { reply });
    match tokio::time::timeout(SLEEP_TIMEOUT, asked).await {
        Ok(Some(Ok(()))) => {}
        Ok(Some(Err(error))) => {
            tracing::debug!(agent.id = %agent_id, %error, "not put to sleep");
            return Ok(());
        }
        Ok(None) | Err(_) => {
            tracing::warn!(agent.id = %agent_id, "the supervisor did not answer the auto-sleep");
            return Ok(());
        }
    }
    let Some(agent) = store::agents::get(pool, agent_id).await? else { return Ok(()) };
    store::agents::set_desired_state(pool, agent_id, "asleep").await?;
    let (idle_secs, after_secs) = (due.idle.as_secs(), due.after.as_secs());
    tracing::info!(agent.id = %agent_id, idle_secs, after_secs, "an idle agent was put to sleep");
    store::audit::append(
        pool,
        store::audit::AuditRecord {
            workspace_id: agent.workspace_id,
            actor_user_id: None,
            action: "agent.auto_slept",
            resource_type: "agent",
            resource_id: agent_id.to_string(),
            detail: serde_json::json!({"name": agent.name, "idle_secs": idle_secs, "auto_sleep_secs": after_secs}),
        },
    )
    .await?;
    let message = format!("the agent was idle for {idle_secs} s and was put to sleep; the next prompt wakes it");
    let events: Vec<NewEvent> = store::sessions::list_ids(pool, agent_id)
        .await?
        .into_iter()
        .map(|session| NewEvent::notice(session, NoticeCode::AutoSleep, message.clone()))
        .collect();
    if !events.is_empty()
        && let Err(error) = appender.append(events, Vec::new()).await
    {
        tracing::warn!(?error, agent.id = %agent_id, "storing the auto-sleep notices");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idle_agents_sleep_after_their_own_time_or_the_server_s() {
        let now = Instant::now();
        let wall = Utc::now();
        let ago = |s: u64| now.checked_sub(Duration::from_secs(s)).unwrap_or(now);
        let (server, own_short, never, busy_output, deleted) =
            (AgentId::new(), AgentId::new(), AgentId::new(), AgentId::new(), AgentId::new());
        let candidates = [
            (server, ago(100)),
            (own_short, ago(20)),
            (never, ago(1000)),
            (busy_output, ago(1000)),
            (deleted, ago(1000)),
        ];
        let settings = HashMap::from([(server, None), (own_short, Some(10)), (never, Some(0)), (busy_output, None)]);
        // Output 5 s ago counts as use, whatever the host saw.
        let last_events = HashMap::from([
            (busy_output, wall - chrono::Duration::seconds(5)),
            (server, wall - chrono::Duration::seconds(500)),
        ]);
        let found = due(now, wall, &candidates, &settings, 60, &last_events);
        let ids: Vec<AgentId> = found.iter().map(|d| d.agent_id).collect();
        assert_eq!(ids, vec![server, own_short], "longest idle first");
        assert_eq!(found[0].after, Duration::from_secs(60));
        assert!(found[1].idle >= Duration::from_secs(20) && found[1].after == Duration::from_secs(10));
        assert!(
            due(now, wall, &candidates, &settings, 0, &last_events).iter().all(|d| d.agent_id == own_short),
            "0: the server's default never sleeps"
        );
    }

    #[test]
    fn the_check_runs_often_enough_for_short_settings() {
        assert_eq!(interval(1800), Duration::from_secs(60));
        assert_eq!(interval(8), Duration::from_secs(2));
        assert_eq!(interval(2), Duration::from_secs(1));
        assert_eq!(interval(0), Duration::from_secs(60));
    }
}
