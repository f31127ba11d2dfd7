//! Checking a built file against the proxy's own parser and policy before it is written, and
//! writing it only when its content changed. Whatever the proxy would refuse is left out (a rule
//! whose host the CA does not cover; a sandbox the policy refuses), never loosened, so one bad
//! entry never makes the proxy deny every sandbox.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::Context;
use sha2::{Digest, Sha256};

use super::file::ProxyFile;
use super::write::write_atomically;

/// Checks the file with the proxy's parser and policy (leaving out sandboxes it refuses), and
/// writes it if its content (apart from the version) differs from `previous`. Returns the new
/// digest and how many sandboxes were written, or `None` when nothing changed.
pub fn check_and_write(
    file: &mut ProxyFile,
    path: &Path,
    previous: Option<[u8; 32]>,
    version: u64,
) -> anyhow::Result<Option<([u8; 32], usize)>> {
    drop_uncovered(file)?;
    admit(file)?;
    file.version = 0;
    let digest: [u8; 32] = Sha256::digest(&*file.to_bytes()?).into();
    if previous == Some(digest) {
        return Ok(None);
    }
    file.version = version;
    let began = std::time::Instant::now();
    write_atomically(path, &file.to_bytes()?).with_context(|| format!("writing {}", path.display()))?;
    let write_ms = began.elapsed().as_secs_f64() * 1000.0;
    if write_ms > 50.0 {
        tracing::info!(write_ms = format!("{write_ms:.1}"), "the proxy configuration's write (fsync) was slow");
    }
    Ok(Some((digest, file.sandboxes.len())))
}

/// Leaves out the rules whose host the CA does not cover (a custom secret's host outside its
/// name constraints): the proxy would refuse the whole file for them. The rest of the sandbox
/// stays.
fn drop_uncovered(file: &mut ProxyFile) -> anyhow::Result<()> {
    let ca = agenthold_proxy::ca::Ca::load(&file.ca.cert, &file.ca.key).context("loading the proxy's CA")?;
    let mut covered: BTreeMap<String, bool> = BTreeMap::new();
    if let Some(route) = &file.server_route
        && ca.check_covers(&route.host).is_err()
    {
        tracing::warn!(
            host = route.host,
            "the proxy's CA does not cover agenthold's MCP host: agents cannot prompt agents through the proxy (make a CA that covers it, see docs/proxy.md)"
        );
        file.server_route = None;
    }
    for sandbox in &mut file.sandboxes {
        sandbox.inject.retain(|rule| {
            let ok = *covered.entry(rule.host.clone()).or_insert_with(|| ca.check_covers(&rule.host).is_ok());
            if !ok {
                tracing::warn!(
                    agent.id = sandbox.id,
                    host = rule.host,
                    "the proxy's CA does not cover this secret's host: it is not injected (make a CA that covers it, see docs/proxy.md)"
                );
            }
            ok
        });
    }
    Ok(())
}

/// Whether the proxy would load `file`.
fn accepted(file: &ProxyFile) -> anyhow::Result<()> {
    let parsed: agenthold_proxy::config::ConfigFile = serde_json::from_slice(&file.to_bytes()?)
        .map_err(|e| anyhow::anyhow!("the proxy cannot parse the file (line {}, column {})", e.line(), e.column()))?;
    agenthold_proxy::policy::Policy::compile(parsed, None)?;
    Ok(())
}

