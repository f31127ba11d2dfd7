//! Several Docker engines (docs/engines.md): the engines file (`AGENTHOLD_DOCKER_ENGINES`, JSON)
//! that lists them — the local one and remote ones reached over TCP with TLS client
//! certificates — with each one's capacity and what its sandboxes dial; and placement, the pure
//! choice of the engine a new agent goes on (the most room wins). [`super::multi`] routes each
//! agent's calls to its engine.

use std::net::IpAddr;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::LOCAL_ENGINE;

/// The engines file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EnginesFile {
    /// The engines, in order of preference when they have as much room.
    pub engines: Vec<EngineSpec>,
}

/// One engine of the file.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EngineSpec {
    /// Its name, recorded with each agent placed on it (`local`: the server's own engine).
    pub name: String,
    /// `tcp://host:port` of a remote engine (absent for `local`).
    #[serde(default)]
    pub host: Option<String>,
    /// The CA (PEM) that signed the remote engine's certificate.
    #[serde(default)]
    pub ca: Option<PathBuf>,
    /// The client certificate (PEM) the server presents to the remote engine.
    #[serde(default)]
    pub cert: Option<PathBuf>,
    /// The client certificate's private key (PEM).
    #[serde(default)]
    pub key: Option<PathBuf>,
    /// How many agents it may hold (each has a home volume there, and a container asleep or
    /// awake); 0: none new (the agents it holds stay).
    pub capacity: u32,
    /// The URL its sandboxes dial for the tunnel (unset: the server's `AGENTHOLD_TUNNEL_URL`).
    #[serde(default)]
    pub tunnel_url: Option<String>,
    /// `host:port` its sandboxes reach the egress proxy at (unset: `AGENTHOLD_PROXY_ADDR`).
    #[serde(default)]
    pub proxy_addr: Option<String>,
    /// The address the egress proxy sees its sandboxes' traffic come from, when it is not each
    /// sandbox's own (the proxy runs elsewhere and the engine's host forwards to it).
    #[serde(default)]
    pub proxy_source_addr: Option<IpAddr>,
    /// The IPv4 pool its agent networks' subnets are cut from (unset: the server's
    /// `AGENTHOLD_SANDBOX_SUBNET_POOL`), or `engine`.
    #[serde(default)]
    pub subnet_pool: Option<String>,
}

/// How a remote engine is reached: its host and the TLS files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Remote {
    /// `tcp://host:port`.
    pub host: String,
    /// The CA file.
    pub ca: PathBuf,
    /// The client certificate file.
    pub cert: PathBuf,
    /// The client key file.
    pub key: PathBuf,
}

impl EngineSpec {
    /// How to reach it (`None`: the local engine).
    pub fn remote(&self) -> Option<Remote> {
        Some(Remote {
            host: self.host.clone()?,
            ca: self.ca.clone()?,
            cert: self.cert.clone()?,
            key: self.key.clone()?,
        })
    }
}

/// Reads and checks the engines file; the error says what is wrong, and where.
pub fn load(path: &Path) -> Result<Vec<EngineSpec>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("reading {}: {e}", path.display()))?;
    let file: EnginesFile =
        serde_json::from_str(&text).map_err(|e| format!("{}: not a valid engines file: {e}", path.display()))?;
    validate(&file.engines).map_err(|e| format!("{}: {e}", path.display()))?;
    for engine in &file.engines {
        if let Some(remote) = engine.remote() {
            check_tls_files(&remote).map_err(|e| format!("{}: engine {}: {e}", path.display(), engine.name))?;
        }
    }
    Ok(file.engines)
}

