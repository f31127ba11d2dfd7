//! Where and how agents' sandboxes run: the driver, the images agents may use, what a Docker
//! sandbox's network reaches and who installs its firewall, disk limits, the pool of agent
//! networks' subnets, and where the sandboxd and fakeagent binaries are.

use std::path::PathBuf;

use clap::ValueEnum;

use super::Config;

/// Which sandbox driver runs agents.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum DriverKind {
    /// One Docker container per agent.
    Docker,
    /// sandboxd as a child process: NO isolation.
    Local,
    /// One Pod per agent on a Kubernetes cluster (docs/kubernetes.md).
    Kubernetes,
}

/// What a Docker sandbox's network reaches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Egress {
    /// The default: an internal network per sandbox; the host's firewall lets it reach the
    /// tunnel and the egress proxy only.
    Confined,
    /// A plain bridge network: the internet, the LAN and the host's services (not isolated).
    Open,
}

/// Who installs the host firewall rules confined sandboxes rely on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Firewall {
    /// The server, with `iptables` at start (it must run as root, or with `CAP_NET_ADMIN`).
    Iptables,
    /// The operator (docs/security.md lists the rules); the server installs none.
    External,
}

/// Whether Docker sandboxes get disk limits (`AGENTHOLD_SANDBOX_DISK_LIMITS`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, ValueEnum)]
pub enum DiskLimits {
    /// Where the engine can enforce them (a warning, once, says where it cannot).
    #[default]
    Auto,
    /// A sandbox is not started on an engine that cannot enforce both.
    Required,
    /// None.
    Off,
}

/// The default pool of agent networks' subnets: not Docker's default pools (172.17–31.0.0/16,
/// 192.168.0.0/16) nor the dev engine's (`10.213.0.0/16`, scripts/dev/docker.sh).
pub const DEFAULT_POOL: &str = "10.214.0.0/16";
/// The default block: 16 addresses (the network, the gateway, 13 hosts, the broadcast).
pub const DEFAULT_BLOCK_PREFIX: u8 = 28;

/// One `AGENTHOLD_ALLOWED_IMAGES` entry: a reference, or a prefix ending in `*` (the only `*`).
pub(super) fn parse_image_pattern(text: &str) -> Result<String, String> {
    let text = text.trim();
    let body = text.strip_suffix('*').unwrap_or(text);
    if text.is_empty() || text.len() > 512 || body.contains('*') || text.chars().any(char::is_whitespace) {
        return Err(format!("{text:?}: an image reference, or a prefix ending in a single `*`"));
    }
    Ok(text.to_owned())
}

impl Config {
    /// Whether agents may use `image`: the default and base images, and the operator's list.
    pub fn image_allowed(&self, image: &str) -> bool {
        image == self.image
            || image == self.base_image
            || self.allowed_images.iter().any(|pattern| match pattern.strip_suffix('*') {
                Some(prefix) => image.starts_with(prefix),
                None => image == pattern,
            })
    }

    /// The directory holding sandboxd and fakeagent.
    pub fn sandbox_bin_dir(&self) -> PathBuf {
        if let Some(dir) = &self.sandbox_bin_dir {
            return dir.clone();
        }
        let exe = std::env::current_exe().unwrap_or_default();
        let dir = exe.parent().map(PathBuf::from).unwrap_or_default();
        // Test binaries live in target/<profile>/deps; the tools one level up.
        if dir.ends_with("deps") && !dir.join("sandboxd").exists() {
            return dir.parent().map(PathBuf::from).unwrap_or(dir);
        }
        dir
    }
}

/// The runtime a sandbox runs under when `AGENTHOLD_SANDBOX_RUNTIME` is not set.
pub const DEFAULT_RUNTIME: &str = "runc";

/// Checks a runtime's name as `AGENTHOLD_SANDBOX_RUNTIME` gives it (letters, digits, `-`, `_`, `.`).
pub fn parse_runtime(name: &str) -> Result<String, String> {
    let name = name.trim();
    if name.is_empty()
        || name.len() > 64
        || !name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
    {
        return Err(format!("{name:?}: a runtime name is letters, digits, '-', '_' or '.' (runc, runsc, …)"));
    }
    Ok(name.to_owned())
}

#[cfg(test)]
mod tests {
    use crate::config::parse;

    #[test]
    fn images_are_allowed_by_name_or_prefix_and_the_defaults_always() {
        let mut config =
            parse(&["--allowed-images", "registry.example.com/team/*, ghcr.io/me/agent:1.4"]).expect("parses");
        config.image = "agenthold/test:latest".to_owned(); // whatever the environment has
        config.base_image = "agenthold/base:latest".to_owned();
        for allowed in
            ["agenthold/test:latest", "agenthold/base:latest", "registry.example.com/team/x:2", "ghcr.io/me/agent:1.4"]
        {
            assert!(config.image_allowed(allowed), "{allowed}");
        }
        for refused in
            ["agenthold/test:other", "ghcr.io/me/agent:1.5", "registry.example.com/teammate:1", "busybox", ""]
        {
            assert!(!config.image_allowed(refused), "{refused}");
        }
        for bad in ["a*b", "**", "two words"] {
            assert!(parse(&["--allowed-images", bad]).is_err(), "{bad}");
        }
    }
}
