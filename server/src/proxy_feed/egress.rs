//! An agent's egress allow-list as the API takes and shows it: `{allow: [host[:port] |
//! *.domain[:port]], presets: ["package_registries"]}`, checked with the proxy's own host
//! parser (so whatever is stored, the proxy accepts), and the hosts each preset stands for.

use serde::{Deserialize, Serialize};

use crate::store::proxy_identities::EgressRow;

/// Most entries in an allow-list.
pub const MAX_ALLOW: usize = 64;
/// Longest entry.
const MAX_ENTRY_LEN: usize = 260;

/// The preset names.
pub const PRESETS: &[&str] = &["package_registries"];

/// The package registries preset: the public registries of npm, PyPI, crates.io, Go modules,
/// RubyGems and Maven Central (HTTPS only).
pub const PACKAGE_REGISTRIES: &[&str] = &[
    "registry.npmjs.org",
    "registry.yarnpkg.com",
    "pypi.org",
    "files.pythonhosted.org",
    "crates.io",
    "index.crates.io",
    "static.crates.io",
    "proxy.golang.org",
    "sum.golang.org",
    "rubygems.org",
    "index.rubygems.org",
    "repo.maven.apache.org",
    "repo1.maven.org",
];

/// The hosts a preset allows.
pub fn preset_hosts(preset: &str) -> &'static [&'static str] {
    match preset {
        "package_registries" => PACKAGE_REGISTRIES,
        _ => &[],
    }
}

/// `egress` in a request or an agent's view.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Egress {
    /// Extra destinations.
    #[serde(default)]
    pub allow: Vec<String>,
    /// Preset names.
    #[serde(default)]
    pub presets: Vec<String>,
}

impl From<EgressRow> for Egress {
    fn from(row: EgressRow) -> Self {
        Self { allow: row.allow, presets: row.presets }
    }
}

/// Checks and normalises an allow-list: entries lower-cased and trimmed of one trailing dot
/// (`Example.COM.` is `example.com`), duplicates dropped, order kept. The message names the
/// first bad entry.
pub fn validate(egress: Egress) -> Result<EgressRow, String> {
    if egress.allow.len() > MAX_ALLOW {
        return Err(format!("egress.allow: at most {MAX_ALLOW} entries"));
    }
    let mut allow: Vec<String> = Vec::new();
    for raw in egress.allow {
        let entry = normalise(&raw).ok_or_else(|| {
            format!(
                "egress.allow entry {:?} is not host, host:port, *.domain or *.domain:port",
                raw.chars().take(MAX_ENTRY_LEN).collect::<String>()
            )
        })?;
        if !allow.contains(&entry) {
            allow.push(entry);
        }
    }
    let mut presets: Vec<String> = Vec::new();
    for preset in egress.presets {
        if !PRESETS.contains(&preset.as_str()) {
            return Err(format!(
                "egress.presets: unknown preset {:?}; known: {}",
                preset.chars().take(64).collect::<String>(),
                PRESETS.join(", ")
            ));
        }
        if !presets.contains(&preset) {
            presets.push(preset);
        }
    }
    Ok(EgressRow { allow, presets })
}

fn normalise(raw: &str) -> Option<String> {
    if raw.is_empty() || raw.len() > MAX_ENTRY_LEN || !raw.bytes().all(|b| b.is_ascii_graphic()) {
        return None;
    }
    let lower = raw.to_ascii_lowercase();
    let (wildcard, rest) = match lower.strip_prefix("*.") {
        Some(rest) => (true, rest),
        None => (false, lower.as_str()),
    };
    let target = agenthold_proxy::host::parse_authority(rest, Some(0)).ok()?;
    let host = match &target.host {
        agenthold_proxy::host::Host::Name(name) => name.clone(),
        // Addresses: the proxy refuses internal ones anyway; a public literal is allowed.
        agenthold_proxy::host::Host::Ip(ip) if !wildcard => match ip {
            std::net::IpAddr::V4(v4) => v4.to_string(),
            std::net::IpAddr::V6(v6) => format!("[{v6}]"),
        },
        agenthold_proxy::host::Host::Ip(_) => return None,
    };
    // A wildcard needs a registrable-looking suffix (`*.com` would open a whole TLD).
    if wildcard && !host.contains('.') {
        return None;
    }
    let prefix = if wildcard { "*." } else { "" };
    Some(match target.port {
        0 => format!("{prefix}{host}"),
        port => format!("{prefix}{host}:{port}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn egress(allow: &[&str], presets: &[&str]) -> Egress {
        Egress {
            allow: allow.iter().map(|s| (*s).to_owned()).collect(),
            presets: presets.iter().map(|s| (*s).to_owned()).collect(),
        }
    }

    #[test]
    fn entries_are_normalised_and_deduplicated() {
        let row = validate(egress(
            &["Example.COM.", "example.com", "*.GitHubUserContent.com:443", "pypi.org:8443", "93.184.215.14"],
            &["package_registries", "package_registries"],
        ))
        .expect("valid");
        assert_eq!(
            row.allow,
            ["example.com", "*.githubusercontent.com:443", "pypi.org:8443", "93.184.215.14"].map(String::from)
        );
        assert_eq!(row.presets, ["package_registries"].map(String::from));
    }

    #[test]
    fn bad_entries_and_presets_are_refused() {
        for bad in ["", "*", "*.com", "a b.com", "host:99999", "exa mple", "*.1.2.3.4", "ex\u{e4}mple.com", "a..b"] {
            assert!(validate(egress(&[bad], &[])).is_err(), "{bad:?} accepted");
        }
        assert!(validate(egress(&[], &["everything"])).is_err());
        let many: Vec<String> = (0..=MAX_ALLOW).map(|i| format!("h{i}.example.com")).collect();
        assert!(validate(Egress { allow: many, presets: Vec::new() }).is_err());
    }
}
