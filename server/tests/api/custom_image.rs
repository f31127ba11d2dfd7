//! A custom image (issue 8, part 7): an image built here, from the test image plus a program of
//! its own on `PATH` (a copy of the scripted agent under another name), runs as an agent's
//! `command` harness — nothing but a glibc base, `/opt/agenthold` and the harness on `PATH`.

use std::process::Command;
use std::time::Duration;

use serde_json::json;

use crate::support::skip::skip_unless_docker;
use crate::support::{TestServer, texts};

const TURN: Duration = Duration::from_secs(120);

/// Removes the image when the test ends.
struct Image(String);

impl Drop for Image {
    fn drop(&mut self) {
        let _ = Command::new("docker").args(["rmi", "-f", &self.0]).output();
    }
}

#[tokio::test]
async fn a_harness_from_a_custom_image_runs_a_turn() {
    if skip_unless_docker("a custom image is a Docker image") {
        return;
    }
    let context = std::env::temp_dir().join(format!("agenthold-custom-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&context).expect("context dir");
    let exe = std::path::PathBuf::from(env!("CARGO_BIN_EXE_agenthold"));
    let fakeagent = exe.parent().expect("bin dir").join("fakeagent");
    std::fs::copy(&fakeagent, context.join("my-acp-agent")).expect("copying the program into the build context");
    let base = std::env::var("AGENTHOLD_TEST_IMAGE").unwrap_or_else(|_| "agenthold/test:latest".to_owned());
    std::fs::write(
        context.join("Dockerfile"),
        format!(
            "FROM {base}\nCOPY my-acp-agent /usr/local/bin/my-acp-agent\nRUN chmod 0755 /usr/local/bin/my-acp-agent\n"
        ),
    )
    .expect("Dockerfile");
    let tag = format!("agenthold-test/custom:{}", uuid::Uuid::new_v4().simple());
    let image = Image(tag.clone());
    let built = Command::new("docker").args(["build", "-q", "-t", &tag]).arg(&context).output().expect("docker build");
    assert!(built.status.success(), "docker build: {}", String::from_utf8_lossy(&built.stderr));
    let _ = std::fs::remove_dir_all(&context);

    let server = TestServer::start().await;
    let agent = server.create_agent(json!({"harness": "command", "command": ["my-acp-agent"], "image": image.0})).await;
    let session = server.create_session(&agent).await;
    server.prompt(&session, "text hello from a custom image").await;
    let events = server.wait_turns(&session, 1, TURN).await;
    assert!(texts(&events).iter().any(|t| t == "hello from a custom image"), "{events:?}");
    let (_, view) = server.get(&format!("/api/v1/agents/{agent}")).await;
    assert_eq!(view["image"], tag);
}
