//! The shell's side of `DISK_FULL` ([`super::core`] decides when to ask): the driver checks
//! whether writes in the sandbox's home and writable layer still succeed, and [`finding`] says
//! what is full, against which limit, and what to do.

use super::Deps;
use crate::ids::AgentId;
use crate::sandbox::{DiskCheck, Fullness};

/// Whether the agent's sandbox disk is full: the `DISK_FULL` message, or `None` (room, or the
/// driver could not tell: logged).
pub async fn check(deps: &Deps, agent_id: AgentId) -> Option<String> {
    match deps.driver.disk_check(agent_id).await {
        Ok(found) => finding(&found, &deps.driver.home_dir(agent_id)),
        Err(error) => {
            tracing::warn!(%error, agent.id = %agent_id, "asking the sandbox whether its disk is full");
            None
        }
    }
}

/// What a check found, in words (`None`: nothing is full).
pub fn finding(found: &DiskCheck, home_dir: &str) -> Option<String> {
    let mut parts = Vec::new();
    match found.home {
        Fullness::Room => {}
        Fullness::AtLimit(mib) => parts.push(format!(
            "the sandbox's home ({home_dir}) is full: it holds its limit of {mib} MiB (its size when it was made; \
             limits.disk_mib). Writes there fail with \"No space left on device\" until files are removed"
        )),
        Fullness::EngineFull => parts.push(format!(
            "the sandbox's home ({home_dir}) has no room: it has no limit of its own, the Docker engine's disk is \
             full (its operator must free space)"
        )),
    }
    match found.writable_layer {
        Fullness::Room => {}
        Fullness::AtLimit(mib) => parts.push(format!(
            "the sandbox's files outside {home_dir} (its writable layer) reached their limit of {mib} MiB \
             (limits.disk_mib): remove files there, or raise the limit and rebuild the sandbox \
             (POST /api/v1/agents/{{id}}/rebuild; the home is kept)"
        )),
        Fullness::EngineFull => parts.push(format!(
            "the sandbox's files outside {home_dir} have no room: they have no limit of their own, the Docker \
             engine's disk is full (its operator must free space)"
        )),
    }
    (!parts.is_empty()).then(|| parts.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_finding_names_each_full_part_and_its_limit() {
        assert_eq!(finding(&DiskCheck::default(), "/home/agent"), None);
        let home = DiskCheck { home: Fullness::AtLimit(512), ..Default::default() };
        let text = finding(&home, "/home/agent").expect("full");
        assert!(text.contains("home (/home/agent) is full") && text.contains("512 MiB"), "{text}");
        let layer = DiskCheck { writable_layer: Fullness::AtLimit(256), ..Default::default() };
        let text = finding(&layer, "/home/agent").expect("full");
        assert!(text.contains("writable layer") && text.contains("256 MiB") && text.contains("rebuild"), "{text}");
        let both = DiskCheck { home: Fullness::EngineFull, writable_layer: Fullness::EngineFull };
        let text = finding(&both, "/home/agent").expect("full");
        assert_eq!(text.matches("engine's disk is full").count(), 2, "{text}");
    }
}
