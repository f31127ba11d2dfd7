//! The host firewall that confines Docker sandboxes (docs/security.md, "Egress"). Each confined
//! sandbox sits alone on an internal Docker network, whose bridge Docker never forwards out of;
//! but the host itself still answers on every address it has, including the bridge's gateway
//! (PROXY.md §3.3). So every packet a sandbox sends to the host goes through one chain per server
//! instance, jumped to from `INPUT` for the instance's bridges (all named
//! `<interface prefix><agent hash>`, see [`bridge_name`]): TCP to the tunnel's and the proxy's
//! ports is accepted (and answers to connections the host opened), all else rejected; over IPv6
//! everything is dropped.
//!
//! [`Rules`] is the pure part (the `iptables` argument lists, unit-tested); [`install`] and
//! [`remove`] run them. Installing is idempotent (the chain is flushed and refilled, the jump
//! added once), so a restarted server simply installs again.

use std::process::Command;

use sha2::Digest;

use crate::ids::AgentId;

/// Linux's limit on an interface name's length (`IFNAMSIZ` less the NUL).
pub const IFNAME_MAX: usize = 15;

/// The firewall of one server instance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rules {
    /// The chain's name, `AGENTHOLD-<instance tag>`.
    pub chain: String,
    /// What every confined bridge's name starts with, `ah<instance tag>`.
    pub interface_prefix: String,
    /// TCP ports on the host a sandbox may reach (the tunnel's, the proxy's).
    pub allowed_tcp_ports: Vec<u16>,
}

/// Five hex digits naming a server instance in bridge and chain names.
fn instance_tag(instance: &str) -> String {
    let digest = sha2::Sha256::digest(instance.as_bytes());
    hex::encode(&digest[..3])[..5].to_owned()
}

/// The interface prefix of `instance`'s bridges.
pub fn interface_prefix(instance: &str) -> String {
    format!("ah{}", instance_tag(instance))
}

/// The bridge name of an agent's confined network: the instance's prefix and eight hex digits
/// of a hash of the agent's id (its leading digits are a timestamp, not random), 15 characters.
pub fn bridge_name(instance: &str, agent_id: AgentId) -> String {
    let digest = sha2::Sha256::digest(agent_id.0.as_bytes());
    format!("{}{}", interface_prefix(instance), hex::encode(&digest[..4]))
}

impl Rules {
    /// The rules for `instance`, letting its sandboxes reach `allowed_tcp_ports` on the host.
    pub fn new(instance: &str, allowed_tcp_ports: impl IntoIterator<Item = u16>) -> Self {
        let mut ports: Vec<u16> = allowed_tcp_ports.into_iter().collect();
        ports.sort_unstable();
        ports.dedup();
        Self {
            chain: format!("AGENTHOLD-{}", instance_tag(instance).to_uppercase()),
            interface_prefix: interface_prefix(instance),
            allowed_tcp_ports: ports,
        }
    }

    /// `INPUT`'s jump into the chain, for every bridge of the instance (`iptables` wildcard).
    pub fn jump(&self) -> Vec<String> {
        args(&["INPUT", "-i", &format!("{}+", self.interface_prefix), "-j", &self.chain])
    }

    /// The IPv4 chain's rules, in order (each without the `-A <chain>`).
    pub fn ipv4_rules(&self) -> Vec<Vec<String>> {
        // Answers to connections the host opened (a health check, an operator's probe): a
        // sandbox cannot open one itself.
        let mut rules = vec![args(&["-m", "conntrack", "--ctstate", "ESTABLISHED,RELATED", "-j", "ACCEPT"])];
        rules.extend(
            self.allowed_tcp_ports
                .iter()
                .map(|port| args(&["-p", "tcp", "--dport", &port.to_string(), "-j", "ACCEPT"])),
        );
        // A refused connection fails at once rather than after a timeout.
        rules.push(args(&["-p", "tcp", "-j", "REJECT", "--reject-with", "tcp-reset"]));
        rules.push(args(&["-j", "REJECT", "--reject-with", "icmp-port-unreachable"]));
        rules
    }

    /// The IPv6 chain's rules: sandboxes talk to the host over IPv4 only.
    pub fn ipv6_rules(&self) -> Vec<Vec<String>> {
        vec![args(&["-j", "DROP"])]
    }
}

fn args(parts: &[&str]) -> Vec<String> {
    parts.iter().map(|p| (*p).to_owned()).collect()
}

/// Installing or removing the rules failed.
#[derive(Debug, thiserror::Error)]
#[error("{command}: {message}")]
pub struct FirewallError {
    /// The command that failed.
    pub command: String,
    /// What it said.
    pub message: String,
}

/// Runs `program` with `arguments` (`-w`: waits for the xtables lock other servers may hold).
fn run(program: &str, arguments: &[String]) -> Result<(), FirewallError> {
    let command = format!("{program} -w {}", arguments.join(" "));
    let output = Command::new(program)
        .arg("-w")
        .args(arguments)
        .output()
        .map_err(|e| FirewallError { command: command.clone(), message: e.to_string() })?;
    if output.status.success() {
        Ok(())
    } else {
        Err(FirewallError { command, message: String::from_utf8_lossy(&output.stderr).trim().to_owned() })
    }
}

/// Whether `program` accepts `arguments` (a `-C` check).
fn holds(program: &str, arguments: &[String]) -> bool {
    run(program, arguments).is_ok()
}

/// The `iptables-restore --noflush` input that (re)fills the chain in one atomic commit: the
/// chain's declaration creates it, or empties an existing one, in the same transaction that adds
/// its rules, so it is never seen empty.
pub fn restore_input(chain: &str, chain_rules: &[Vec<String>]) -> String {
    let mut input = format!("*filter\n:{chain} - [0:0]\n");
    for rule in chain_rules {
        input.push_str(&format!("-A {chain} {}\n", rule.join(" ")));
    }
    input.push_str("COMMIT\n");
    input
}