/// Makes `file` one the proxy loads: when it refuses the whole, each sandbox is tried alone and
/// those refused are left out (their sandboxes reach nothing) — never loosened.
fn admit(file: &mut ProxyFile) -> anyhow::Result<()> {
    let Err(whole) = accepted(file) else { return Ok(()) };
    tracing::warn!(error = %whole, "the proxy would refuse the configuration; checking sandbox by sandbox");
    let sandboxes = std::mem::take(&mut file.sandboxes);
    accepted(file).context("the proxy refuses the configuration even without sandboxes")?;
    for sandbox in sandboxes {
        file.sandboxes.push(sandbox);
        if let Err(error) = accepted(file) {
            let refused = file.sandboxes.pop();
            tracing::warn!(agent.id = refused.map(|s| s.id).unwrap_or_default(), %error, "left out of the proxy configuration");
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::file::{InjectEntry, InjectFormat, SandboxEntry};
    use super::super::task::prepare_ca;
    use super::*;
    use crate::secret::Secret;

    fn rule(host: &str, placeholder: &str) -> InjectEntry {
        InjectEntry {
            host: host.to_owned(),
            port: 443,
            path_prefix: "/v1/".into(),
            header: "x-api-key".into(),
            format: InjectFormat::Raw,
            username: None,
            placeholder: placeholder.to_owned(),
            value: Secret::new(format!("real{}", placeholder[3..].to_uppercase())),
        }
    }

    fn sandbox(id: &str, allow: &[&str], inject: Vec<InjectEntry>) -> SandboxEntry {
        SandboxEntry {
            id: id.to_owned(),
            username: format!("sbx-{id}"),
            password: Secret::new("pw-0123456789"),
            source_addrs: Vec::new(),
            any_source: true,
            allow: allow.iter().map(|a| (*a).to_owned()).collect(),
            inject,
            answer: Vec::new(),
        }
    }

    fn written(path: &Path) -> serde_json::Value {
        serde_json::from_slice(&std::fs::read(path).expect("file")).expect("json")
    }

    #[test]
    fn what_the_proxy_would_refuse_is_left_out_and_an_unchanged_file_is_not_rewritten() {
        let dir = std::env::temp_dir().join(format!("agenthold-feed-task-{}", uuid::Uuid::new_v4().simple()));
        let ca = prepare_ca(&dir.join("ca")).expect("ca");
        let path = dir.join("proxy.json");
        let mut file = ProxyFile {
            version: 0,
            ca,
            deny_private: true,
            own_addrs: Vec::new(),
            allow_addrs: Vec::new(),
            sandboxes: vec![
                // A custom secret's host outside the CA: that rule goes, the sandbox stays.
                sandbox(
                    "a",
                    &["pypi.org"],
                    vec![rule("llm.example.com", "ph-aaaaaaaa"), rule("api.anthropic.com", "ph-bbbbbbbb")],
                ),
                // An allow entry the proxy cannot parse: that sandbox goes.
                sandbox("b", &["bad entry"], vec![rule("api.anthropic.com", "ph-cccccccc")]),
                sandbox("c", &[], vec![rule("api.anthropic.com", "ph-dddddddd")]),
            ],
            upstream_overrides: BTreeMap::new(),
            server_route: Some(crate::proxy_feed::file::ServerRouteEntry::mcp("0.0.0.0:8080".parse().expect("addr"))),
        };
        let (digest, count) = check_and_write(&mut file.clone(), &path, None, 5).expect("writes").expect("changed");
        assert_eq!(count, 2);
        let v = written(&path);
        assert_eq!(v["version"], 5);
        let ids: Vec<&str> =
            v["sandboxes"].as_array().expect("sandboxes").iter().filter_map(|s| s["id"].as_str()).collect();
        assert_eq!(ids, ["a", "c"]);
        assert_eq!(v["sandboxes"][0]["inject"].as_array().map(Vec::len), Some(1));
        assert_eq!(v["sandboxes"][0]["inject"][0]["host"], "api.anthropic.com");
        assert_eq!(
            v["server_route"],
            serde_json::json!({"host": "mcp.agenthold.internal", "addr": "127.0.0.1:8080", "path_prefix": "/api/v1/mcp"}),
            "the preset CA covers the MCP host: the route stays"
        );
        let parsed: agenthold_proxy::config::ConfigFile = serde_json::from_value(v).expect("parses");
        agenthold_proxy::policy::Policy::compile(parsed, None).expect("the proxy accepts what was written");

        // Same content, a later version: not rewritten.
        assert!(check_and_write(&mut file.clone(), &path, Some(digest), 6).expect("checks").is_none());
        assert_eq!(written(&path)["version"], 5);
        // A real change is.
        file.sandboxes.pop();
        assert!(check_and_write(&mut file, &path, Some(digest), 7).expect("writes").is_some());
        assert_eq!(written(&path)["sandboxes"].as_array().map(Vec::len), Some(1));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
