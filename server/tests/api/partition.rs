//! A network partition between the server and a sandbox (issue 14's chaos list): every packet
//! of the sandbox's network namespace is dropped for 20 s mid-flood (iptables in the
//! container's namespace, so the connection goes silent rather than closed). Both ends notice
//! the silence and drop the tunnel; sandboxd buffers the harness's output up to its buffer,
//! then stops reading it (the harness blocks: backpressure), reconnects once the network is
//! back and resends what was not acknowledged. Nothing is lost or repeated.

use std::process::Command;
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::skip::skip_unless_docker;
use crate::support::{TestServer, assert_gap_free, of_type};

const STALL: Duration = Duration::from_secs(120);
/// sandboxd's buffer in this test: far less than the flood emits during the partition.
const BUFFER_BYTES: u64 = 256 << 10;

/// An image whose sandboxd keeps a small buffer and hears silence after 3 s (a ping a second).
fn image_with_small_buffer() -> String {
    let base = std::env::var("AGENTHOLD_TEST_IMAGE").unwrap_or_else(|_| "agenthold/test:latest".to_owned());
    let tag = format!("agenthold/test-partition:{}", &uuid::Uuid::new_v4().simple().to_string()[..8]);
    let dockerfile = format!(
        "FROM {base}\nENV AGENTHOLD_SANDBOXD_BUFFER_BYTES={BUFFER_BYTES} AGENTHOLD_PING_INTERVAL_MS=1000 AGENTHOLD_SILENT_TUNNEL_MS=3000\n"
    );
    let mut build = Command::new("docker")
        .args(["build", "-q", "-t", &tag, "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("docker build");
    {
        use std::io::Write as _;
        build.stdin.take().expect("stdin").write_all(dockerfile.as_bytes()).expect("dockerfile");
    }
    let output = build.wait_with_output().expect("docker build");
    assert!(output.status.success(), "docker build: {}", String::from_utf8_lossy(&output.stderr));
    tag
}

/// Drops (`-I`) or lets through again (`-D`) every packet in the container's network namespace.
fn partition(container: &str, op: &str) {
    let pid = Command::new("docker").args(["inspect", "-f", "{{.State.Pid}}", container]).output().expect("inspect");
    let pid = String::from_utf8_lossy(&pid.stdout).trim().to_owned();
    for chain in ["INPUT", "OUTPUT"] {
        let status = Command::new("nsenter")
            .args(["-t", &pid, "-n", "iptables", "-w", op, chain, "-j", "DROP"])
            .status()
            .expect("nsenter iptables");
        assert!(status.success(), "iptables {op} {chain} in {container}'s namespace");
    }
}

#[tokio::test]
async fn a_sandbox_cut_off_for_20_s_buffers_then_blocks_and_loses_nothing() {
    if skip_unless_docker("it cuts a container's network namespace") {
        return;
    }
    let image = image_with_small_buffer();
    let server = TestServer::start_with(&[("AGENTHOLD_SILENT_TUNNEL_SECS", "3")]).await;
    let agent = server.create_agent(json!({"image": image})).await;
    let session = server.create_session(&agent).await;
    server.prompt(&session, "text ready").await;
    server.wait_turns(&session, 1, STALL).await;
    let container = server.container(&agent);

    const UPDATES: i64 = 30_000;
    let mut watcher = server.watch(&session, "0").await;
    server.prompt(&session, &format!("flood {UPDATES} 1500\ntext done")).await;
    let mut seen: Vec<Value> = watcher.until("turn_end", STALL).await; // the first turn
    while flood_indices(&seen).len() < 500 {
        seen.push(watcher.next(STALL).await.expect("flood updates before the partition"));
    }
    partition(&container, "-I");
    tokio::time::sleep(Duration::from_secs(20)).await;
    partition(&container, "-D");
    seen.extend(watcher.until("turn_end", STALL).await);

    assert_gap_free(&seen);
    assert_eq!(flood_indices(&seen), (1..=UPDATES).collect::<Vec<i64>>(), "every update exactly once, in order");
    assert_eq!(seen.last().map(|e| e["payload"]["stop_reason"].clone()), Some(json!("end_turn")));
    assert!(of_type(&seen, "error").is_empty(), "{:?}", of_type(&seen, "error"));

    // Backpressure: once the buffer was full the harness could not write, so it emitted nothing
    // for most of the partition (its own timestamps show the stall).
    let emitted: Vec<i64> =
        seen.iter().filter_map(|e| e["payload"]["_meta"]["fakeagent"]["emittedAtUs"].as_i64()).collect();
    let longest_stall_s = emitted.windows(2).map(|w| w[1] - w[0]).max().unwrap_or(0) as f64 / 1e6;
    assert!(
        longest_stall_s > 10.0,
        "the harness was held back during the partition (longest stall {longest_stall_s:.1} s)"
    );
    // Both ends noticed the silence, and sandboxd came back.
    let logs = Command::new("docker").args(["logs", &container]).output().expect("docker logs");
    let logs = format!("{}{}", String::from_utf8_lossy(&logs.stdout), String::from_utf8_lossy(&logs.stderr));
    assert!(
        logs.contains("no word from the server") || logs.contains("the server took nothing"),
        "sandboxd noticed the partition: {logs}"
    );
    assert!(logs.matches("connected to the server").count() >= 2, "sandboxd reconnected: {logs}");
    let _ = Command::new("docker").args(["rmi", "-f", &image]).output();
}

fn flood_indices(events: &[Value]) -> Vec<i64> {
    events.iter().filter_map(|e| e["payload"]["_meta"]["fakeagent"]["i"].as_i64()).collect()
}
