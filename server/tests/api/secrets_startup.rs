//! The master key at start and at rotation, against the real binary: production mode refuses to
//! start without a (well-formed) key and says how to give one; with a key file it starts;
//! `agenthold secrets rotate` re-encrypts every secret under a new key, all or nothing.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use agenthold_server::ids::AgentId;
use agenthold_server::secrets::{self, master_key::MasterKey};
use serde_json::json;

use crate::support::TestServer;
use crate::support::secrets::{admin, create_secret, database, personal_workspace, unique_value};

fn temp_dir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("agenthold-keys-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

fn write_key(dir: &Path, name: &str) -> PathBuf {
    let path = dir.join(name);
    drop(MasterKey::open_or_create(&path).expect("a key file"));
    path
}

/// Runs the `agenthold` binary with only the given environment, until it exits (deadline).
fn run(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_agenthold"));
    command.args(args).env_clear().env("PATH", std::env::var("PATH").unwrap_or_default());
    for (key, value) in env {
        command.env(key, value);
    }
    let mut child = command.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("spawn");
    let deadline = Instant::now() + Duration::from_secs(30);
    while child.try_wait().expect("wait").is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("agenthold {args:?} did not exit within 30 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().expect("output")
}

#[tokio::test]
async fn outside_dev_mode_the_server_refuses_to_start_without_a_master_key() {
    let dir = temp_dir();
    let data = dir.join("data");
    let data = data.to_str().expect("utf-8");
    // Nothing answers on these ports: the server must stop before it needs the database.
    let base = [
        ("DATABASE_URL", "postgres://nobody@127.0.0.1:1/none"),
        ("AGENTHOLD_LISTEN", "127.0.0.1:0"),
        ("AGENTHOLD_TUNNEL_LISTEN", "127.0.0.1:0"),
        ("AGENTHOLD_DATA_DIR", data),
        ("AGENTHOLD_DRIVER", "local"),
    ];
    let output = run(&[], &base);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "started without a key: {stderr}");
    assert!(stderr.contains("no master key") && stderr.contains("AGENTHOLD_MASTER_KEY_FILE"), "{stderr}");
    assert!(!Path::new(data).join("master.key").exists(), "production mode makes no key of its own");

    let short = dir.join("short.key");
    std::fs::write(&short, "c2hvcnQ=\n").expect("write");
    let with_short = [base.as_slice(), &[("AGENTHOLD_MASTER_KEY_FILE", short.to_str().expect("utf-8"))]].concat();
    let output = run(&[], &with_short);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success() && stderr.contains("32 bytes"), "{stderr}");

    let both = [base.as_slice(), &[("AGENTHOLD_MASTER_KEY_FILE", "/x"), ("AGENTHOLD_MASTER_KEY", "eA==")]].concat();
    let output = run(&[], &both);
    assert!(!output.status.success() && String::from_utf8_lossy(&output.stderr).contains("not both"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn in_production_mode_a_key_file_or_variable_is_used() {
    let dir = temp_dir();
    let key_file = write_key(&dir, "prod.key");
    let key = MasterKey::from_file(&key_file).expect("key");
    let server = TestServer::start_with(&[
        ("AGENTHOLD_MODE", "production"),
        ("AGENTHOLD_MASTER_KEY_FILE", key_file.to_str().expect("utf-8")),
    ])
    .await;
    let ws = personal_workspace(&server).await;
    let secret = create_secret(&server, &ws, json!({"name": "k", "preset": "openai", "value": unique_value()})).await;
    let stored: String = sqlx::query_scalar("SELECT key_id FROM secrets WHERE id = $1::uuid")
        .bind(&secret)
        .fetch_one(&database(&server).await)
        .await
        .expect("row");
    assert_eq!(stored, key.id(), "sealed under the configured key");
    assert!(!server.data_dir.join("master.key").exists(), "no key of its own in production mode");
    assert!(server.log().contains(key.id()), "the log names the key's id");
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn rotation_reencrypts_every_secret_under_the_new_key_all_or_nothing() {
    let server = TestServer::start().await;
    let ws = personal_workspace(&server).await;
    let values = [unique_value(), unique_value()];
    let first = create_secret(&server, &ws, json!({"name": "one", "preset": "anthropic", "value": values[0]})).await;
    create_secret(&server, &ws, json!({"name": "two", "preset": "openai", "value": values[1]})).await;
    let agent = server.create_agent(json!({})).await;
    let path = format!("/api/v1/agents/{agent}/secrets/ANTHROPIC_API_KEY");
    assert_eq!(admin(&server, "PUT", &path, json!({"secret_id": first})).await.0, 200);
    // A webhook's secret is sealed the same way (docs/triggers.md).
    let (status, webhook) =
        admin(&server, "POST", &format!("/api/v1/agents/{agent}/webhooks"), json!({"name": "w", "template": "x"}))
            .await;
    assert_eq!(status, 201, "{webhook}");
    let webhook_secret = webhook["secret"].as_str().expect("secret").to_owned();
    let webhook_id: uuid::Uuid = webhook["webhook"]["id"].as_str().and_then(|id| id.parse().ok()).expect("id");

    let old_file = server.data_dir.join("master.key");
    let old = MasterKey::from_file(&old_file).expect("old key");
    let dir = temp_dir();
    let new_file = write_key(&dir, "new.key");
    let new = MasterKey::from_file(&new_file).expect("new key");
    let stranger_file = write_key(&dir, "stranger.key");
    let rotate = |old: &Path, new: &Path| {
        let args = ["secrets", "rotate", "--old-key-file", old.to_str().expect("utf-8"), "--new-key-file"];
        let new = new.to_str().expect("utf-8").to_owned();
        let args: Vec<&str> = args.iter().copied().chain([new.as_str()]).collect();
        run(&args, &[("DATABASE_URL", server.database_url.as_str())])
    };
    let pool = database(&server).await;
    let key_ids = || async {
        let ids: Vec<String> =
            sqlx::query_scalar("SELECT key_id FROM secrets ORDER BY name").fetch_all(&pool).await.expect("rows");
        ids
    };

    // A wrong old key changes nothing.
    let output = rotate(&stranger_file, &new_file);
    assert!(!output.status.success(), "{}", String::from_utf8_lossy(&output.stdout));
    assert_eq!(key_ids().await, vec![old.id().to_owned(), old.id().to_owned()]);

    let output = rotate(&old_file, &new_file);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout} {}", String::from_utf8_lossy(&output.stderr));
    assert!(stdout.contains("re-encrypted 3 secret(s)"), "{stdout}");
    assert_eq!(key_ids().await, vec![new.id().to_owned(), new.id().to_owned()]);
    let agent_id = AgentId(agent.parse().expect("uuid"));
    let attached = secrets::for_agent(&pool, &new, agent_id).await.expect("opens with the new key");
    assert_eq!(attached[0].value.expose(), values[0]);
    assert!(secrets::for_agent(&pool, &old, agent_id).await.is_err(), "the old key no longer opens it");
    let hook = agenthold_server::store::webhooks::get(&pool, webhook_id).await.expect("row").expect("webhook");
    let row = agenthold_server::secrets::cipher::RowIdentity::webhook_secret(agent_id, webhook_id);
    let opened = agenthold_server::secrets::cipher::open(&new, row, &hook.secret).expect("opens with the new key");
    assert_eq!(opened.expose(), webhook_secret);

    // Running it again is harmless.
    let output = rotate(&old_file, &new_file);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && stdout.contains("re-encrypted 0 secret(s)") && stdout.contains("3 already"),
        "{stdout}"
    );
    for value in &values {
        assert!(!stdout.contains(value.as_str()));
    }
    let _ = std::fs::remove_dir_all(&dir);
}
