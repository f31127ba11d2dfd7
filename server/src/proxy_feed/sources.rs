//! Which client addresses the proxy admits each agent's credentials from. The address recorded
//! for its sandbox when there is one; when a reading comes back empty (the driver could not
//! tell: its network holder or Pod was gone for a moment), the last address the feed knew for it
//! stays — an empty list is never written for an agent that once had an address. The feed
//! remembers across restarts by reading the file it last wrote.
//!
//! Credentials alone (the file's `any_source`) are written only for an agent that never had an
//! address **and** only when sandboxes do not use the proxy (no sandbox holds the credentials:
//! the local driver, or a server without `AGENTHOLD_PROXY_ADDR`). Where sandboxes use the proxy,
//! an agent without an address is refused until its sandbox has one.

use std::collections::{HashMap, HashSet};
use std::net::IpAddr;
use std::path::Path;

use serde::Deserialize;

use crate::ids::AgentId;

/// What the feed writes for one agent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Admitted {
    /// The addresses its credentials are admitted from.
    pub source_addrs: Vec<IpAddr>,
    /// From any address (only with no address).
    pub any_source: bool,
}

/// The last address known per agent.
#[derive(Debug, Default)]
pub struct Sources {
    last: HashMap<AgentId, Vec<IpAddr>>,
}

impl Sources {
    /// What to write for `agent` whose sandbox's address now reads `reading`; `sandboxes_use_proxy`
    /// when sandboxes hold proxy credentials (see the module doc).
    pub fn admit(&mut self, agent: AgentId, reading: Option<IpAddr>, sandboxes_use_proxy: bool) -> Admitted {
        if let Some(addr) = reading {
            self.last.insert(agent, vec![addr]);
        }
        match self.last.get(&agent) {
            Some(addrs) => Admitted { source_addrs: addrs.clone(), any_source: false },
            None => Admitted { source_addrs: Vec::new(), any_source: !sandboxes_use_proxy },
        }
    }

    /// Forgets the agents not in `present` (deleted ones).
    pub fn retain(&mut self, present: &HashSet<AgentId>) {
        self.last.retain(|agent, _| present.contains(agent));
    }

    /// Remembers the addresses of the file the feed last wrote at `path` (a missing or unreadable
    /// file remembers nothing). Blocking.
    pub fn seed_from_file(&mut self, path: &Path) {
        #[derive(Deserialize)]
        struct File {
            #[serde(default)]
            sandboxes: Vec<Entry>,
        }
        #[derive(Deserialize)]
        struct Entry {
            id: String,
            #[serde(default)]
            source_addrs: Vec<IpAddr>,
        }
        let Ok(bytes) = std::fs::read(path) else { return };
        let bytes = zeroize::Zeroizing::new(bytes);
        let Ok(file) = serde_json::from_slice::<File>(&bytes) else {
            tracing::warn!(path = %path.display(), "the last proxy configuration does not parse: no sandbox address is remembered from it");
            return;
        };
        for entry in file.sandboxes {
            if let (Ok(agent), false) = (entry.id.parse::<AgentId>(), entry.source_addrs.is_empty()) {
                self.last.entry(agent).or_insert(entry.source_addrs);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().expect("test address")
    }

    #[test]
    fn an_empty_reading_keeps_the_last_address_never_any() {
        let mut sources = Sources::default();
        let agent = AgentId::new();
        let known = sources.admit(agent, Some(ip("172.30.5.2")), true);
        assert_eq!(known, Admitted { source_addrs: vec![ip("172.30.5.2")], any_source: false });
        // The driver answers "none": the address stays, whether sandboxes use the proxy or not.
        assert_eq!(sources.admit(agent, None, true), known);
        assert_eq!(sources.admit(agent, None, false), known);
        // A new address replaces it.
        let moved = sources.admit(agent, Some(ip("172.30.6.2")), true);
        assert_eq!(moved.source_addrs, vec![ip("172.30.6.2")]);
    }

    #[test]
    fn an_agent_that_never_had_an_address_is_refused_where_sandboxes_use_the_proxy() {
        let mut sources = Sources::default();
        assert_eq!(
            sources.admit(AgentId::new(), None, true),
            Admitted { source_addrs: Vec::new(), any_source: false },
            "refused until its sandbox has an address"
        );
        assert_eq!(
            sources.admit(AgentId::new(), None, false),
            Admitted { source_addrs: Vec::new(), any_source: true },
            "no sandbox holds the credentials (local driver, or no proxy for sandboxes)"
        );
    }

    #[test]
    fn deleted_agents_are_forgotten_and_the_last_file_is_remembered() {
        let mut sources = Sources::default();
        let (kept, gone) = (AgentId::new(), AgentId::new());
        sources.admit(kept, Some(ip("172.30.5.2")), true);
        sources.admit(gone, Some(ip("172.30.5.3")), true);
        sources.retain(&HashSet::from([kept]));
        assert_eq!(sources.admit(gone, None, true).source_addrs, Vec::<IpAddr>::new());
        assert_eq!(sources.admit(kept, None, true).source_addrs, vec![ip("172.30.5.2")]);

        // After a restart: what the file held is the last address known.
        let dir = std::env::temp_dir().join(format!("agenthold-feed-sources-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&dir).expect("dir");
        let path = dir.join("proxy.json");
        let before = AgentId::new();
        let file = serde_json::json!({
            "version": 3, "ca": {"cert": "/ca.pem", "key": "/ca-key.pem"},
            "sandboxes": [
                {"id": before.to_string(), "username": "sbx-1", "password": "pw", "source_addrs": ["172.30.7.2"], "allow": [], "inject": []},
                {"id": "not-an-agent-id", "username": "sbx-2", "password": "pw", "source_addrs": ["172.30.7.3"], "allow": [], "inject": []}
            ]
        });
        std::fs::write(&path, serde_json::to_vec(&file).expect("json")).expect("write");
        let mut restarted = Sources::default();
        restarted.seed_from_file(&path);
        assert_eq!(restarted.admit(before, None, true).source_addrs, vec![ip("172.30.7.2")]);
        let mut none = Sources::default();
        none.seed_from_file(&dir.join("missing.json"));
        assert!(none.last.is_empty());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
