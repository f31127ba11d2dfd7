//! What the UI reads instead of copying the server's rules (issue 33): `GET /api/v1/harnesses`
//! (each harness kind, offered or not in this mode, with its models, logins and default image),
//! `GET /api/v1/limits` (each agent limit's default and range from the server's own
//! configuration) — both for any signed-in user, refused without credentials — and the agent
//! `PATCH` answer saying when each change applies. Checked against what the server then does
//! with a create or a change, so the routes cannot drift from the checks.

use serde_json::{Value, json};

use crate::support::TestServer;
use crate::support::secrets::{admin, call, make_user};

fn code(answer: &(u16, Value)) -> (u16, &str) {
    (answer.0, answer.1["error"]["code"].as_str().unwrap_or_default())
}

fn harness<'a>(list: &'a Value, name: &str) -> &'a Value {
    list.as_array().expect("list").iter().find(|h| h["name"] == name).unwrap_or_else(|| panic!("{name} in {list}"))
}

#[tokio::test]
async fn harnesses_say_what_a_create_accepts_in_each_mode() {
    let key = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=";
    let production = TestServer::start_with(&[("AGENTHOLD_MODE", "production"), ("AGENTHOLD_MASTER_KEY", key)]).await;
    let (status, _, anonymous) = production.raw_with_headers("GET", "/api/v1/harnesses", None, &[], json!(null)).await;
    assert_eq!(status, 401, "{anonymous}");
    // Any signed-in user, not only admins.
    let user = make_user(&production, "plain").await;
    let (status, list) = call(&production, "GET", "/api/v1/harnesses", &user.token, json!(null)).await;
    assert_eq!(status, 200, "{list}");
    let claude = harness(&list, "claude-code");
    assert_eq!(claude["available"], true, "{claude}");
    assert_eq!(claude["label"], "Claude Code");
    assert_eq!(claude["account_logins"], json!(["claude_subscription", "anthropic_api_key"]));
    assert_eq!(claude["secrets"], json!([{"preset": "anthropic", "env": "ANTHROPIC_API_KEY"}]));
    assert!(claude["models"].as_array().is_some_and(|m| !m.is_empty()), "{claude}");
    assert_eq!(harness(&list, "codex")["auto_logins"], json!([{"method": "api-key", "env": "OPENAI_API_KEY"}]));
    assert_eq!(harness(&list, "command")["needs_command"], true);
    assert_eq!(claude["needs_command"], false);
    // Every harness it says is available is created, with the image it names; the others are
    // refused the way it says.
    for h in list.as_array().expect("list") {
        let name = h["name"].as_str().expect("name");
        let mut body = json!({"name": format!("a-{name}"), "harness": name});
        if h["needs_command"] == true {
            body["command"] = json!(["/bin/true"]);
        }
        let answer = admin(&production, "POST", "/api/v1/agents", body).await;
        if h["available"] == true {
            assert_eq!(answer.0, 201, "{name}: {}", answer.1);
            assert_eq!(answer.1["image"], h["default_image"], "{name}");
        } else {
            assert_eq!(code(&answer), (400, "UNKNOWN_HARNESS"), "{name}: {}", answer.1);
        }
    }
    assert_eq!(harness(&list, "fake")["available"], false, "development only");

    // In test mode the fake harness is offered.
    let test = TestServer::start().await;
    let (status, list) = test.get("/api/v1/harnesses").await;
    assert_eq!(status, 200, "{list}");
    assert_eq!(harness(&list, "fake")["available"], true, "{list}");
}

#[tokio::test]
async fn limits_come_from_the_server_s_configuration_and_match_its_checks() {
    let server = TestServer::start_with(&[
        ("AGENTHOLD_MAX_CPUS", "2"),
        ("AGENTHOLD_MAX_MEMORY_MIB", "3000"),
        ("AGENTHOLD_DEFAULT_MEMORY_MIB", "1024"),
        ("AGENTHOLD_MAX_TURN_SECS", "600"),
        ("AGENTHOLD_FORBID_AUTONOMOUS", "true"),
        ("AGENTHOLD_DEFAULT_POSTURE", "approval"),
    ])
    .await;
    let (status, _, anonymous) = server.raw_with_headers("GET", "/api/v1/limits", None, &[], json!(null)).await;
    assert_eq!(status, 401, "{anonymous}");
    let user = make_user(&server, "reader").await;
    let (status, limits) = call(&server, "GET", "/api/v1/limits", &user.token, json!(null)).await;
    assert_eq!(status, 200, "{limits}");
    let l = &limits["limits"];
    assert_eq!(l["cpus"]["max"], 2.0, "{limits}");
    assert_eq!(l["memory_mib"], json!({"default": 1024, "min": 64, "max": 3000}), "{limits}");
    assert_eq!(l["turn_seconds"]["max"], 600, "{limits}");
    assert_eq!(limits["posture"], json!({"offered": ["guarded", "approval"], "default": "approval"}), "{limits}");
    assert_eq!(limits["egress"]["max_entries"], 64);
    let presets = limits["egress"]["presets"].as_array().expect("presets");
    assert!(
        presets.iter().any(|p| p["name"] == "npm" && p["hosts"].as_array().is_some_and(|h| !h.is_empty())),
        "{limits}"
    );
    assert_eq!(limits["model"]["max_chars"], 200);

    // The maxima it gives are accepted, one over is refused with the code the form expects.
    let agent = server.create_agent(json!({})).await;
    let path = format!("/api/v1/agents/{agent}");
    let at_max = json!({"limits": {"cpus": l["cpus"]["max"], "memory_mib": l["memory_mib"]["max"], "turn_seconds": l["turn_seconds"]["max"]}});
    let answer = admin(&server, "PATCH", &path, at_max.clone()).await;
    assert_eq!(answer.0, 200, "{at_max}: {}", answer.1);
    for (body, expected) in [
        (json!({"limits": {"cpus": 2.5}}), "LIMIT_TOO_HIGH"),
        (json!({"limits": {"memory_mib": 3001}}), "LIMIT_TOO_HIGH"),
        (json!({"limits": {"turn_seconds": 601}}), "LIMIT_TOO_HIGH"),
        (json!({"limits": {"memory_mib": l["memory_mib"]["min"].as_i64().expect("min") - 1}}), "INVALID_LIMITS"),
        (
            json!({"limits": {"auto_sleep_secs": l["auto_sleep_secs"]["max"].as_i64().expect("max") + 1}}),
            "INVALID_LIMITS",
        ),
        (json!({"model": "m".repeat(201)}), "INVALID_MODEL"),
        (json!({"posture": "autonomous"}), "AUTONOMOUS_FORBIDDEN"),
    ] {
        let answer = admin(&server, "PATCH", &path, body.clone()).await;
        assert_eq!(code(&answer), (400, expected), "{body}: {}", answer.1);
    }
    let answer =
        admin(&server, "PATCH", &path, json!({"limits": {"auto_sleep_secs": l["auto_sleep_secs"]["max"]}})).await;
    assert_eq!(answer.0, 200, "{}", answer.1);
}

