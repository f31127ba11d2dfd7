//! Disk limits (docs/security.md, "Disk"): an agent's `limits.disk_mib` within the server's
//! maximum (`LIMIT_TOO_HIGH` above it), and, on a Docker engine that enforces them, a sandbox
//! that writes past its limit in its writable layer or its home gets ENOSPC (EDQUOT on btrfs), its
//! turn a `DISK_FULL` notice naming the part and the limit, while other sandboxes write on.
//!
//! Which parts the engine enforces, the server finds at start and shows in the agent view
//! (`limits.disk_enforced`). A part it does not enforce skips its test, saying why — unless the
//! engine promises it: scripts/dev/docker.sh, which gives the engine it starts a data-root with
//! project quotas (xfs) or qgroups (btrfs), labels it `agenthold.disk-limits=<parts>`; then the
//! test fails instead (that is CI's engine).

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::docker::docker;
use crate::support::skip::{Lacks, skip, skip_unless_docker};
use crate::support::{TestServer, of_type};

/// The small disk the tests fill: above the test image's own size (~120 MiB), which btrfs with
/// full qgroups counts in a writable layer's limit (a limit below it cannot even be set: `EDQUOT`).
const SMALL_MIB: i64 = 320;
/// What the tests write: well past [`SMALL_MIB`].
const WRITE_MIB: i64 = 480;

/// A part of a sandbox's disk.
#[derive(Debug, Clone, Copy)]
enum Part {
    Home,
    WritableLayer,
}

impl Part {
    fn key(self) -> &'static str {
        match self {
            Part::Home => "home",
            Part::WritableLayer => "writable_layer",
        }
    }
}

/// The parts the engine promises to limit (its `agenthold.disk-limits` label).
fn promised() -> Vec<String> {
    let (ok, labels) = docker(&["info", "--format", "{{json .Labels}}"]);
    assert!(ok, "docker info");
    let labels: Vec<String> = serde_json::from_str(&labels).unwrap_or_default();
    labels
        .iter()
        .filter_map(|l| l.strip_prefix("agenthold.disk-limits="))
        .flat_map(|parts| parts.split(',').map(str::to_owned).collect::<Vec<_>>())
        .collect()
}

