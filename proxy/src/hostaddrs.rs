//! Every address of the proxy's own host, refused as a destination (a public IPv4 on an
//! interface, a global IPv6, a bridge gateway…): read from the kernel at start and again every
//! `host_addrs_refresh_secs`, kept in a [`HostAddrs`] every connection reads.
//!
//! Read from `/proc/net` of the proxy's network namespace (what `getifaddrs` would list, with
//! no new dependency and no `unsafe`: the workspace forbids it and no crate already in the tree
//! wraps `getifaddrs`): IPv4 from the `host LOCAL` entries of `/proc/net/fib_trie` (the
//! addresses the kernel delivers locally), IPv6 from `/proc/net/if_inet6`. Both files are read
//! up to [`MAX_FILE_BYTES`].

use std::io::Read;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;

use parking_lot::RwLock;

/// The most bytes read from each file (a host with thousands of interfaces stays well below).
pub const MAX_FILE_BYTES: u64 = 16 * 1024 * 1024;

/// The host's addresses as last read.
#[derive(Debug, Default)]
pub struct HostAddrs {
    current: RwLock<Arc<Vec<IpAddr>>>,
}

impl HostAddrs {
    /// The addresses as last read.
    pub fn get(&self) -> Arc<Vec<IpAddr>> {
        self.current.read().clone()
    }

    /// Replaces them (sorted, without duplicates); says whether they changed.
    pub fn set(&self, mut addrs: Vec<IpAddr>) -> bool {
        addrs.sort_unstable();
        addrs.dedup();
        let mut current = self.current.write();
        if **current == addrs {
            return false;
        }
        *current = Arc::new(addrs);
        true
    }
}

/// The addresses of this host's interfaces (in the proxy's network namespace). Blocking.
pub fn read() -> std::io::Result<Vec<IpAddr>> {
    let mut addrs = parse_fib_trie(&read_bounded("/proc/net/fib_trie")?);
    match read_bounded("/proc/net/if_inet6") {
        Ok(text) => addrs.extend(parse_if_inet6(&text)),
        // A kernel without IPv6 has no such file.
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
        Err(error) => return Err(error),
    }
    Ok(addrs)
}

fn read_bounded(path: &str) -> std::io::Result<String> {
    let mut text = String::new();
    std::fs::File::open(path)?.take(MAX_FILE_BYTES).read_to_string(&mut text)?;
    Ok(text)
}

/// The local IPv4 addresses in `/proc/net/fib_trie`: a leaf line `|-- a.b.c.d` followed by a
/// `/32 host LOCAL` line.
pub fn parse_fib_trie(text: &str) -> Vec<IpAddr> {
    let mut found = Vec::new();
    let mut leaf: Option<Ipv4Addr> = None;
    for line in text.lines() {
        let line = line.trim();
        if let Some(rest) = line.strip_prefix("|--") {
            leaf = rest.trim().parse().ok();
        } else if line.starts_with('/') {
            let mut words = line.split_whitespace();
            let is_local = (words.next(), words.next(), words.next()) == (Some("/32"), Some("host"), Some("LOCAL"));
            if is_local && let Some(ip) = leaf {
                found.push(IpAddr::V4(ip));
            }
        } else {
            leaf = None;
        }
    }
    found
}

