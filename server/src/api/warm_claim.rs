//! A new agent taking a sandbox from the warm pool (`fleet::warm_pool`): the agent was created
//! with the pooled sandbox's id; here its token moves to the agent, the agent's own limits are
//! applied to the running container, its address is recorded for the egress proxy, and the live
//! sandboxd connection goes to the agent's supervisor — so the first prompt starts the harness
//! at once. If any step fails the container is removed (the home stays) and the first prompt
//! makes it again, the cold way.
//!
//! A sandbox whose harness the pool started (`fleet::pooled_harness`) is bound to the agent
//! first: the pool's proxy identity becomes the agent's (its secrets were attached under the
//! pool's placeholders when it was created), then the start the agent's own harness would have
//! is compared with the pooled one. The same: the harness is recorded as the agent's (in the
//! transaction that moves the token) and handed over running — the supervisor takes it over as
//! after a restart. Not: why is logged and audited, and the pooled harness is dropped (the
//! supervisor's takeover does not know it, so sandboxd ends it); the agent keeps the sandbox.
//! The agent's id is the sandbox's, so no step, interrupted, leaves a sandbox bound to two
//! agents.

use std::time::Duration;

use serde_json::json;

use crate::fleet::pooled_harness::Warmed;
use crate::fleet::warm_pool::{Claimed, Taken};
use crate::ids::AgentId;
use crate::state::AppState;
use crate::store;
use crate::store::sandboxes::AdoptedHarness;

/// The limits an agent was created with: cpus, memory (MiB), pids.
pub type Limits = (f64, i32, i32);

/// How long a claim waits for the proxy feed to write the agent's binding (its address, identity
/// and secrets) before the harness may send its first request.
const FEED_WAIT: Duration = Duration::from_secs(5);

/// Hands `claimed` to the agent just created with its id.
pub async fn take_over(state: &AppState, agent_id: AgentId, limits: Limits, claimed: Claimed) {
    let held = match claimed.taken {
        Taken::Plain(held) => held,
        Taken::Harness(warmed) => return take_harness(state, agent_id, limits, &claimed.handle, *warmed).await,
    };
    match hand_over(state, agent_id, limits, &claimed.handle, None, None, None).await {
        Ok(_) => {
            state.dispatch.attach(agent_id, held.link, held.hello, held.inbox).await;
            tracing::info!(agent.id = %agent_id, "the agent took a sandbox from the warm pool");
        }
        Err(error) => {
            held.link.close();
            give_up(state, agent_id, &error).await;
        }
    }
}

/// The sandbox is removed (its home stays): the agent's first prompt makes it again.
async fn give_up(state: &AppState, agent_id: AgentId, error: &anyhow::Error) {
    tracing::warn!(%error, agent.id = %agent_id, "taking a pooled sandbox failed; its first prompt makes one");
    if let Err(error) = state.driver.remove_container(agent_id).await {
        tracing::warn!(%error, agent.id = %agent_id, "removing the pooled container");
    }
    let _ = store::warm_pool::delete(&state.pool, agent_id).await;
}

