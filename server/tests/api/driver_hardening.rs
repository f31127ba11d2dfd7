//! Sandboxes are hardened: every capability dropped but sandboxd's few, `no-new-privileges`,
//! no swap beyond the memory limit, an open-files limit, labels naming the tools and settings
//! they were made with; and a real turn (files, commands as the `agent` user) still works.

use std::time::Duration;

use agenthold_server::sandbox::docker::{
    CAP_ADD, SPEC_LABEL, SPEC_VERSION, SUDO_CAP_ADD, SUDO_LABEL, TOOLS_LABEL, nofile_limit,
};
use serde_json::{Value, json};

use crate::support::TestServer;
use crate::support::docker::docker;
use crate::support::skip::skip_unless_docker;

fn caps(value: &Value) -> Vec<String> {
    let mut caps: Vec<String> = value
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).map(|c| c.trim_start_matches("CAP_").to_uppercase()).collect())
        .unwrap_or_default();
    caps.sort();
    caps
}

#[tokio::test]
async fn sandboxes_are_hardened_and_a_turn_still_works() {
    if skip_unless_docker("container hardening is the Docker driver's") {
        return;
    }
    let server = TestServer::start().await;
    let agent = server.create_agent(json!({})).await;
    let session = server.create_session(&agent).await;
    let script = "write notes.txt hello\n\
                  run id -un; cat notes.txt; grep -E '^(CapEff|NoNewPrivs)' /proc/self/status; echo nofile=$(ulimit -n)";
    server.prompt(&session, script).await;
    let events = server.wait_turns(&session, 1, Duration::from_secs(90)).await;
    let turn_end = events.iter().find(|e| e["type"] == "turn_end").expect("turn_end");
    assert_eq!(turn_end["payload"]["stop_reason"], "end_turn", "{events:?}");
    let output: String = events.iter().filter_map(|e| e["payload"]["content"][0]["content"]["text"].as_str()).collect();
    assert!(output.contains("agent\n"), "commands run as the agent user: {output}");
    assert!(output.contains("hello"), "{output}");
    // Where root inside is contained (a remapping engine, gVisor) sudo is on: no
    // no-new-privileges, and root keeps the capabilities sudo needs (tests/api/sandbox_sudo.rs).
    let (_, sudo) = docker(&[
        "inspect",
        "-f",
        &format!("{{{{index .Config.Labels \"{SUDO_LABEL}\"}}}}"),
        &server.container(&agent),
    ]);
    let sudo = sudo == "on";
    assert!(output.contains(if sudo { "NoNewPrivs:\t0" } else { "NoNewPrivs:\t1" }), "{output}");
    assert!(output.contains("CapEff:\t0000000000000000"), "{output}");
    assert!(output.contains(&format!("nofile={}", nofile_limit())), "{output}");

    let (ok, inspect) = docker(&["inspect", &server.container(&agent)]);
    assert!(ok);
    let inspect: Value = serde_json::from_str(&inspect).expect("docker inspect JSON");
    let host = &inspect[0]["HostConfig"];
    assert_eq!(caps(&host["CapDrop"]), ["ALL"]);
    let kept: &[&str] = if sudo { &SUDO_CAP_ADD } else { &CAP_ADD };
    let mut expected: Vec<String> = kept.iter().map(|c| (*c).to_owned()).collect();
    expected.sort();
    assert_eq!(caps(&host["CapAdd"]), expected);
    assert_eq!(
        host["SecurityOpt"].as_array().is_some_and(|o| o.iter().any(|o| o == "no-new-privileges:true")),
        !sudo,
        "{}",
        host["SecurityOpt"]
    );
    assert_eq!(host["Memory"], json!(512 * 1024 * 1024));
    assert_eq!(host["MemorySwap"], host["Memory"], "no swap beyond the memory limit");
    assert_eq!(host["Ulimits"], json!([{"Name": "nofile", "Soft": nofile_limit(), "Hard": nofile_limit()}]));
    let labels = &inspect[0]["Config"]["Labels"];
    assert!(labels[TOOLS_LABEL].as_str().is_some_and(|t| t.starts_with(&format!("{}-tools-", server.instance))));
    assert_eq!(labels[SPEC_LABEL], SPEC_VERSION);
}

#[tokio::test]
async fn the_open_files_limit_is_a_setting() {
    if skip_unless_docker("container hardening is the Docker driver's") {
        return;
    }
    let server = TestServer::start_with(&[("AGENTHOLD_SANDBOX_NOFILE", "4096")]).await;
    let agent = server.create_agent(json!({})).await;
    let session = server.create_session(&agent).await;
    server.prompt(&session, "run echo nofile=$(ulimit -n)").await;
    let events = server.wait_turns(&session, 1, Duration::from_secs(90)).await;
    let output: String = events.iter().filter_map(|e| e["payload"]["content"][0]["content"]["text"].as_str()).collect();
    assert!(output.contains("nofile=4096"), "{output}");
    let (_, ulimits) = docker(&["inspect", "-f", "{{json .HostConfig.Ulimits}}", &server.container(&agent)]);
    let ulimits: Value = serde_json::from_str(&ulimits).expect("JSON");
    assert_eq!(ulimits, json!([{"Name": "nofile", "Soft": 4096, "Hard": 4096}]));
}