/// What the server says the engine enforces, once it knows (it asks the engine at start).
async fn enforced(server: &TestServer, agent: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (status, view) = server.get(&format!("/api/v1/agents/{agent}")).await;
        assert_eq!(status, 200, "{view}");
        let enforced = &view["limits"]["disk_enforced"];
        if !enforced.is_null() {
            return enforced.clone();
        }
        assert!(Instant::now() < deadline, "the server never found which disk limits the engine enforces");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Whether the test of `part` runs: the engine enforces it; when it does not, the test fails if
/// the engine promised it, else it is skipped (a filesystem feature this engine lacks) with the
/// server's reason.
async fn runs(server: &TestServer, agent: &str, part: Part) -> bool {
    let enforced = enforced(server, agent).await;
    if enforced[part.key()] == true {
        return true;
    }
    let note = enforced["note"].as_str().unwrap_or_default();
    assert!(
        !promised().iter().any(|p| p == part.key()),
        "the engine is labelled agenthold.disk-limits with {} (scripts/dev/docker.sh) but the server finds it \
         does not enforce it: {note}",
        part.key()
    );
    skip(Lacks::Feature, &format!("this Docker engine cannot limit a sandbox's {}: {note}", part.key()));
    false
}

/// The events of a session once its `turns` have ended and, when `notice`, a `DISK_FULL` notice
/// was stored.
async fn settled(server: &TestServer, session: &str, turns: usize, notice: bool) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let events = server.wait_turns(session, turns, Duration::from_secs(120)).await;
        if !notice || !disk_full(&events).is_empty() {
            return events;
        }
        assert!(
            Instant::now() < deadline,
            "no DISK_FULL notice: {}\n\nserver log:\n{}",
            serde_json::to_string_pretty(&events).unwrap_or_default(),
            server.log()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn disk_full(events: &[Value]) -> Vec<&Value> {
    of_type(events, "notice").into_iter().filter(|e| e["payload"]["code"] == "DISK_FULL").collect()
}

/// The text of every tool call's output.
fn tool_output(events: &[Value]) -> String {
    events
        .iter()
        .filter(|e| e["payload"]["sessionUpdate"] == "tool_call_update")
        .filter_map(|e| e["payload"]["content"][0]["content"]["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

/// The script that fills `path` with [`WRITE_MIB`] MiB, then says how much it holds.
fn fill(path: &str) -> String {
    format!("run dd if=/dev/zero of={path} bs=1M count={WRITE_MIB} 2>&1; echo \"holds $(du -m {path} | cut -f1) MiB\"")
}

/// The MiB a `fill` left, from its output.
fn held_mib(output: &str) -> i64 {
    let held = output.rsplit("holds ").next().and_then(|rest| rest.split_whitespace().next());
    held.and_then(|n| n.parse().ok()).unwrap_or_else(|| panic!("no size in {output:?}"))
}

/// Fills `path` in a new session of `agent` with the limit [`SMALL_MIB`]; asserts the write failed
/// for want of space, held at most the limit, and the turn got a `DISK_FULL` notice naming it,
/// whose message is returned.
async fn fill_past_the_limit(server: &TestServer, agent: &str, path: &str) -> String {
    let session = server.create_session(agent).await;
    server.prompt(&session, &fill(path)).await;
    let events = settled(server, &session, 1, true).await;
    let output = tool_output(&events);
    assert!(
        output.contains("No space left on device") || output.contains("Disk quota exceeded"),
        "the write past the limit fails with ENOSPC or EDQUOT: {output}"
    );
    let held = held_mib(&output);
    assert!((SMALL_MIB / 2..=SMALL_MIB).contains(&held), "{path} holds {held} MiB, limit {SMALL_MIB}: {output}");
    let turn_end = of_type(&events, "turn_end")[0];
    let notices = disk_full(&events);
    assert_eq!(notices.len(), 1, "{events:?}");
    assert_eq!(notices[0]["payload"]["turn_id"], turn_end["payload"]["turn_id"], "the notice names the turn");
    let message = notices[0]["payload"]["message"].as_str().expect("message").to_owned();
    assert!(message.contains(&format!("{SMALL_MIB} MiB")), "{message}");
    message
}

/// Writes [`WRITE_MIB`] MiB to `path` in a new session of `agent`: it all fits, no notice.
async fn write_fits(server: &TestServer, agent: &str, path: &str) {
    let session = server.create_session(agent).await;
    server.prompt(&session, &fill(path)).await;
    let events = settled(server, &session, 1, false).await;
    let output = tool_output(&events);
    assert_eq!(held_mib(&output), WRITE_MIB, "{output}");
    assert_eq!(of_type(&events, "turn_end")[0]["payload"]["stop_reason"], "end_turn", "{events:?}");
    assert!(disk_full(&events).is_empty(), "{events:?}");
}

#[tokio::test]
async fn a_sandbox_filling_its_writable_layer_gets_enospc_and_disk_full_and_others_write_on() {
    if skip_unless_docker("disk limits are the Docker engine's") {
        return;
    }
    let server = TestServer::start().await;
    let small = server.create_agent(json!({"limits": {"disk_mib": SMALL_MIB}})).await;
    if !runs(&server, &small, Part::WritableLayer).await {
        return;
    }
    let message = fill_past_the_limit(&server, &small, "/tmp/fill").await;
    assert!(message.contains("writable layer") && message.contains("rebuild"), "{message}");
    let (_, size) = docker(&["inspect", "-f", "{{json .HostConfig.StorageOpt}}", &server.container(&small)]);
    assert!(size.contains("\"size\""), "the container has a size: {size}");

    // Another sandbox (the server's default size) writes on, as does the full one's home.
    let other = server.create_agent(json!({})).await;
    write_fits(&server, &other, "/tmp/fill").await;
    write_fits(&server, &small, "/home/agent/fill").await;
}

#[tokio::test]
async fn a_sandbox_filling_its_home_gets_enospc_and_disk_full_and_others_write_on() {
    if skip_unless_docker("disk limits are the Docker engine's") {
        return;
    }
    let server = TestServer::start().await;
    let small = server.create_agent(json!({"limits": {"disk_mib": SMALL_MIB}})).await;
    if !runs(&server, &small, Part::Home).await {
        return;
    }
    let message = fill_past_the_limit(&server, &small, "/home/agent/fill").await;
    assert!(message.contains("home (/home/agent) is full"), "{message}");
    let (_, options) =
        docker(&["volume", "inspect", "-f", "{{json .Options}}", &format!("{}-home-{small}", server.instance)]);
    assert!(options.contains(&format!("{SMALL_MIB}M")), "the home volume has a size: {options}");

    let other = server.create_agent(json!({})).await;
    write_fits(&server, &other, "/home/agent/fill").await;
}

#[tokio::test]
async fn disk_limits_are_refused_over_the_server_maximum() {
    let server =
        TestServer::start_with(&[("AGENTHOLD_MAX_DISK_MIB", "1024"), ("AGENTHOLD_SANDBOX_DISK_MIB", "4096")]).await;
    let body = |disk: Value| {
        json!({"name": format!("d{}", &uuid::Uuid::new_v4().simple().to_string()[..10]),
        "harness": "fake", "limits": {"disk_mib": disk}})
    };
    let (status, refused) = server.post("/api/v1/agents", body(json!(2048))).await;
    assert_eq!((status, &refused["error"]["code"]), (400, &json!("LIMIT_TOO_HIGH")), "{refused}");
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("disk_mib at most 1024") && message.contains("MAX_DISK_MIB"), "{message}");
    let (status, refused) = server.post("/api/v1/agents", body(json!(10))).await;
    assert_eq!((status, &refused["error"]["code"]), (400, &json!("INVALID_LIMITS")), "{refused}");

    // Without one, the default within the maximum; with one, its own.
    let agent = server.create_agent(json!({})).await;
    let (_, view) = server.get(&format!("/api/v1/agents/{agent}")).await;
    assert_eq!(view["limits"]["disk_mib"], 1024, "{view}");
    let (status, made) = server.post("/api/v1/agents", body(json!(512))).await;
    assert_eq!((status, &made["limits"]["disk_mib"]), (201, &json!(512)), "{made}");

    let path = format!("/api/v1/agents/{agent}");
    let (status, refused) = server.raw("PATCH", &path, r#"{"limits": {"disk_mib": 4096}}"#).await;
    assert_eq!((status, &refused["error"]["code"]), (400, &json!("LIMIT_TOO_HIGH")), "{refused}");
    let (status, patched) = server.raw("PATCH", &path, r#"{"limits": {"disk_mib": 256}}"#).await;
    assert_eq!((status, &patched["limits"]["disk_mib"]), (200, &json!(256)), "{patched}");
    let (_, view) = server.get(&path).await;
    assert_eq!(view["limits"]["disk_mib"], 256, "stored: {view}");
}

#[tokio::test]
async fn required_disk_limits_start_no_sandbox_on_an_engine_that_cannot_enforce_them() {
    if skip_unless_docker("disk limits are the Docker engine's") {
        return;
    }
    let server = TestServer::start_with(&[("AGENTHOLD_SANDBOX_DISK_LIMITS", "required")]).await;
    let agent = server.create_agent(json!({"limits": {"disk_mib": 256}})).await;
    let enforced = enforced(&server, &agent).await;
    let session = server.create_session(&agent).await;
    server.prompt(&session, "text hello").await;
    let events = server.wait_turns(&session, 1, Duration::from_secs(120)).await;
    if enforced["home"] == true && enforced["writable_layer"] == true {
        // Both enforced: the sandbox starts, with both sizes.
        assert_eq!(of_type(&events, "turn_end")[0]["payload"]["stop_reason"], "end_turn", "{events:?}");
        let (_, size) = docker(&["inspect", "-f", "{{json .HostConfig.StorageOpt}}", &server.container(&agent)]);
        assert!(size.contains("\"size\""), "{size}");
        return;
    }
    // Not both: no sandbox, and the turn's error says why.
    let errors = of_type(&events, "error");
    let message = errors.first().and_then(|e| e["payload"]["message"].as_str()).unwrap_or_default();
    assert!(
        message.contains("AGENTHOLD_SANDBOX_DISK_LIMITS=required") && message.contains("cannot enforce"),
        "{events:?}"
    );
    let (_, listed) = docker(&["ps", "-aq", "--filter", &format!("name={}", server.container(&agent))]);
    assert!(listed.is_empty(), "no sandbox was made: {listed}");
}

#[tokio::test]
async fn disk_limits_off_make_sandboxes_without_sizes() {
    if skip_unless_docker("disk limits are the Docker engine's") {
        return;
    }
    let server = TestServer::start_with(&[("AGENTHOLD_SANDBOX_DISK_LIMITS", "off")]).await;
    let agent = server.create_agent(json!({"limits": {"disk_mib": 256}})).await;
    let enforced = enforced(&server, &agent).await;
    assert_eq!((&enforced["home"], &enforced["writable_layer"]), (&json!(false), &json!(false)), "{enforced}");
    assert!(enforced["note"].as_str().is_some_and(|n| n.contains("off")), "{enforced}");
    let session = server.create_session(&agent).await;
    server.prompt(&session, "text hello").await;
    server.wait_turns(&session, 1, Duration::from_secs(120)).await;
    let (_, size) = docker(&["inspect", "-f", "{{json .HostConfig.StorageOpt}}", &server.container(&agent)]);
    assert!(!size.contains("\"size\""), "{size}");
    let (_, options) =
        docker(&["volume", "inspect", "-f", "{{json .Options}}", &format!("{}-home-{agent}", server.instance)]);
    assert!(!options.contains("size"), "{options}");
}

/// The probes that find what the engine enforces (a volume and a never-started container, made
/// and removed at once) that an earlier server left — one killed between making and removing
/// them — are removed before the next probe.
#[tokio::test]
async fn disk_probes_an_earlier_server_left_are_removed_before_the_next_probe() {
    if skip_unless_docker("disk limits are the Docker engine's") {
        return;
    }
    let server = TestServer::start().await;
    let image = std::env::var("AGENTHOLD_TEST_IMAGE").unwrap_or_else(|_| "agenthold/test:latest".to_owned());
    let leftover = format!("{}-diskprobe-leftover", server.instance);
    let label = format!("agenthold.instance={}", server.instance);
    let (made, out) = docker(&["create", "--name", &leftover, "--label", &label, "--network", "none", &image, "true"]);
    assert!(made, "{out}");
    let (made, out) = docker(&["volume", "create", "--label", &label, &leftover]);
    assert!(made, "{out}");
    let agent = server.create_agent(json!({})).await;
    enforced(&server, &agent).await;
    let session = server.create_session(&agent).await;
    server.prompt(&session, "text hello").await;
    server.wait_turns(&session, 1, Duration::from_secs(120)).await;
    let (_, containers) = docker(&["ps", "-a", "--format", "{{.Names}}", "--filter", &format!("name={leftover}")]);
    assert!(containers.is_empty(), "the leftover probe container is still there: {containers}");
    let (_, volumes) = docker(&["volume", "ls", "--format", "{{.Name}}", "--filter", &format!("name={leftover}")]);
    assert!(volumes.is_empty(), "the leftover probe volume is still there: {volumes}");
}