fn install_family(program: &str, rules: &Rules, chain_rules: &[Vec<String>]) -> Result<(), FirewallError> {
    let restore = format!("{program}-restore");
    let command = format!("{restore} -w --noflush");
    let mut child = Command::new(&restore)
        .args(["-w", "--noflush"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| FirewallError { command: command.clone(), message: e.to_string() })?;
    if let Some(mut stdin) = child.stdin.take() {
        use std::io::Write;
        stdin
            .write_all(restore_input(&rules.chain, chain_rules).as_bytes())
            .map_err(|e| FirewallError { command: command.clone(), message: e.to_string() })?;
    }
    let output =
        child.wait_with_output().map_err(|e| FirewallError { command: command.clone(), message: e.to_string() })?;
    if !output.status.success() {
        return Err(FirewallError { command, message: String::from_utf8_lossy(&output.stderr).trim().to_owned() });
    }
    let jump = rules.jump();
    if !holds(program, &with(&["-C"], &jump)) {
        // First in INPUT: before any rule that would accept the sandbox's packets.
        let mut insert = vec!["-I".to_owned(), jump[0].clone(), "1".to_owned()];
        insert.extend(jump[1..].iter().cloned());
        run(program, &insert)?;
    }
    Ok(())
}

fn with(head: &[&str], tail: &[String]) -> Vec<String> {
    head.iter().map(|p| (*p).to_owned()).chain(tail.iter().cloned()).collect()
}

/// Installs the rules (IPv4 with `iptables`; IPv6 with `ip6tables`, unless the host has none).
/// Blocking: call it from a blocking context.
pub fn install(rules: &Rules) -> Result<(), FirewallError> {
    install_family("iptables", rules, &rules.ipv4_rules())?;
    if holds("ip6tables", &args(&["-n", "-L", "INPUT"])) {
        install_family("ip6tables", rules, &rules.ipv6_rules())?;
    } else {
        tracing::warn!("ip6tables is not available: IPv6 from sandboxes to the host is not filtered");
    }
    Ok(())
}

/// Removes the rules (what is already gone is fine). Blocking.
pub fn remove(rules: &Rules) {
    for program in ["iptables", "ip6tables"] {
        let jump = rules.jump();
        while holds(program, &with(&["-D"], &jump)) {}
        let _ = run(program, &args(&["-F", &rules.chain]));
        let _ = run(program, &args(&["-X", &rules.chain]));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bridge_names_fit_linux_and_share_the_instance_prefix() {
        let a = bridge_name("agenthold", AgentId::new());
        let b = bridge_name("agenthold", AgentId::new());
        assert_eq!(a.len(), IFNAME_MAX);
        assert_ne!(a, b);
        assert!(a.starts_with(&interface_prefix("agenthold")) && b.starts_with(&interface_prefix("agenthold")));
        assert!(!bridge_name("other", AgentId::new()).starts_with(&interface_prefix("agenthold")));
        assert!(a.chars().all(|c| c.is_ascii_alphanumeric()));
    }

    #[test]
    fn a_bridge_name_is_stable_for_an_agent() {
        let agent = AgentId::new();
        assert_eq!(bridge_name("x", agent), bridge_name("x", agent));
    }

    #[test]
    fn only_the_allowed_ports_are_accepted_and_everything_else_is_refused() {
        let rules = Rules::new("agenthold", [7701, 3128, 7701]);
        assert_eq!(rules.allowed_tcp_ports, [3128, 7701]);
        let ipv4 = rules.ipv4_rules();
        assert_eq!(ipv4.len(), 5);
        assert_eq!(ipv4[0].join(" "), "-m conntrack --ctstate ESTABLISHED,RELATED -j ACCEPT");
        assert_eq!(ipv4[1].join(" "), "-p tcp --dport 3128 -j ACCEPT");
        assert_eq!(ipv4[2].join(" "), "-p tcp --dport 7701 -j ACCEPT");
        assert_eq!(ipv4[3].join(" "), "-p tcp -j REJECT --reject-with tcp-reset");
        assert_eq!(ipv4[4].join(" "), "-j REJECT --reject-with icmp-port-unreachable");
        assert_eq!(rules.ipv6_rules(), [args(&["-j", "DROP"])]);
        assert!(rules.chain.len() <= 28, "iptables chain names are at most 28 characters");
        assert_eq!(rules.jump().join(" "), format!("INPUT -i {}+ -j {}", rules.interface_prefix, rules.chain));
    }

    #[test]
    fn the_chain_is_declared_and_filled_in_one_commit() {
        let rules = Rules::new("agenthold", [7701]);
        let input = restore_input(&rules.chain, &rules.ipv4_rules());
        let lines: Vec<&str> = input.lines().collect();
        assert_eq!(lines[0], "*filter");
        assert_eq!(lines[1], format!(":{} - [0:0]", rules.chain));
        assert_eq!(lines[3], format!("-A {} -p tcp --dport 7701 -j ACCEPT", rules.chain));
        assert_eq!(lines.last(), Some(&"COMMIT"));
        assert_eq!(lines.len(), 2 + 4 + 1);
    }

    #[test]
    fn no_ports_means_nothing_is_accepted() {
        let rules = Rules::new("agenthold", []);
        let accepting: Vec<_> = rules.ipv4_rules().into_iter().filter(|r| r.contains(&"ACCEPT".to_owned())).collect();
        assert_eq!(accepting, [args(&["-m", "conntrack", "--ctstate", "ESTABLISHED,RELATED", "-j", "ACCEPT"])]);
    }
}