/// Checks the engines (no file access): names, hosts, what each needs.
pub fn validate(engines: &[EngineSpec]) -> Result<(), String> {
    if engines.is_empty() {
        return Err("no engines listed".to_owned());
    }
    let mut seen = std::collections::HashSet::new();
    for engine in engines {
        let name = &engine.name;
        let valid = !name.is_empty()
            && name.len() <= 32
            && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && !name.starts_with('-');
        if !valid {
            return Err(format!("engine name {name:?}: 1 to 32 of a-z, 0-9 and -, not starting with -"));
        }
        if !seen.insert(name.as_str()) {
            return Err(format!("engine {name} is listed twice"));
        }
        let files = [&engine.ca, &engine.cert, &engine.key];
        if name == LOCAL_ENGINE {
            if engine.host.is_some() || files.iter().any(|f| f.is_some()) {
                return Err(format!(
                    "engine {LOCAL_ENGINE} is the server's own (DOCKER_HOST or the default socket): it takes no host, ca, cert or key"
                ));
            }
        } else {
            let host = engine.host.as_deref().ok_or_else(|| format!("engine {name}: host is missing"))?;
            let rest = host.strip_prefix("tcp://").ok_or_else(|| {
                format!("engine {name}: host {host:?} must be tcp://name:port (Docker's TLS port is usually 2376)")
            })?;
            let port = rest.trim_end_matches('/').rsplit_once(':').and_then(|(h, p)| (!h.is_empty()).then_some(p));
            if port.and_then(|p| p.parse::<u16>().ok()).is_none_or(|p| p == 0) {
                return Err(format!("engine {name}: host {host:?} must be tcp://name:port"));
            }
            if files.iter().any(|f| f.is_none()) {
                return Err(format!(
                    "engine {name}: ca, cert and key are all needed (remote engines are reached with TLS client certificates only)"
                ));
            }
        }
        if let Some(url) = &engine.tunnel_url
            && !(url.starts_with("ws://") || url.starts_with("wss://"))
        {
            return Err(format!("engine {name}: tunnel_url {url:?} must be ws:// or wss://"));
        }
        if let Some(addr) = &engine.proxy_addr
            && addr
                .rsplit_once(':')
                .and_then(|(h, p)| (!h.is_empty()).then(|| p.parse::<u16>().ok()).flatten())
                .is_none()
        {
            return Err(format!("engine {name}: proxy_addr {addr:?} must be host:port"));
        }
    }
    Ok(())
}

/// Reads the TLS files: the CA and the certificate must hold certificates, the key one key.
fn check_tls_files(remote: &Remote) -> Result<(), String> {
    use agenthold_plumbing::tls::pem;
    for (what, path) in [("ca", &remote.ca), ("cert", &remote.cert)] {
        pem::read_certs(path).map_err(|e| format!("{what} {e}"))?;
    }
    pem::read_key(&remote.key).map_err(|e| format!("key {e}"))?;
    Ok(())
}

/// An engine as placement sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Load<'a> {
    /// Its name.
    pub name: &'a str,
    /// How many agents it may hold.
    pub capacity: u32,
    /// How many it holds.
    pub agents: i64,
    /// Whether it answers (an unavailable engine gets no new agent).
    pub available: bool,
}

impl Load<'_> {
    /// Agents it may still take (negative: over capacity, after the capacity was lowered).
    fn room(&self) -> i64 {
        i64::from(self.capacity) - self.agents
    }
}

