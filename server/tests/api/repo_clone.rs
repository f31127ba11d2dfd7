//! An agent for a repository, and git with a token that never enters the sandbox (issue 32,
//! items 3 and 4). A real HTTPS git server (`scripts/e2e/standins/git_server.py`: `git
//! http-backend` behind HTTP Basic with a token) on loopback stands in for `github.com`, reached
//! through the real egress proxy's test-only upstream override. An agent of the base image
//! (it has git) made with `repo` gets it cloned into its home before its harness starts, through
//! the proxy, with a `git_token` secret: its sessions start in the clone, and a push from inside
//! lands on the server with the real token, which no file, environment or process of the sandbox
//! holds. With a wrong token the clone fails, the view says why, and the agent still runs. The
//! API's validation of `repo` and of the `git_token` preset runs on any driver.

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::proxy::{DEADLINE, Proxy};
use crate::support::secrets::{admin, create_secret, personal_workspace};
use crate::support::skip::skip_unless_docker;
use crate::support::{TestServer, last_run_output};

const TURN: Duration = Duration::from_secs(180);
const BASE_IMAGE: &str = "agenthold/base:latest";

fn scripts() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/e2e/standins")
}

fn git(dir: &Path, args: &[&str]) {
    let out =
        Command::new("git").args(args).current_dir(dir).env("GIT_CONFIG_GLOBAL", "/dev/null").output().expect("git");
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

/// The git server: a bare `org/repo.git` holding one commit with `README.md`.
struct GitServer {
    child: Child,
    port: u16,
    root_pem: PathBuf,
    bare: PathBuf,
    record: PathBuf,
}

impl GitServer {
    fn start(dir: &Path, token: &str) -> Self {
        let certs = dir.join("certs");
        let made = Command::new("bash")
            .arg(scripts().join("make-cert.sh"))
            .arg(&certs)
            .arg("github.com")
            .output()
            .expect("make-cert.sh");
        assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
        let bare = dir.join("root/org/repo.git");
        std::fs::create_dir_all(&bare).expect("dir");
        git(&bare, &["init", "-q", "--bare", "-b", "main"]);
        let seed = dir.join("seed");
        std::fs::create_dir_all(&seed).expect("dir");
        git(&seed, &["init", "-q", "-b", "main"]);
        std::fs::write(seed.join("README.md"), "the e2e repository\n").expect("write");
        git(&seed, &["add", "README.md"]);
        git(&seed, &["-c", "user.name=e2e", "-c", "user.email=e2e@example.com", "commit", "-q", "-m", "first"]);
        git(&seed, &["push", "-q", bare.to_str().expect("utf-8"), "main"]);
        let ready = dir.join("git.port");
        let record = dir.join("git.record");
        let child = Command::new("python3")
            .arg(scripts().join("git_server.py"))
            .arg("--root")
            .arg(dir.join("root"))
            .args(["--token", token])
            .arg("--cert")
            .arg(certs.join("leaf.pem"))
            .arg("--key")
            .arg(certs.join("leaf.key"))
            .arg("--ready")
            .arg(&ready)
            .arg("--record")
            .arg(&record)
            .stderr(std::fs::File::create(dir.join("git.err")).expect("log"))
            .spawn()
            .expect("python3 git_server.py");
        let started = Instant::now();
        let port = loop {
            if let Some(port) = std::fs::read_to_string(&ready).ok().and_then(|p| p.trim().parse().ok()) {
                break port;
            }
            assert!(started.elapsed() < DEADLINE, "the git server did not start");
            std::thread::sleep(Duration::from_millis(50));
        };
        Self { child, port, root_pem: certs.join("root.pem"), bare, record }
    }

    /// The passwords it was sent (`-`: none).
    fn passwords(&self) -> Vec<String> {
        std::fs::read_to_string(&self.record).unwrap_or_default().lines().map(str::to_owned).collect()
    }
}

impl Drop for GitServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A server whose sandboxes use a real proxy on the host, `github.com` mapped to the git server.
struct Setup {
    server: TestServer,
    proxy: Proxy,
    git: GitServer,
    dir: PathBuf,
}

impl Setup {
    async fn start(token: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("agenthold-repo-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&dir).expect("dir");
        let git = GitServer::start(&dir, token);
        let overrides = json!({"github.com:443": {"addr": format!("127.0.0.1:{}", git.port), "ca_cert": git.root_pem}});
        let config = dir.join("proxy.json");
        let proxy = Proxy::start(&config, "0.0.0.0:0", dir.join("proxy.log"));
        let proxy_addr = format!("host.docker.internal:{}", proxy.port());
        let server = TestServer::start_with(&[
            ("AGENTHOLD_PROXY_TEST_UPSTREAM_OVERRIDES", &overrides.to_string()),
            ("AGENTHOLD_PROXY_ADDR", &proxy_addr),
            ("AGENTHOLD_PROXY_CONFIG_FILE", config.to_str().expect("utf-8 path")),
        ])
        .await;
        let started = Instant::now();
        while !config.exists() {
            assert!(started.elapsed() < DEADLINE, "the server never wrote {}", config.display());
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Self { server, proxy, git, dir }
    }

    /// An agent of the base image for the repository, with a `git_token` secret of `value`
    /// attached as `GIT_TOKEN`.
    async fn agent(&self, value: &str) -> String {
        let workspace = personal_workspace(&self.server).await;
        let name = format!("git-{}", &uuid::Uuid::new_v4().simple().to_string()[..8]);
        let body = json!({"name": name, "preset": "git_token", "value": value, "host": "github.com"});
        let secret = create_secret(&self.server, &workspace, body).await;
        let agent = self
            .server
            .create_agent(
                json!({"image": BASE_IMAGE, "repo": {"url": "https://github.com/org/repo.git", "branch": "main"}}),
            )
            .await;
        let (status, body) = admin(
            &self.server,
            "PUT",
            &format!("/api/v1/agents/{agent}/secrets/GIT_TOKEN"),
            json!({"secret_id": secret}),
        )
        .await;
        assert_eq!(status, 200, "{body}");
        agent
    }

    async fn repo_view(&self, agent: &str) -> Value {
        let (status, view) = self.server.get(&format!("/api/v1/agents/{agent}")).await;
        assert_eq!(status, 200, "{view}");
        view["repo"].clone()
    }

    /// One `run` turn; its output.
    async fn run(&self, session: &str, turns: usize, command: &str) -> String {
        self.server.prompt(session, &format!("run {command}")).await;
        let events = self.server.wait_turns(session, turns, TURN).await;
        last_run_output(&events)
    }
}

impl Drop for Setup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[tokio::test]
async fn an_agent_for_a_repository_clones_commits_and_pushes_without_ever_holding_the_token() {
    if skip_unless_docker("local sandboxes do not use the egress proxy") {
        return;
    }
    let token = format!("ghp_real{}", uuid::Uuid::new_v4().simple());
    let setup = Setup::start(&token).await;
    let server = &setup.server;
    let agent = setup.agent(&token).await;
    assert_eq!(setup.repo_view(&agent).await["state"], "pending", "nothing is cloned before the first wake");

    // The first session wakes the agent: the clone runs first, and the session starts in it.
    let session = server.create_session(&agent).await;
    let out = setup.run(&session, 1, "pwd; cat README.md; git rev-parse --abbrev-ref HEAD").await;
    let repo = setup.repo_view(&agent).await;
    assert_eq!(repo["state"], "cloned", "{repo}\n\nproxy log:\n{}", setup.proxy.log());
    assert_eq!(repo["path"], "/home/agent/repo");
    assert!(repo["error"].is_null(), "{repo}");
    assert_eq!(out.lines().collect::<Vec<_>>(), ["/home/agent/repo", "the e2e repository", "main"], "{out}");

    // A commit on a branch, pushed from inside the sandbox (git-receive-pack through the proxy).
    let push = "git checkout -q -b agent-work && echo change > CHANGE && git add CHANGE && \
                git -c user.name=agent -c user.email=agent@example.com commit -q -m change && \
                git push -q origin agent-work 2>&1; echo pushed=$?";
    let out = setup.run(&session, 2, push).await;
    assert!(out.contains("pushed=0"), "{out}\n\nproxy log:\n{}", setup.proxy.log());
    let landed = Command::new("git")
        .args(["log", "--format=%s", "agent-work"])
        .current_dir(&setup.git.bare)
        .output()
        .expect("git log");
    assert_eq!(String::from_utf8_lossy(&landed.stdout).lines().next(), Some("change"), "the push landed");
    // The real token reached the git server, and only the real token (or nothing, before the
    // 401 that makes git ask its helper): never the placeholder.
    let passwords = setup.git.passwords();
    assert!(passwords.contains(&token), "{passwords:?}");
    assert!(passwords.iter().all(|p| *p == token || p == "-"), "{passwords:?}");

    // The sandbox holds no copy of the token: no process's environment or command line, no
    // file in the home, /tmp, /etc, /opt, /run, /root (read as the agent and as root).
    let container = server.container(&agent);
    let mut found = Vec::new();
    for user in ["agent", "root"] {
        let dump = Command::new("docker")
            .args(["exec", "-u", user, &container, "sh", "-c"])
            .arg("cat /proc/[0-9]*/environ /proc/[0-9]*/cmdline 2>/dev/null; tar -cf - /home /tmp /etc /root /run /var/tmp /opt 2>/dev/null")
            .output()
            .expect("docker exec");
        let bytes = dump.stdout;
        assert!(bytes.len() > 10_000, "the dump as {user} read little ({} bytes)", bytes.len());
        let holds = |needle: &[u8]| bytes.windows(needle.len()).any(|w| w == needle);
        // The search reads what the harness holds (its git configuration is there), so an absent
        // token means absent. (The sandbox's root lacks the capability to read the agent's /proc.)
        if user == "agent" {
            assert!(holds(b"GIT_CONFIG_KEY_0=credential.https://github.com.helper"), "the harness's git configuration");
        }
        if holds(token.as_bytes()) {
            found.push(user);
        }
    }
    assert!(found.is_empty(), "the token is in the sandbox (read as {found:?})");
}

#[tokio::test]
async fn a_clone_with_a_wrong_token_fails_with_the_reason_and_the_agent_still_runs() {
    if skip_unless_docker("local sandboxes do not use the egress proxy") {
        return;
    }
    let setup = Setup::start("ghp_the_right_one_123").await;
    let agent = setup.agent("ghp_a_wrong_one_456").await;
    let session = setup.server.create_session(&agent).await;
    let out = setup.run(&session, 1, "pwd; ls -a").await;
    let repo = setup.repo_view(&agent).await;
    assert_eq!(repo["state"], "failed", "{repo}");
    let error = repo["error"].as_str().unwrap_or_default();
    assert!(
        error.starts_with("git clone exited with status 128") && error.contains("Authentication failed"),
        "{error}"
    );
    assert!(!error.contains("ghp_"), "no token in the reason: {error}");
    assert_eq!(out.lines().next(), Some("/home/agent"), "the session starts in the home: {out}");
    assert!(!out.contains("repo"), "no half-made folder: {out}");
}

#[tokio::test]
async fn repo_and_git_token_are_checked() {
    let server = TestServer::start().await;
    for (repo, why) in [
        (json!({"url": "http://github.com/o/r.git"}), "https"),
        (json!({"url": "git@github.com:o/r.git"}), "https"),
        (json!({"url": "https://user:ghp_x@github.com/o/r.git"}), "git_token"),
        (json!({"url": "https://github.com"}), "repository path"),
        (json!({"url": "https://127.0.0.1/o/r.git"}), "DNS name"),
        (json!({"url": format!("https://github.com/{}", "a/".repeat(1100))}), "2048"),
        (json!({"url": "https://github.com/o/r", "branch": "-x"}), "repo.branch"),
        (json!({"url": "https://github.com/o/r", "branch": "a..b"}), "repo.branch"),
        (json!({"url": "https://github.com/o/r", "other": 1}), "unknown field"),
    ] {
        let (status, body) = server
            .post("/api/v1/agents", json!({"name": format!("r{}", &uuid::Uuid::new_v4().simple().to_string()[..8]), "harness": "fake", "repo": repo}))
            .await;
        assert_eq!(status, 400, "{repo}: {body}");
        let code = body["error"]["code"].as_str().unwrap_or_default();
        assert!(code == "INVALID_REPO" || code == "INVALID_BODY", "{repo}: {body}");
        assert!(body["error"]["message"].as_str().unwrap_or_default().contains(why), "{repo}: {body}");
    }
    let agent =
        server.create_agent(json!({"repo": {"url": "https://github.com/org/tool.git", "branch": "release/1.x"}})).await;
    let (_, view) = server.get(&format!("/api/v1/agents/{agent}")).await;
    assert_eq!(view["repo"]["url"], "https://github.com/org/tool.git");
    assert_eq!(view["repo"]["branch"], "release/1.x");
    assert_eq!(view["repo"]["state"], "pending");
    assert!(view["repo"]["path"].as_str().unwrap_or_default().ends_with("/tool"), "{view}");
    let plain = server.create_agent(json!({})).await;
    let (_, view) = server.get(&format!("/api/v1/agents/{plain}")).await;
    assert!(view["repo"].is_null(), "{view}");

    let workspace = personal_workspace(&server).await;
    let path = format!("/api/v1/workspaces/{workspace}/secrets");
    for (body, why) in [
        (json!({"name": "g1", "preset": "git_token", "value": "t"}), "needs host"),
        (json!({"name": "g2", "preset": "git_token", "value": "t", "host": "10.0.0.1"}), "DNS name"),
        (
            json!({"name": "g3", "preset": "git_token", "value": "t", "host": "github.com", "username": "a:b"}),
            "username",
        ),
        (json!({"name": "g4", "preset": "git_token", "value": "t", "host": "github.com", "header": "x"}), "needs host"),
        (json!({"name": "g5", "preset": "anthropic", "value": "t", "username": "u"}), "git_token"),
    ] {
        let (status, answer) = admin(&server, "POST", &path, body.clone()).await;
        assert_eq!(status, 400, "{body}: {answer}");
        assert_eq!(answer["error"]["code"], "INVALID_RULE", "{body}: {answer}");
        assert!(answer["error"]["message"].as_str().unwrap_or_default().contains(why), "{body}: {answer}");
    }
    let (status, secret) = admin(
        &server,
        "POST",
        &path,
        json!({"name": "gitlab", "preset": "git_token", "value": "glpat-x", "host": "GitLab.com", "username": "oauth2"}),
    )
    .await;
    assert_eq!(status, 201, "{secret}");
    assert_eq!(secret["preset"], "git_token");
    assert_eq!(secret["rule"]["host"], "gitlab.com");
    assert_eq!(secret["rule"]["format"], "Basic oauth2:{secret}");
    assert!(!secret.to_string().contains("glpat-x"), "{secret}");
}
