//! A new agent taking a sandbox from the warm pool (`sandbox::warm_pool`): the agent was created
//! with the pooled sandbox's id; here its token moves to the agent, the agent's own limits are
//! applied to the running container, its address is recorded for the egress proxy, and the live
//! sandboxd connection goes to the agent's supervisor — so the first prompt starts the harness
//! at once. If any step fails the container is removed (the home stays) and the first prompt
//! makes it again, the cold way.

use crate::fleet::warm_pool::Claimed;
use crate::ids::AgentId;
use crate::state::AppState;
use crate::store;

/// The limits an agent was created with: cpus, memory (MiB), pids.
pub type Limits = (f64, i32, i32);

/// Hands `claimed` to the agent just created with its id.
pub async fn take_over(state: &AppState, agent_id: AgentId, limits: Limits, claimed: Claimed) {
    match hand_over(state, agent_id, limits, &claimed.handle).await {
        Ok(()) => {
            let held = claimed.held;
            state.dispatch.attach(agent_id, held.link, held.hello, held.inbox).await;
            tracing::info!(agent.id = %agent_id, "the agent took a sandbox from the warm pool");
        }
        Err(error) => {
            tracing::warn!(%error, agent.id = %agent_id, "taking a pooled sandbox failed; its first prompt makes one");
            claimed.held.link.close();
            if let Err(error) = state.driver.remove_container(agent_id).await {
                tracing::warn!(%error, agent.id = %agent_id, "removing the pooled container");
            }
            let _ = store::warm_pool::delete(&state.pool, agent_id).await;
        }
    }
}

async fn hand_over(state: &AppState, agent_id: AgentId, limits: Limits, handle: &str) -> anyhow::Result<()> {
    anyhow::ensure!(store::warm_pool::claim(&state.pool, agent_id, handle).await?, "the sandbox was not pooled");
    let config = &state.config;
    if limits != (config.default_cpus, config.default_memory_mib, config.default_pids_limit) {
        let (cpus, memory_mib, pids_limit) = limits;
        state.driver.update_limits(agent_id, cpus, memory_mib, pids_limit).await?;
    }
    let addr = state.driver.source_addr(agent_id).await?;
    store::sandboxes::set_source_addr(&state.pool, agent_id, addr).await?;
    Ok(())
}
