//! A custom image (issue 8, part 7): an image built here, from the test image plus a program of
//! its own on `PATH` (a copy of the scripted agent under another name), runs as an agent's
//! `command` harness — nothing but a glibc base, `/opt/agenthold` and the harness on `PATH` — and
//! passes the image check (`scripts/dev/base-image-check.sh IMAGE command:PROGRAM`). And the
//! custom-image example of docs/images.md, read from the doc itself (its Dockerfile and its build
//! command), builds here as written (through this machine's TLS-intercepting egress, thanks to
//! the extra-CA build option), its harness answers `initialize`, and a turn runs in it.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::json;

use crate::support::skip::skip_unless_docker;
use crate::support::{TestServer, last_run_output, texts};

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

    // The image check takes a `command` harness: it answers `initialize`, and says what it
    // advertised.
    let (ok, stdout, stderr) = image_check(&image.0, &["command:my-acp-agent"]);
    assert!(ok, "the image check failed:\n{stderr}");
    assert!(stdout.starts_with("my-acp-agent {") && stdout.contains("\"protocolVersion\""), "{stdout}");
    assert!(stderr.contains("my-acp-agent: protocolVersion"), "what it advertised: {stderr}");
    // An unknown program is a failure, named.
    let (ok, _, stderr) = image_check(&image.0, &["command:no-such-agent"]);
    assert!(!ok && stderr.contains("no-such-agent"), "{stderr}");
}

/// The repository's root.
fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("the workspace").to_path_buf()
}

/// Runs `scripts/dev/base-image-check.sh IMAGE HARNESS...`: (passed, stdout, stderr).
fn image_check(image: &str, harnesses: &[&str]) -> (bool, String, String) {
    let out = Command::new("bash")
        .arg(repo().join("scripts/dev/base-image-check.sh"))
        .arg(image)
        .args(harnesses)
        .env("AGENTHOLD_CHECK_TIMEOUT", "60")
        .output()
        .expect("running the image check");
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.success(), text(&out.stdout), text(&out.stderr))
}

/// docs/images.md, as the test binary was built with it.
const IMAGES_DOC: &str = include_str!("../../../docs/images.md");

/// The custom-image example of docs/images.md: its Dockerfile and its build command (the
/// `docker build -t my/claude:1 …` line), exactly as the doc gives them.
fn docs_example() -> (String, String) {
    let section = IMAGES_DOC.split_once("\n## Custom images").expect("docs/images.md has a Custom images section").1;
    let dockerfile = section
        .split_once("```dockerfile\n")
        .and_then(|(_, rest)| rest.split_once("\n```"))
        .map(|(body, _)| format!("{body}\n"))
        .expect("the section has a dockerfile block");
    let build = section
        .lines()
        .find(|l| l.trim_start().starts_with("docker build -t my/claude:1"))
        .expect("the section has the build command")
        .trim()
        .to_owned();
    (dockerfile, build)
}

#[test]
fn the_docs_example_is_found_in_the_doc() {
    let (dockerfile, build) = docs_example();
    assert!(dockerfile.starts_with("FROM agenthold/test:latest\n"), "{dockerfile}");
    assert!(dockerfile.contains("ARG EXTRA_CA_CERTS") && dockerfile.contains("update-ca-certificates"), "{dockerfile}");
    assert!(dockerfile.contains("claude-agent-acp@"), "{dockerfile}");
    assert!(build.contains("--build-arg EXTRA_CA_CERTS=") && build.ends_with(" ."), "{build}");
}

/// Builds the docs' example as written (in a directory holding only its Dockerfile, with the
/// doc's own build command; the tag is the test's), checks its harness answers `initialize`
/// with no network, and runs a turn in it. The image is kept (tag
/// `agenthold-test/docs-custom:latest`), so a later run reuses Docker's layer cache instead of
/// downloading Node.js and the harness again.
#[tokio::test]
async fn the_docs_custom_image_builds_as_written_and_runs_a_turn() {
    if skip_unless_docker("a custom image is a Docker image") {
        return;
    }
    let (dockerfile, build) = docs_example();
    let tag = "agenthold-test/docs-custom:latest";
    let context = std::env::temp_dir().join(format!("agenthold-docs-custom-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&context).expect("context dir");
    std::fs::write(context.join("Dockerfile"), &dockerfile).expect("Dockerfile");
    let started = std::time::Instant::now();
    let built = Command::new("bash")
        .args(["-c", &build.replace("my/claude:1", tag)])
        .current_dir(&context)
        .output()
        .expect("docker build");
    let _ = std::fs::remove_dir_all(&context);
    assert!(
        built.status.success(),
        "the docs' example does not build as written ({build}):\n{}\n{}",
        String::from_utf8_lossy(&built.stdout),
        String::from_utf8_lossy(&built.stderr)
    );
    eprintln!("the docs' custom image built in {:.1}s", started.elapsed().as_secs_f64());

    let (ok, stdout, stderr) = image_check(tag, &["claude-agent-acp"]);
    assert!(ok, "the image check of the docs' image failed:\n{stderr}");
    assert!(stdout.contains("\"protocolVersion\""), "{stdout}");

    let server = TestServer::start().await;
    let agent = server.create_agent(json!({"harness": "fake", "image": tag})).await;
    let session = server.create_session(&agent).await;
    server.prompt(&session, "run node --version && command -v claude-agent-acp").await;
    let events = server.wait_turns(&session, 1, TURN).await;
    let said = last_run_output(&events);
    assert!(said.contains("v24.22.3") && said.contains("/usr/local/bin/claude-agent-acp"), "{events:?}");
}
