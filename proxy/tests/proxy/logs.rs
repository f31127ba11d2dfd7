//! The real binary: configured through `AGENTHOLD_PROXY_CONFIG`, it injects, refuses, reloads,
//! and its whole log output (at debug level) holds no secret value and no proxy password.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;

use serde_json::json;

use crate::support::*;

#[tokio::test]
async fn the_binary_logs_no_secret() {
    let setup = Setup::new();
    let si = StandIn::https(&setup.root, &["api.anthropic.com"]).await;
    let config = json!({
        "ca": setup.ca(),
        "sandboxes": [sandbox_a(&[]), sandbox_b()],
        "upstream_overrides": { "api.anthropic.com:443": setup.over(&si) }
    });
    let config_path = setup.dir.join("proxy.json");
    std::fs::write(&config_path, serde_json::to_vec(&config).expect("json")).expect("write");
    let mut child = Command::new(env!("CARGO_BIN_EXE_agenthold-proxy"))
        .env("AGENTHOLD_PROXY_CONFIG", &config_path)
        .env("AGENTHOLD_PROXY_LISTEN", "127.0.0.1:0")
        .env("RUST_LOG", "trace")
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .expect("start agenthold-proxy");
    let stderr = child.stderr.take().expect("stderr");
    let (tx, rx) = mpsc::channel::<String>();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut log = Vec::new();
    let addr = loop {
        let line = rx.recv_timeout(DEADLINE).expect("the proxy logs its address");
        log.push(line.clone());
        if let Some(rest) = line.split("listen=").nth(1) {
            break rest.split_whitespace().next().expect("addr").parse::<std::net::SocketAddr>().expect("socket addr");
        }
    };
    let proxy_addr = addr;

    // Injection, a refusal, a reflected secret, an unauthenticated client.
    let stream = connect(proxy_addr, "api.anthropic.com:443", Some((A_USER, A_PASS))).await.expect("CONNECT");
    let mut client = http1(tls(stream, "api.anthropic.com", &setup.ca_pem, &[b"http/1.1"]).await.expect("TLS")).await;
    assert_eq!(
        send(&mut client, get("api.anthropic.com", "/v1/reflect", &[("x-api-key", A_PLACEHOLDER)])).await.status,
        200
    );
    assert_eq!(
        send(&mut client, get("api.anthropic.com", "/v1/messages", &[("x-api-key", B_PLACEHOLDER)])).await.status,
        403
    );
    assert_eq!(si.requests()[0].one("x-api-key").as_deref(), Some(A_SECRET));
    assert!(connect(proxy_addr, "api.anthropic.com:443", Some((A_USER, "wrong-password"))).await.is_err());

    // A bad reload that puts a secret where serde would quote it.
    let mut broken = config.clone();
    broken["sandboxes"][1]["inject"][0]["port"] = json!(B_SECRET);
    broken["sandboxes"][0]["id"] = json!(7);
    let tmp = setup.dir.join("proxy.json.tmp");
    std::fs::write(&tmp, serde_json::to_vec(&broken).expect("json")).expect("write");
    std::fs::rename(&tmp, &config_path).expect("rename");
    eventually("the bad configuration to deny", || async {
        matches!(connect(proxy_addr, "api.anthropic.com:443", Some((A_USER, A_PASS))).await, Err(r) if r.status == 403)
    })
    .await;

    rustix_kill(child.id());
    let status = child.wait().expect("wait");
    let _ = status;
    let _ = reader.join();
    log.extend(rx.try_iter());
    let text = log.join("\n");
    assert!(text.contains("proxy configuration rejected"), "{text}");
    assert!(text.contains("CONNECT"), "{text}");
    for secret in [A_SECRET, B_SECRET, A_PASS, B_PASS, "wrong-password"] {
        assert!(!text.contains(secret), "the log contains {secret}:\n{text}");
    }
    let _ = std::fs::remove_dir_all(&setup.dir);
}

fn rustix_kill(pid: u32) {
    // SIGTERM through the `kill` utility: a graceful stop, no extra crate.
    let _ = Command::new("kill").arg("-TERM").arg(pid.to_string()).status();
}