#[tokio::test]
async fn a_patch_answers_when_each_change_applies() {
    let server = TestServer::start().await;
    let agent = server.create_agent(json!({})).await;
    let path = format!("/api/v1/agents/{agent}");
    let answer = admin(
        &server,
        "PATCH",
        &path,
        json!({"model": "m-1", "limits": {"cpus": 0.5, "turn_seconds": 60, "auto_sleep_secs": 0}, "posture": "approval",
               "egress": {"allow": ["example.com"]}}),
    )
    .await;
    assert_eq!(answer.0, 200, "{}", answer.1);
    assert_eq!(answer.1["id"], agent.as_str(), "still the agent's view: {}", answer.1);
    let changed: Vec<(String, String)> = answer.1["changed"]
        .as_array()
        .expect("changed")
        .iter()
        .map(|c| (c["field"].as_str().expect("field").to_owned(), c["impact"].as_str().expect("impact").to_owned()))
        .collect();
    let want = [
        ("model", "restarts_harness"),
        ("posture", "at_once"),
        ("limits", "needs_rebuild"),
        ("turn_seconds", "next_prompt"),
        ("auto_sleep_secs", "at_once"),
        ("egress", "proxy"),
    ];
    for (field, impact) in want {
        assert!(changed.contains(&(field.to_owned(), impact.to_owned())), "{field} {impact} in {changed:?}");
    }
    assert_eq!(changed.len(), want.len(), "{changed:?}");
    // The same body again changes nothing but the egress it sets.
    let again = admin(&server, "PATCH", &path, json!({"model": "m-1"})).await;
    assert_eq!(again.1["changed"], json!([]), "{}", again.1);
}

#[tokio::test]
async fn a_dry_run_says_what_a_patch_would_do_and_changes_nothing() {
    let server = TestServer::start().await;
    let agent = server.create_agent(json!({})).await;
    let path = format!("/api/v1/agents/{agent}");
    let before = admin(&server, "GET", &path, json!(null)).await.1;
    let body = json!({"model": "m-2", "limits": {"memory_mib": 1024}, "egress": {"allow": ["example.com"]}});
    let answer = admin(&server, "PATCH", &format!("{path}?dry_run=true"), body.clone()).await;
    assert_eq!(answer.0, 200, "{}", answer.1);
    assert_eq!(
        answer.1["changed"],
        json!([{"field": "model", "impact": "restarts_harness"}, {"field": "limits", "impact": "needs_rebuild"},
               {"field": "egress", "impact": "proxy"}]),
        "{}",
        answer.1
    );
    let after = admin(&server, "GET", &path, json!(null)).await.1;
    for field in ["model", "limits", "egress", "egress_inherited"] {
        assert_eq!(after[field], before[field], "{field} changed by a dry run");
    }
    let audit = admin(
        &server,
        "GET",
        &format!("/api/v1/workspaces/{}/audit", before["workspace_id"].as_str().expect("ws")),
        json!(null),
    )
    .await
    .1;
    assert!(!audit.to_string().contains("agent.changed"), "a dry run is not audited: {audit}");
    // Checked the same way as a real change.
    let answer = admin(&server, "PATCH", &format!("{path}?dry_run=true"), json!({"model": "has space"})).await;
    assert_eq!(code(&answer), (400, "INVALID_MODEL"), "{}", answer.1);
    let answer = admin(&server, "PATCH", &format!("{path}?dry_run=maybe"), json!({"model": "m"})).await;
    assert_eq!(code(&answer), (400, "INVALID_QUERY"), "{}", answer.1);
    // The real change then does what the dry run said.
    let answer = admin(&server, "PATCH", &path, body).await;
    assert_eq!(answer.1["changed"].as_array().map(Vec::len), Some(3), "{}", answer.1);
}