/// Binds a pooled harness to the agent and hands it over running, or drops it and hands over
/// the sandbox alone.
async fn take_harness(state: &AppState, agent_id: AgentId, limits: Limits, handle: &str, warmed: Warmed) {
    let started = std::time::Instant::now();
    let (agent, differences) = match bind(state, agent_id, &warmed).await {
        Ok(bound) => bound,
        Err(error) => {
            warmed.held.link.close();
            return give_up(state, agent_id, &error).await;
        }
    };
    crate::crash_points::reach(crate::crash_points::POOLED_CLAIM_BOUND);
    let adopted = differences.is_empty().then(|| AdoptedHarness {
        channel: crate::fleet::pooled_harness::CHANNEL,
        stdout_offset: warmed.stdout_read,
        init: warmed.init.clone(),
        env_names: warmed.plan.env.iter().map(|(name, _)| name.clone()).collect(),
        spare_session: warmed.spare_session.clone(),
    });
    let refused = refused_before_claim(state, agent_id, warmed.source_addr, warmed.plan.made_at_ms).await;
    let record = claim_record(&agent, &warmed.plan, &differences, refused);
    let bound = started.elapsed();
    let handed = hand_over(state, agent_id, limits, handle, adopted.as_ref(), warmed.source_addr, Some(record)).await;
    let feed_wait = match handed {
        Ok(feed_wait) => feed_wait,
        Err(error) => {
            warmed.held.link.close();
            return give_up(state, agent_id, &error).await;
        }
    };
    let handed_over = started.elapsed();
    let hello = if differences.is_empty() { warmed.hello() } else { warmed.held.hello.clone() };
    let held = warmed.held;
    state.dispatch.attach(agent_id, held.link, hello, held.inbox).await;
    let why = differences.join("; ");
    crate::metrics::pooled_harness_claimed(differences.is_empty());
    if differences.is_empty() {
        let ms = |d: Duration| format!("{:.1}", d.as_secs_f64() * 1000.0);
        tracing::info!(
            agent.id = %agent_id,
            bind_ms = %ms(bound),
            hand_over_ms = %ms(handed_over - bound),
            feed_wait_ms = %ms(feed_wait),
            total_ms = %ms(started.elapsed()),
            "the agent took a running harness from the warm pool"
        );
    } else {
        tracing::info!(agent.id = %agent_id, %why, "the agent's start differs from the pooled harness's: it took the sandbox, and its first prompt starts its own harness");
    }
}

/// Makes the pool's proxy identity the agent's, then says what differs between the agent's
/// own harness start and the pooled one (nothing: it may be handed over); with the agent as read.
async fn bind(
    state: &AppState,
    agent_id: AgentId,
    warmed: &Warmed,
) -> anyhow::Result<(store::agents::AgentRow, Vec<String>)> {
    let proxy = state.supervisors.proxy();
    if let (Some(identity), Some(proxy)) = (&warmed.plan.identity, proxy) {
        let mut tx = state.pool.begin().await?;
        anyhow::ensure!(
            crate::proxy_feed::identity::bind(&mut tx, &proxy.master_key, agent_id, identity).await?,
            "the agent is gone"
        );
        tx.commit().await?;
    }
    let agent = store::agents::get(&state.pool, agent_id).await?.ok_or_else(|| anyhow::anyhow!("the agent is gone"))?;
    let shared = crate::supervisor::sandbox_env::shared(&state.pool, proxy, state.driver.as_ref(), &agent).await?;
    let (tools_dir, home_dir) = (state.driver.tools_dir(), state.driver.home_dir(agent_id));
    let context = crate::harness::LaunchContext { agent: &agent, tools_dir: &tools_dir, home_dir: &home_dir };
    let mut differences = match crate::supervisor::sandbox_env::harness_start(&context, shared) {
        Ok(start) => {
            let user = state.driver.sandbox_user();
            crate::fleet::pooled_harness::differences(&warmed.plan, &start, &home_dir, user.as_deref())
        }
        Err(message) => vec![format!("its harness cannot start: {message}")],
    };
    if store::repos::get(&state.pool, agent_id).await?.is_some() {
        differences.push("a repository is cloned before its harness starts".to_owned());
    }
    if state.supervisors.postures().gate(&agent, &home_dir).is_err() {
        differences.push("its posture cannot run".to_owned());
    }
    Ok((agent, differences))
}

/// How many requests the proxy refused from the sandbox's address since its harness started
/// (its credentials were nobody's: nothing left), from the proxy's report; `0` without one.
async fn refused_before_claim(
    state: &AppState,
    agent_id: AgentId,
    known_addr: Option<std::net::IpAddr>,
    since_ms: u64,
) -> u64 {
    let Some(path) = state.supervisors.proxy_report() else { return 0 };
    let addr = match known_addr {
        Some(addr) => addr,
        None => match state.driver.source_addr(agent_id).await {
            Ok(Some(addr)) => addr,
            _ => return 0,
        },
    };
    let path = path.to_owned();
    let report = tokio::task::spawn_blocking(move || agenthold_proxy::cut::Report::read(&path)).await.ok().flatten();
    report.map_or(0, |r| crate::fleet::pooled_harness::refused_since(&r, addr, since_ms))
}