/// The engine a new agent goes on (its index): the available one with the most room; between
/// engines with as much room, the one listed first. `Err` says why none can take it (for the
/// `CAPACITY` answer).
pub fn place(engines: &[Load<'_>]) -> Result<usize, String> {
    let best = engines
        .iter()
        .enumerate()
        .filter(|(_, e)| e.available && e.room() > 0)
        // max_by_key keeps the last of equals: compare on (room, -index) so the first wins.
        .max_by_key(|(i, e)| (e.room(), std::cmp::Reverse(*i)))
        .map(|(i, _)| i);
    best.ok_or_else(|| {
        let each: Vec<String> = engines
            .iter()
            .map(|e| {
                if e.available {
                    format!("{} {}/{}", e.name, e.agents, e.capacity)
                } else {
                    format!("{} unavailable", e.name)
                }
            })
            .collect();
        format!("every Docker engine holds as many agents as it may ({})", each.join(", "))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load<'a>(name: &'a str, capacity: u32, agents: i64) -> Load<'a> {
        Load { name, capacity, agents, available: true }
    }

    #[test]
    fn the_engine_with_the_most_room_wins() {
        let engines = [load("local", 10, 8), load("a", 5, 1), load("b", 20, 17)];
        assert_eq!(place(&engines), Ok(1), "a has 4, local 2, b 3");
        let engines = [load("local", 1, 0), load("a", 100, 0)];
        assert_eq!(place(&engines), Ok(1));
    }

    #[test]
    fn ties_go_to_the_engine_listed_first() {
        let engines = [load("local", 4, 2), load("a", 3, 1), load("b", 2, 0)];
        assert_eq!(place(&engines), Ok(0));
        let engines = [load("b", 2, 0), load("a", 3, 1), load("local", 4, 2)];
        assert_eq!(place(&engines), Ok(0));
        // The same input always gives the same answer.
        assert!((0..10).all(|_| place(&engines) == Ok(0)));
    }

    #[test]
    fn full_and_unavailable_engines_are_skipped_and_refused() {
        let mut down = load("a", 10, 0);
        down.available = false;
        let engines = [load("local", 2, 2), down.clone(), load("b", 3, 2)];
        assert_eq!(place(&engines), Ok(2));
        let engines = [load("local", 2, 2), down, load("b", 3, 4), load("c", 0, 0)];
        let why = place(&engines).expect_err("no room");
        assert!(why.contains("local 2/2") && why.contains("a unavailable") && why.contains("b 4/3"), "{why}");
        assert!(place(&[]).is_err());
    }

    fn spec(text: &str) -> Result<Vec<EngineSpec>, String> {
        let file: EnginesFile = serde_json::from_str(text).map_err(|e| e.to_string())?;
        validate(&file.engines).map(|()| file.engines)
    }

    #[test]
    fn the_file_is_checked() {
        let good = r#"{"engines": [
            {"name": "local", "capacity": 5},
            {"name": "gpu-1", "host": "tcp://10.0.0.5:2376", "ca": "/c/ca.pem", "cert": "/c/cert.pem",
             "key": "/c/key.pem", "capacity": 50, "tunnel_url": "wss://agenthold.example:7701/tunnel",
             "proxy_addr": "10.0.0.5:3128", "proxy_source_addr": "10.0.0.5", "subnet_pool": "10.215.0.0/16"}
        ]}"#;
        let engines = spec(good).expect("valid");
        assert_eq!(engines[0].remote(), None);
        assert_eq!(engines[1].remote().map(|r| r.host), Some("tcp://10.0.0.5:2376".to_owned()));
        let bad = [
            (r#"{"engines": []}"#, "no engines"),
            (r#"{"engines": [{"name": "Local", "capacity": 1}]}"#, "engine name"),
            (r#"{"engines": [{"name": "local", "capacity": 1}, {"name": "local", "capacity": 2}]}"#, "twice"),
            (r#"{"engines": [{"name": "local", "host": "tcp://x:2376", "capacity": 1}]}"#, "takes no host"),
            (r#"{"engines": [{"name": "a", "capacity": 1}]}"#, "host is missing"),
            (
                r#"{"engines": [{"name": "a", "host": "http://x:2375", "ca": "/a", "cert": "/b", "key": "/c", "capacity": 1}]}"#,
                "tcp://",
            ),
            (
                r#"{"engines": [{"name": "a", "host": "tcp://x", "ca": "/a", "cert": "/b", "key": "/c", "capacity": 1}]}"#,
                "name:port",
            ),
            (
                r#"{"engines": [{"name": "a", "host": "tcp://x:2376", "ca": "/a", "capacity": 1}]}"#,
                "client certificates",
            ),
            (r#"{"engines": [{"name": "local", "capacity": 1, "tunnel_url": "http://x"}]}"#, "ws://"),
            (r#"{"engines": [{"name": "local", "capacity": 1, "proxy_addr": "x"}]}"#, "host:port"),
            (r#"{"engines": [{"name": "local", "capacity": -1}]}"#, "invalid value"),
            (r#"{"engines": [{"name": "local", "capacity": 1, "hots": "x"}]}"#, "unknown field"),
            (r#"{"engines": [{"name": "local"}]}"#, "capacity"),
        ];
        for (text, expected) in bad {
            let error = spec(text).expect_err(text);
            assert!(error.contains(expected), "{text}: {error}");
        }
    }

    #[test]
    fn tls_files_must_hold_certificates_and_a_key() {
        let dir = std::env::temp_dir().join(format!("engines-test-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&dir).expect("dir");
        let key = rcgen::KeyPair::generate().expect("key");
        let cert =
            rcgen::CertificateParams::new(vec!["x".to_owned()]).expect("params").self_signed(&key).expect("cert");
        std::fs::write(dir.join("cert.pem"), cert.pem()).expect("write");
        std::fs::write(dir.join("key.pem"), key.serialize_pem()).expect("write");
        std::fs::write(dir.join("empty.pem"), "").expect("write");
        let remote = |ca: &str, cert: &str, key: &str| Remote {
            host: "tcp://x:2376".to_owned(),
            ca: dir.join(ca),
            cert: dir.join(cert),
            key: dir.join(key),
        };
        assert_eq!(check_tls_files(&remote("cert.pem", "cert.pem", "key.pem")), Ok(()));
        assert!(check_tls_files(&remote("missing.pem", "cert.pem", "key.pem")).expect_err("missing").contains("ca "));
        assert!(check_tls_files(&remote("empty.pem", "cert.pem", "key.pem")).expect_err("empty").contains("no PEM"));
        assert!(check_tls_files(&remote("cert.pem", "key.pem", "key.pem")).expect_err("a key").contains("cert "));
        assert!(check_tls_files(&remote("cert.pem", "cert.pem", "cert.pem")).expect_err("no key").contains("key "));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
