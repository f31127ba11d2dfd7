//! The workspace's egress default (issue 32): admins choose presets and an allow-list once; an
//! agent without a list of its own follows it — in its view and in the proxy's file, live; an
//! operator may give an agent a narrower list only (403 `EGRESS_WIDENED` otherwise), an admin any;
//! `DELETE` returns an agent to the default. Real server, real Postgres, the proxy crate's own
//! parser and policy reading the file.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::TestServer;
use crate::support::secrets::{admin, call, make_user};

/// How long the proxy's file may lag behind a change.
const WITHIN: Duration = Duration::from_secs(5);

/// The agent's allow-list in the proxy's file (which the proxy must parse and accept).
fn allowed(path: &Path, agent: &str) -> Option<Vec<String>> {
    let bytes = std::fs::read(path).ok()?;
    let parsed: agenthold_proxy::config::ConfigFile = serde_json::from_slice(&bytes).expect("the proxy parses it");
    agenthold_proxy::policy::Policy::compile(parsed, None).expect("the proxy accepts it");
    let file: Value = serde_json::from_slice(&bytes).expect("json");
    let entry = file["sandboxes"].as_array()?.iter().find(|s| s["id"] == agent)?;
    Some(entry["allow"].as_array()?.iter().filter_map(|h| h.as_str().map(str::to_owned)).collect())
}

