//! An egress allow-list (an agent's, or its workspace's default) as the API takes and shows it:
//! `{allow: [host[:port] | *.domain[:port]], presets: ["npm", …]}`, checked with the proxy's
//! own host parser (so whatever is stored, the proxy accepts); the hosts each preset stands
//! for; and the rule of what "narrowing" the workspace's default means ([`within`]).

use serde::{Deserialize, Serialize};

use crate::store::proxy_identities::EgressRow;

/// Most entries in an allow-list.
pub const MAX_ALLOW: usize = 64;
/// Longest entry.
pub const MAX_ENTRY_LEN: usize = 260;

/// The preset names, each for one kind of package (or one harness's free service);
/// `package_registries` is the older preset for all the language registries at once.
pub const PRESETS: &[&str] = &["package_registries", "npm", "pypi", "crates", "go", "debian", "opencode_free"];

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

/// npm's registry (and Yarn's name for it).
const NPM: &[&str] = &["registry.npmjs.org", "registry.yarnpkg.com"];
/// PyPI: the index and the files.
const PYPI: &[&str] = &["pypi.org", "files.pythonhosted.org"];
/// crates.io: the API, the sparse index and the downloads.
const CRATES: &[&str] = &["crates.io", "index.crates.io", "static.crates.io"];
/// Go modules: the module proxy and the checksum database (Go's defaults, `GOPROXY` and
/// `GOSUMDB`).
const GO: &[&str] = &["proxy.golang.org", "sum.golang.org"];
/// The Debian mirror the base image's apt uses (plain HTTP through the proxy, port 80; the
/// packages are checked against the image's Debian keyring) and its security archive.
const DEBIAN: &[&str] = &["deb.debian.org", "security.debian.org"];
/// OpenCode's free models ("OpenCode Zen", `https://opencode.ai/zen/v1`, the host the
/// `opencode` provider of the opencode CLI calls) and its models list.
const OPENCODE_FREE: &[&str] = &["opencode.ai", "models.opencode.ai"];

