//! `agentholdctl` (the real binary, built beside `agenthold`: `cargo build -p agenthold-cli`)
//! against a real server: `login` into a config dir of its own, then agents create/show/patch,
//! sessions, and `prompt --follow` through real turns of the `fake` harness, whose exit code
//! follows the stop reason (0 end_turn, 4 cancelled, 5 error, 6 another reason); `login
//! --username` signing in with a password and making an API token.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;
use tokio::process::Command;

use crate::support::TestServer;

fn ctl_binary() -> PathBuf {
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_agenthold")).with_file_name("agentholdctl");
    assert!(bin.exists(), "{} is missing: cargo build -p agenthold-cli", bin.display());
    bin
}

/// `agentholdctl ARGS…` with `config` as its config dir and no AGENTHOLD_* from the caller.
fn ctl(config: &Path, args: &[&str]) -> Command {
    let mut command = Command::new(ctl_binary());
    command.args(args).env("XDG_CONFIG_HOME", config).kill_on_drop(true);
    for key in ["AGENTHOLD_URL", "AGENTHOLD_TOKEN", "AGENTHOLD_CA_FILE", "AGENTHOLD_CREDENTIALS"] {
        command.env_remove(key);
    }
    command.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    command
}

async fn run(config: &Path, args: &[&str]) -> Output {
    tokio::time::timeout(Duration::from_secs(180), ctl(config, args).output())
        .await
        .expect("agentholdctl did not finish within 180 s")
        .expect("running agentholdctl")
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn json(out: &Output) -> Value {
    assert!(out.status.success(), "exit {:?}: {}", out.status.code(), stderr(out));
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {}", stdout(out)))
}

#[tokio::test]
async fn agentholdctl_logs_in_and_follows_real_turns() {
    let server = TestServer::start().await;
    let config = server.data_dir.join("cli-config");

    let out = run(&config, &["login", "--url", &server.url, "--token", &server.token]).await;
    assert!(out.status.success(), "login: {}", stderr(&out));
    assert!(stdout(&out).contains("as admin"), "{}", stdout(&out));
    let file = config.join("agenthold/credentials");
    assert_eq!(std::fs::metadata(&file).expect("the login file").permissions().mode() & 0o777, 0o600);

    // From here on, no --url and no --token: the login file serves.
    let agent = json(&run(&config, &["--json", "agents", "create", "--name", "cli", "--harness", "fake"]).await);
    let agent = agent["id"].as_str().expect("agent id").to_owned();
    let out = run(&config, &["agents", "show", &agent]).await;
    assert!(stdout(&out).contains("name: cli\n"), "{}", stdout(&out));
    let patched = json(&run(&config, &["--json", "agents", "patch", &agent, "--model", "m-1", "--env", "A=1"]).await);
    assert_eq!((patched["model"].as_str(), patched["env"]["A"].as_str()), (Some("m-1"), Some("1")));
    let out = run(&config, &["agents", "patch", &agent]).await;
    assert_eq!(out.status.code(), Some(2), "nothing to change is bad usage: {}", stderr(&out));
    let session = json(&run(&config, &["--compact", "sessions", "create", &agent]).await);
    let session = session["id"].as_str().expect("session id").to_owned();

    let follow = |script: &'static str| ["prompt", "--follow", "--timeout", "150", session.as_str(), script];
    let out = run(&config, &follow("text hello from the cli\nrun echo ran")).await;
    assert_eq!(out.status.code(), Some(0), "stderr: {}", stderr(&out));
    let transcript = stdout(&out);
    assert!(transcript.starts_with("hello from the cli"), "{transcript}");
    assert!(transcript.contains("\n[tool] "), "{transcript}");
    assert!(transcript.lines().last().is_some_and(|l| l.starts_with("[turn_end] end_turn")), "{transcript}");

    let out = run(&config, &follow("stop max_tokens\ntext cut off")).await;
    assert_eq!(out.status.code(), Some(6), "max_tokens: {}", stderr(&out));
    assert!(stderr(&out).contains("the turn ended: max_tokens"), "{}", stderr(&out));
    let out = run(&config, &follow("error model overloaded")).await;
    assert_eq!(out.status.code(), Some(5), "error: {}", stderr(&out));

    // A turn that hangs: --follow gives up at its timeout (3); then it is cancelled while a
    // second follower waits for it (4).
    let out = run(&config, &["prompt", "--follow", "--timeout", "5", &session, "text waiting\nhang"]).await;
    assert_eq!(out.status.code(), Some(3), "timeout: {}", stderr(&out));
    let last_seq = json(&run(&config, &["--json", "sessions", "show", &session]).await)["last_seq"].as_u64();
    let after = last_seq.expect("last_seq").to_string();
    let watcher =
        ctl(&config, &["watch", "--json", &session, "--after", &after, "--until", "turn_end", "--timeout", "60"])
            .spawn()
            .expect("watch");
    let out = run(&config, &["cancel", &session]).await;
    assert!(out.status.success(), "cancel: {}", stderr(&out));
    let watched = tokio::time::timeout(Duration::from_secs(90), watcher.wait_with_output())
        .await
        .expect("watch ended")
        .expect("watch");
    assert!(watched.status.success(), "watch: {}", stderr(&watched));
    let end: Value = serde_json::from_str(stdout(&watched).lines().last().expect("an event")).expect("JSON");
    assert_eq!(end["payload"]["stop_reason"], "cancelled");

    let cancelled = ctl(&config, &["prompt", "--follow", "--timeout", "150", &session, "text again\nhang"])
        .spawn()
        .expect("prompt");
    // Cancel once the turn has started (the prompt is stored before the follower connects).
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let out = run(&config, &["cancel", &session]).await;
        if out.status.success() {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "cancel: {}", stderr(&out));
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let out = tokio::time::timeout(Duration::from_secs(90), cancelled.wait_with_output())
        .await
        .expect("prompt --follow ended")
        .expect("prompt");
    assert_eq!(out.status.code(), Some(4), "cancelled: {}", stderr(&out));

    let out = run(&config, &["agents", "delete", &agent]).await;
    assert!(out.status.success(), "delete: {}", stderr(&out));
    let out = run(&config, &["agents", "show", &agent]).await;
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("HTTP 404 NOT_FOUND"), "{}", stderr(&out));
}