/// The IPv6 addresses in `/proc/net/if_inet6` (32 hex digits first on each line).
pub fn parse_if_inet6(text: &str) -> Vec<IpAddr> {
    text.lines()
        .filter_map(|line| {
            let word = line.split_whitespace().next()?;
            if word.len() != 32 {
                return None;
            }
            u128::from_str_radix(word, 16).ok().map(|bits| IpAddr::V6(Ipv6Addr::from(bits)))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIB_TRIE: &str = "Main:
  +-- 0.0.0.0/0 3 0 5
     |-- 0.0.0.0
        /0 universe UNICAST
     +-- 127.0.0.0/8 2 0 2
        +-- 127.0.0.0/31 1 0 0
           |-- 127.0.0.0
              /8 host LOCAL
           |-- 127.0.0.1
              /32 host LOCAL
        |-- 127.255.255.255
           /32 link BROADCAST
     |-- 198.51.100.7
        /32 host LOCAL
        /24 link UNICAST
     |-- 192.0.1.7
        /24 link UNICAST
        /32 host LOCAL
Local:
  +-- 0.0.0.0/0 3 0 5
     |-- 198.51.100.7
        /32 host LOCAL
";

    #[test]
    fn local_ipv4_addresses_come_from_host_local_leaves() {
        let mut found = parse_fib_trie(FIB_TRIE);
        found.sort_unstable();
        found.dedup();
        let expected: Vec<IpAddr> =
            ["127.0.0.1", "192.0.1.7", "198.51.100.7"].iter().map(|s| s.parse().expect("addr")).collect();
        assert_eq!(found, expected);
        assert!(parse_fib_trie("garbage\n|-- not an address\n/32 host LOCAL\n").is_empty());
    }

    #[test]
    fn ipv6_addresses_come_from_if_inet6() {
        let text = "00000000000000000000000000000001 01 80 10 80       lo\n\
                    2a0100000000000000000000000000a7 02 40 00 80     eth0\n\
                    short 02 40\n";
        let expected: Vec<IpAddr> = ["::1", "2a01::a7"].iter().map(|s| s.parse().expect("addr")).collect();
        assert_eq!(parse_if_inet6(text), expected);
    }

    #[test]
    fn this_host_lists_its_loopback_address() {
        let found = read().expect("reading /proc/net");
        assert!(found.contains(&IpAddr::V4(Ipv4Addr::LOCALHOST)), "{found:?}");
    }

    /// Real kernel output: addresses put on a veth interface in a network namespace made (and
    /// removed) here, never touching the host's own interfaces. Needs root and `ip`; says so and
    /// passes without them.
    #[test]
    fn addresses_in_a_namespace_of_the_tests_own_are_read() {
        use std::process::Command;
        let name = format!("ahp-test-{:08x}", rand::random::<u32>());
        let ip = |args: &[&str]| Command::new("ip").args(args).output().map(|o| o.status.success()).unwrap_or(false);
        if !ip(&["netns", "add", &name]) {
            eprintln!("skipped: cannot make a network namespace here (needs root and iproute2)");
            return;
        }
        struct Gone(String);
        impl Drop for Gone {
            fn drop(&mut self) {
                let _ = std::process::Command::new("ip").args(["netns", "del", &self.0]).output();
            }
        }
        let _gone = Gone(name.clone());
        for args in [
            vec!["link", "add", "ahp0", "type", "veth", "peer", "name", "ahp1"],
            vec!["link", "set", "ahp0", "up"],
            vec!["link", "set", "ahp1", "up"],
            vec!["addr", "add", "192.0.1.7/32", "dev", "ahp0"],
            vec!["-6", "addr", "add", "2a01:db9::7/128", "dev", "ahp0", "nodad"],
        ] {
            let mut full = vec!["netns", "exec", name.as_str(), "ip"];
            full.extend(args.iter().copied());
            assert!(ip(&full), "ip {full:?}");
        }
        let cat = |file: &str| {
            let out = Command::new("ip").args(["netns", "exec", &name, "cat", file]).output().expect("cat");
            String::from_utf8_lossy(&out.stdout).into_owned()
        };
        let v4 = parse_fib_trie(&cat("/proc/net/fib_trie"));
        let v6 = parse_if_inet6(&cat("/proc/net/if_inet6"));
        assert!(v4.contains(&"192.0.1.7".parse().expect("addr")), "{v4:?}");
        assert!(v6.contains(&"2a01:db9::7".parse().expect("addr")), "{v6:?}");
        assert!(
            !v4.contains(&"192.0.1.0".parse().expect("addr")) && !v4.contains(&"192.0.1.255".parse().expect("addr"))
        );
    }

    #[test]
    fn set_reports_changes_only() {
        let addrs = HostAddrs::default();
        let a: IpAddr = "192.0.1.7".parse().expect("addr");
        assert!(addrs.set(vec![a, a]));
        assert!(!addrs.set(vec![a]));
        assert_eq!(*addrs.get(), vec![a]);
    }
}