/// Waits until the agent's allow-list in the file satisfies `check`.
async fn wait_for(path: &Path, agent: &str, what: &str, check: impl Fn(&[String]) -> bool) {
    let start = Instant::now();
    loop {
        if allowed(path, agent).is_some_and(|a| check(&a)) {
            return;
        }
        assert!(
            start.elapsed() < WITHIN,
            "the proxy file did not show {what} within {WITHIN:?}: {:?}",
            allowed(path, agent)
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

#[tokio::test]
async fn agents_follow_the_workspace_default_and_operators_may_only_narrow_it() {
    let server = TestServer::start().await;
    let path = server.data_dir.join("proxy.json");
    let (status, workspace) = server.post("/api/v1/workspaces", json!({"name": "pkgs"})).await;
    assert_eq!(status, 201, "{workspace}");
    let ws = workspace["id"].as_str().expect("id").to_owned();
    let default_path = format!("/api/v1/workspaces/{ws}/egress");

    // Nothing chosen: empty.
    let (status, empty) = server.get(&default_path).await;
    assert_eq!((status, empty), (200, json!({"allow": [], "presets": []})));

    // The admin chooses npm, PyPI and the Debian mirror, plus one host; it comes back normalised.
    let (status, stored) = server
        .put_json(&default_path, json!({"presets": ["npm", "pypi", "debian", "npm"], "allow": ["Git.Example.COM."]}))
        .await;
    assert_eq!(status, 200, "{stored}");
    assert_eq!(stored, json!({"allow": ["git.example.com"], "presets": ["npm", "pypi", "debian"]}));

    // A new agent without `egress` follows it: in its view and in the proxy's file.
    let follower = server.create_agent(json!({"workspace_id": ws})).await;
    let (_, view) = server.get(&format!("/api/v1/agents/{follower}")).await;
    assert_eq!(view["egress"], stored, "{view}");
    assert_eq!(view["egress_inherited"], true);
    wait_for(&path, &follower, "the default's hosts", |a| {
        ["registry.npmjs.org", "pypi.org", "files.pythonhosted.org", "deb.debian.org", "git.example.com"]
            .iter()
            .all(|h| a.iter().any(|x| x == h))
    })
    .await;
    // One with a list of its own keeps it.
    let own = server.create_agent(json!({"workspace_id": ws, "egress": {"presets": ["crates"]}})).await;
    let (_, view) = server.get(&format!("/api/v1/agents/{own}")).await;
    assert_eq!(
        (view["egress"]["presets"].clone(), view["egress_inherited"].clone()),
        (json!(["crates"]), json!(false))
    );

    // The default changes: the follower follows within seconds; the other does not move.
    let (status, _) = server.put_json(&default_path, json!({"presets": ["go", "opencode_free"]})).await;
    assert_eq!(status, 200);
    wait_for(&path, &follower, "the new default", |a| {
        a.iter().any(|h| h == "proxy.golang.org")
            && a.iter().any(|h| h == "opencode.ai")
            && !a.iter().any(|h| h == "registry.npmjs.org")
    })
    .await;
    let own_hosts = allowed(&path, &own).expect("the other agent's entry");
    assert!(own_hosts.iter().any(|h| h == "static.crates.io") && !own_hosts.iter().any(|h| h == "proxy.golang.org"));

    // An operator: reads the default, may narrow an agent's list within it, not widen it, and
    // may not change the default.
    let olga = make_user(&server, "olga").await;
    assert_eq!(
        server.put_json(&format!("/api/v1/workspaces/{ws}/members/{}", olga.id), json!({"role": "operator"})).await.0,
        204
    );
    let (status, seen) = call(&server, "GET", &default_path, &olga.token, json!({})).await;
    assert_eq!((status, seen["presets"].clone()), (200, json!(["go", "opencode_free"])));
    let (status, body) = call(&server, "PUT", &default_path, &olga.token, json!({"presets": ["npm"]})).await;
    assert_eq!((status, body["error"]["code"].as_str()), (403, Some("FORBIDDEN")), "{body}");
    let agent_egress = format!("/api/v1/agents/{follower}/egress");
    let (status, narrowed) =
        call(&server, "PUT", &agent_egress, &olga.token, json!({"presets": ["go"], "allow": ["sum.golang.org"]})).await;
    assert_eq!(status, 200, "{narrowed}");
    assert_eq!(narrowed, json!({"egress": {"allow": ["sum.golang.org"], "presets": ["go"]}, "inherited": false}));
    wait_for(&path, &follower, "the narrowed list", |a| !a.iter().any(|h| h == "opencode.ai")).await;
    for wider in [
        json!({"presets": ["npm"]}),
        json!({"allow": ["evil.example.net"]}),
        json!({"allow": ["proxy.golang.org:8443"]}),
    ] {
        let (status, body) = call(&server, "PUT", &agent_egress, &olga.token, wider.clone()).await;
        assert_eq!((status, body["error"]["code"].as_str()), (403, Some("EGRESS_WIDENED")), "{wider}: {body}");
        assert!(body["error"]["message"].as_str().is_some_and(|m| m.contains("workspace admin")), "{body}");
    }
    // Bad input is refused before the rule: too many entries, an unknown preset.
    let many: Vec<String> = (0..65).map(|i| format!("h{i}.example.com")).collect();
    for bad in [json!({"allow": many}), json!({"presets": ["everything"]}), json!({"allow": "x"})] {
        let (status, body) = call(&server, "PUT", &agent_egress, &olga.token, bad).await;
        assert_eq!(status, 400, "{body}");
    }
    // The admin may give one agent something else than the default (npm, not go): an operator may
    // not return it to the default then — that would give it go and opencode_free, which the admin
    // did not — and the list stays as the admin left it.
    let (status, other) = server.put_json(&agent_egress, json!({"presets": ["npm"]})).await;
    assert_eq!((status, other["inherited"].clone()), (200, json!(false)), "{other}");
    let (status, body) = call(&server, "DELETE", &agent_egress, &olga.token, json!({})).await;
    assert_eq!((status, body["error"]["code"].as_str()), (403, Some("EGRESS_WIDENED")), "{body}");
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains(r#"presets: "go""#) && message.contains("workspace admin"), "{body}");
    let (_, view) = server.get(&format!("/api/v1/agents/{follower}")).await;
    assert_eq!((view["egress"]["presets"].clone(), view["egress_inherited"].clone()), (json!(["npm"]), json!(false)));
    // The admin widens it beyond the default: back to the default narrows it, which an operator
    // may (the default is the admins' choice), by DELETE; admins by PATCH `egress: null` too.
    let (status, widened) = server.put_json(&agent_egress, json!({"presets": ["npm", "go", "opencode_free"]})).await;
    assert_eq!((status, widened["inherited"].clone()), (200, json!(false)), "{widened}");
    let (status, back) = call(&server, "DELETE", &agent_egress, &olga.token, json!({})).await;
    assert_eq!(status, 200, "{back}");
    assert_eq!(back, json!({"egress": {"allow": [], "presets": ["go", "opencode_free"]}, "inherited": true}));
    wait_for(&path, &follower, "the default again", |a| a.iter().any(|h| h == "opencode.ai")).await;
    let (status, view) = admin(&server, "PATCH", &format!("/api/v1/agents/{own}"), json!({"egress": null})).await;
    assert_eq!((status, view["egress_inherited"].clone()), (200, json!(true)), "{view}");

    // Every change is audited.
    let (_, audit) = server.get(&format!("/api/v1/workspaces/{ws}/audit")).await;
    let actions: Vec<&str> =
        audit["records"].as_array().expect("records").iter().filter_map(|r| r["action"].as_str()).collect();
    assert_eq!(actions.iter().filter(|a| **a == "workspace.egress_changed").count(), 2, "{actions:?}");
    assert_eq!(actions.iter().filter(|a| **a == "agent.egress_changed").count(), 5, "{actions:?}");
}