#[tokio::test]
async fn login_with_a_password_makes_an_api_token() {
    let server = TestServer::start().await;
    let password = "cli-password-0123456789";
    let (status, _) = server.post("/api/v1/users", json!({"username": "ada", "password": password})).await;
    assert_eq!(status, 201);
    let config = server.data_dir.join("cli-config-ada");
    let login = |password: String| {
        let config = config.clone();
        let url = server.url.clone();
        async move {
            let args = ["login", "--url", url.as_str(), "--username", "ada", "--token-name", "laptop"];
            let mut child = ctl(&config, &args).stdin(Stdio::piped()).spawn().expect("login");
            let mut stdin = child.stdin.take().expect("stdin");
            stdin.write_all(format!("{password}\n").as_bytes()).await.expect("password");
            drop(stdin);
            child.wait_with_output().await.expect("login")
        }
    };
    let out = login("wrong-password-0123".to_owned()).await;
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("HTTP 401 UNAUTHORIZED"), "{}", stderr(&out));
    assert!(!stderr(&out).contains("wrong-password"), "{}", stderr(&out));

    let out = login(password.to_owned()).await;
    assert!(out.status.success(), "login: {}", stderr(&out));
    assert!(stdout(&out).contains("as ada"), "{}", stdout(&out));
    // Later commands act as ada with the stored token.
    let agents = json(&run(&config, &["--json", "agents", "list"]).await);
    assert!(agents["agents"].as_array().is_some_and(Vec::is_empty), "ada sees none of admin's: {agents}");
    // The token is ada's, named as asked.
    let stored: Value =
        serde_json::from_str(&std::fs::read_to_string(config.join("agenthold/credentials")).expect("login file"))
            .expect("JSON");
    let token = stored["token"].as_str().expect("token");
    let (status, _, me) = server.raw_with_headers("GET", "/api/v1/me", Some(token), &[], Value::Null).await;
    assert_eq!((status, me["username"].as_str()), (200, Some("ada")));
    let (status, _, listed) = server.raw_with_headers("GET", "/api/v1/tokens", Some(token), &[], Value::Null).await;
    assert_eq!(status, 200, "{listed}");
    let names: Vec<&str> =
        listed["tokens"].as_array().expect("tokens").iter().filter_map(|t| t["name"].as_str()).collect();
    assert_eq!(names, ["laptop"]);
}

#[tokio::test]
async fn prompt_follow_rides_out_a_server_restart_without_a_gap_or_a_repeat() {
    let mut server = TestServer::start().await;
    let config = server.data_dir.join("cli-config");
    let out = run(&config, &["login", "--url", &server.url, "--token", &server.token]).await;
    assert!(out.status.success(), "login: {}", stderr(&out));
    let agent = server.create_agent(json!({})).await;
    let session = server.create_session(&agent).await;
    let follower =
        ctl(&config, &["--json", "prompt", "--follow", "--timeout", "150", &session, "flood 600 100\ntext done"])
            .spawn()
            .expect("prompt --follow");
    // Mid-turn: a graceful stop (streams close with 1012), then the server comes back.
    let mut watcher = server.watch(&session, "0").await;
    for _ in 0..100 {
        watcher.next(Duration::from_secs(60)).await.expect("events before the restart");
    }
    assert!(server.terminate(Duration::from_secs(20)), "the server did not stop");
    tokio::time::sleep(Duration::from_millis(500)).await;
    server.restart().await;

    let out = tokio::time::timeout(Duration::from_secs(170), follower.wait_with_output())
        .await
        .expect("prompt --follow ended")
        .expect("prompt --follow");
    assert_eq!(out.status.code(), Some(0), "stderr: {}", stderr(&out));
    assert!(stderr(&out).contains("reconnecting"), "it had to reconnect: {}", stderr(&out));
    let events: Vec<Value> =
        stdout(&out).lines().map(|line| serde_json::from_str(line).expect("a JSON line")).collect();
    let seqs: Vec<i64> = events.iter().filter_map(|e| e["seq"].as_i64()).collect();
    let first = seqs[0];
    assert_eq!(seqs, (first..first + seqs.len() as i64).collect::<Vec<_>>(), "no gap, no repeat");
    let indices: Vec<i64> = events.iter().filter_map(|e| e["payload"]["_meta"]["fakeagent"]["i"].as_i64()).collect();
    assert_eq!(indices, (1..=600).collect::<Vec<i64>>());
    assert_eq!(events.last().map(|e| e["type"].clone()), Some(json!("turn_end")));
}