/// The hosts a preset allows (any port a plain entry allows: 443 for CONNECT, 80 for plain HTTP).
pub fn preset_hosts(preset: &str) -> &'static [&'static str] {
    match preset {
        "package_registries" => PACKAGE_REGISTRIES,
        "npm" => NPM,
        "pypi" => PYPI,
        "crates" => CRATES,
        "go" => GO,
        "debian" => DEBIAN,
        "opencode_free" => OPENCODE_FREE,
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

/// Whether an agent's own list stays within its workspace's default (what an agent admin who is
/// not a workspace admin may set; docs/proxy.md, "The workspace default"): every preset is one
/// of the default's or all its hosts are allowed by the default; every entry is one of the
/// default's, under one of its wildcards (same port), or a host of one of its presets (no
/// port). The message names the first thing outside.
pub fn within(own: &EgressRow, default: &EgressRow) -> Result<(), String> {
    match first_outside(own, default) {
        None => Ok(()),
        Some(outside) => Err(format!(
            "egress.{outside} is not in the workspace's default ({}); a workspace admin may widen it",
            describe(default)
        )),
    }
}

/// Whether returning an agent from its own list to the workspace's default narrows it (what
/// someone who is not a workspace admin may do): the default must stay within the agent's own
/// list, or the reset would widen what the sandbox reaches past what an admin set. The message
/// names the first thing the default adds.
pub fn reset_narrows(own: &EgressRow, default: &EgressRow) -> Result<(), String> {
    match first_outside(default, own) {
        None => Ok(()),
        Some(outside) => Err(format!(
            "returning this agent to the workspace's default would widen its egress: the default's \
             {outside} is not in the agent's own list ({}); a workspace admin may reset it",
            describe(own)
        )),
    }
}

/// The first preset or entry of `own` that `default` does not allow, as `presets: "x"` or
/// `allow: "x"`.
fn first_outside(own: &EgressRow, default: &EgressRow) -> Option<String> {
    for preset in &own.presets {
        let covered = default.presets.contains(preset) || preset_hosts(preset).iter().all(|h| covers(default, h));
        if !covered {
            return Some(format!("presets: {preset:?}"));
        }
    }
    own.allow.iter().find(|entry| !covers(default, entry)).map(|entry| format!("allow: {entry:?}"))
}

/// Whether `default` allows every destination the normalised `entry` allows.
fn covers(default: &EgressRow, entry: &str) -> bool {
    if default.allow.iter().any(|d| d == entry) {
        return true;
    }
    let (host, port) = split_port(entry);
    let preset_host =
        port.is_none() && !host.starts_with("*.") && default.presets.iter().any(|p| preset_hosts(p).contains(&host));
    if preset_host {
        return true;
    }
    // `*.d[:p]` covers `x.d[:p]` and `*.x.d[:p]`.
    let bare = host.strip_prefix("*.").unwrap_or(host);
    default.allow.iter().any(|d| {
        let (d_host, d_port) = split_port(d);
        d_port == port
            && d_host.strip_prefix("*.").is_some_and(|suffix| {
                bare.strip_suffix(suffix).is_some_and(|rest| rest.ends_with('.') && rest.len() > 1)
            })
    })
}

/// `host[:port]` of a normalised entry (an IPv6 literal keeps its brackets).
fn split_port(entry: &str) -> (&str, Option<&str>) {
    match entry.rsplit_once(':') {
        Some((host, port)) if !port.contains(']') && port.bytes().all(|b| b.is_ascii_digit()) => (host, Some(port)),
        _ => (entry, None),
    }
}

fn describe(default: &EgressRow) -> String {
    if default.allow.is_empty() && default.presets.is_empty() {
        return "empty".to_owned();
    }
    format!("presets [{}], allow [{}]", default.presets.join(", "), default.allow.join(", "))
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

    fn row(allow: &[&str], presets: &[&str]) -> EgressRow {
        validate(egress(allow, presets)).expect("valid")
    }

    #[test]
    fn every_preset_has_hosts_the_proxy_accepts() {
        for preset in PRESETS {
            assert!(!preset_hosts(preset).is_empty(), "{preset}");
            for host in preset_hosts(preset) {
                assert_eq!(normalise(host).as_deref(), Some(*host), "{preset}: {host}");
            }
        }
        // The older preset is what it was: every language registry, no Debian mirror.
        assert_eq!(PACKAGE_REGISTRIES.len(), 13);
        assert!(!PACKAGE_REGISTRIES.contains(&"deb.debian.org"));
        for preset in ["npm", "pypi", "crates", "go"] {
            assert!(preset_hosts(preset).iter().all(|h| PACKAGE_REGISTRIES.contains(h)), "{preset}");
        }
    }

    #[test]
    fn narrowing_keeps_within_the_default() {
        let default = row(&["*.example.com", "git.internal.dev:8443", "93.184.215.14"], &["npm", "package_registries"]);
        // Removing things is narrowing; so is naming what the default already allows.
        for (allow, presets) in [
            (vec![], vec![]),
            (vec![], vec!["npm"]),
            (vec!["api.example.com", "*.cdn.example.com"], vec![]),
            (vec!["git.internal.dev:8443", "93.184.215.14"], vec![]),
            (vec!["registry.npmjs.org", "pypi.org"], vec!["pypi", "crates", "go"]),
        ] {
            let own = row(&allow, &presets);
            assert_eq!(within(&own, &default), Ok(()), "{own:?}");
        }
        // Anything the default does not allow is widening.
        for (allow, presets) in [
            (vec!["example.com"], vec![]),
            (vec!["api.example.com:8443"], vec![]),
            (vec!["git.internal.dev"], vec![]),
            (vec!["registry.npmjs.org:8443"], vec![]),
            (vec!["evil.com"], vec![]),
            (vec!["notexample.com"], vec![]),
            (vec![], vec!["debian"]),
            (vec![], vec!["opencode_free"]),
        ] {
            let own = row(&allow, &presets);
            let refused = within(&own, &default).expect_err("widening");
            assert!(refused.contains("workspace admin"), "{refused}");
        }
        // An empty default allows nothing more.
        assert!(within(&row(&[], &["npm"]), &EgressRow::default()).is_err());
        assert_eq!(within(&EgressRow::default(), &EgressRow::default()), Ok(()));
    }

    #[test]
    fn a_reset_narrows_only_when_the_default_stays_within_the_agent_s_list() {
        let default = row(&["git.example.com"], &["npm"]);
        // An admin gave the agent more than the default: back to the default is narrowing.
        assert_eq!(reset_narrows(&row(&["git.example.com", "*.corp.dev"], &["npm", "pypi"]), &default), Ok(()));
        // The same hosts named otherwise (the preset's hosts, a wildcard) are no widening either.
        let npm_hosts: Vec<&str> = preset_hosts("npm").to_vec();
        assert_eq!(reset_narrows(&row(&[&["*.example.com"][..], &npm_hosts].concat(), &[]), &default), Ok(()));
        // An admin narrowed the agent below the default: going back would widen it.
        let refused = reset_narrows(&row(&["git.example.com"], &[]), &default).expect_err("widening");
        assert!(refused.contains(r#"presets: "npm""#) && refused.contains("workspace admin"), "{refused}");
        let refused = reset_narrows(&row(&[], &["npm"]), &default).expect_err("widening");
        assert!(refused.contains(r#"allow: "git.example.com""#), "{refused}");
        assert!(reset_narrows(&EgressRow::default(), &default).is_err());
        assert_eq!(reset_narrows(&EgressRow::default(), &EgressRow::default()), Ok(()));
    }
}