/// The audit record of the claim and the binding: which pool profile, which variables'
/// placeholders are now the agent's, how many requests the proxy refused its sandbox before the
/// claim, and whether the running harness was taken (else why not). Never a value.
fn claim_record<'a>(
    agent: &store::agents::AgentRow,
    plan: &crate::fleet::pooled_harness::Plan,
    differences: &[String],
    refused: u64,
) -> store::audit::AuditRecord<'a> {
    let bound: Vec<&String> = plan.placeholders.keys().collect();
    store::audit::AuditRecord {
        workspace_id: agent.workspace_id,
        actor_user_id: agent.created_by,
        action: "agent.pooled_harness_claimed",
        resource_type: "agent",
        resource_id: agent.id.to_string(),
        detail: json!({
            "name": agent.name,
            "profile": plan.profile.to_string(),
            "bound_variables": bound,
            "proxy_identity_bound": plan.identity.is_some(),
            "refused_before_claim": refused,
            "harness_taken": differences.is_empty(),
            "why_not": (!differences.is_empty()).then(|| differences.join("; ")),
        }),
    }
}

/// Moves the token, records an adopted harness, the sandbox's address (`known_addr`, else the
/// engine's) and the claim's audit record in one transaction — one change for the proxy feed, and
/// no claim unaudited —, applies the agent's
/// limits and, for an adopted harness, has the feed write the agent at once and waits for it;
/// how long it waited for the feed.
async fn hand_over(
    state: &AppState,
    agent_id: AgentId,
    limits: Limits,
    handle: &str,
    adopted: Option<&AdoptedHarness>,
    known_addr: Option<std::net::IpAddr>,
    audit: Option<store::audit::AuditRecord<'_>>,
) -> anyhow::Result<Duration> {
    let addr = match known_addr {
        Some(addr) => Some(addr),
        None => state.driver.source_addr(agent_id).await?,
    };
    let mut tx = state.pool.begin().await?;
    anyhow::ensure!(store::warm_pool::claim(&mut *tx, agent_id, handle).await?, "the sandbox was not pooled");
    if let Some(harness) = adopted {
        store::sandboxes::adopt_harness(&mut tx, agent_id, harness).await?;
    }
    store::sandboxes::set_source_addr(&mut *tx, agent_id, addr).await?;
    if let Some(record) = audit {
        store::audit::append(&mut *tx, record).await?;
    }
    tx.commit().await?;
    // A running harness sends its first request as soon as it is prompted: the proxy must know
    // the agent by then (its identity, address and secrets, all committed before this write).
    let proxy = state.supervisors.proxy();
    let waiting = match (addr, adopted, proxy.and_then(|p| p.written.clone())) {
        (Some(addr), Some(_), Some(written)) => {
            if let Some(proxy) = proxy {
                proxy.nudge.notify_one();
            }
            Some((addr, written))
        }
        _ => None,
    };
    let config = &state.config;
    if limits != (config.default_cpus, config.default_memory_mib, config.default_pids_limit) {
        let (cpus, memory_mib, pids_limit) = limits;
        state.driver.update_limits(agent_id, cpus, memory_mib, pids_limit).await?;
    }
    let feed_started = std::time::Instant::now();
    if let Some((addr, mut written)) = waiting {
        let has = |w: &crate::proxy_feed::task::Written| w.agent_from(agent_id, addr);
        if tokio::time::timeout(FEED_WAIT, written.wait_for(has)).await.is_err() {
            tracing::warn!(agent.id = %agent_id, "the proxy feed has not written the claimed sandbox yet; handing it over anyway");
        }
    }
    Ok(feed_started.elapsed())
}
