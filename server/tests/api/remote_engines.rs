//! Several Docker engines (docs/engines.md), for real: the test starts a second `dockerd` of its
//! own (its own data root, exec root, pid file and unix socket, a default bridge of its own, no
//! iptables of its own so it leaves the main engine's rules alone) that answers on loopback TCP with TLS
//! client certificates (`--tlsverify`, certificates made here with rcgen), loads the test image
//! into it, and starts a server configured with the local engine and that one. Placement puts
//! the second agent there; it runs a real turn over the real tunnel, sleeps, wakes on the same
//! engine with its home, and is deleted with its volume. A server holding a client certificate
//! the engine does not trust marks the engine unavailable and says why.
//!
//! Needs root (dockerd): skipped otherwise (failed under `AGENTHOLD_SKIPS_FATAL=1`), and on the
//! local driver.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rcgen::{BasicConstraints, CertificateParams, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair};
use serde_json::json;
use sqlx::Connection;

use crate::support::skip::{skip_unless_docker, skip_unless_root};
use crate::support::{TestServer, free_port, last_run_output};

const TURN: Duration = Duration::from_secs(90);

/// A CA and the certificates it signed, as PEM files.
struct Pki {
    issuer: Issuer<'static, KeyPair>,
    ca_pem: String,
}

impl Pki {
    fn new(name: &str) -> Self {
        let key = KeyPair::generate().expect("CA key");
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(rcgen::DnType::CommonName, name);
        let ca = params.self_signed(&key).expect("CA certificate");
        Self { ca_pem: ca.pem(), issuer: Issuer::new(params, key) }
    }

    /// A certificate for `names` (a server's, or a client's when `names` is empty), and its key.
    fn issue(&self, names: &[&str], usage: ExtendedKeyUsagePurpose) -> (String, String) {
        let key = KeyPair::generate().expect("key");
        let mut params =
            CertificateParams::new(names.iter().map(|n| (*n).to_owned()).collect::<Vec<_>>()).expect("params");
        params.distinguished_name.push(rcgen::DnType::CommonName, names.first().copied().unwrap_or("agenthold"));
        params.extended_key_usages = vec![usage];
        let cert = params.signed_by(&key, &self.issuer).expect("certificate");
        (cert.pem(), key.serialize_pem())
    }
}

/// A second Docker engine: started by the test, stopped with everything it made (and its data
/// root removed) when dropped, even when the test fails.
struct SecondEngine {
    dir: PathBuf,
    /// Its default bridge, made by the test.
    bridge: String,
    child: Option<Child>,
    /// `tcp://127.0.0.1:<port>`.
    host: String,
    /// The CA that signed the engine's certificate, and a client certificate and key it trusts.
    ca: PathBuf,
    cert: PathBuf,
    key: PathBuf,
    /// A client certificate and key signed by another CA (the engine refuses them).
    wrong_cert: PathBuf,
    wrong_key: PathBuf,
}

impl SecondEngine {
    async fn start() -> Self {
        let dir = std::env::temp_dir().join(format!("ahe{}", &uuid::Uuid::new_v4().simple().to_string()[..8]));
        std::fs::create_dir_all(&dir).expect("the engine's directory");
        let write = |name: &str, text: &str| {
            let path = dir.join(name);
            std::fs::write(&path, text).expect("writing a PEM file");
            path
        };
        let pki = Pki::new("second engine test CA");
        let ca = write("ca.pem", &pki.ca_pem);
        let (server_cert, server_key) = pki.issue(&["127.0.0.1", "localhost"], ExtendedKeyUsagePurpose::ServerAuth);
        let (server_cert, server_key) = (write("server-cert.pem", &server_cert), write("server-key.pem", &server_key));
        let (cert, key) = pki.issue(&[], ExtendedKeyUsagePurpose::ClientAuth);
        let (cert, key) = (write("cert.pem", &cert), write("key.pem", &key));
        let (wrong_cert, wrong_key) = Pki::new("someone else's CA").issue(&[], ExtendedKeyUsagePurpose::ClientAuth);
        let (wrong_cert, wrong_key) = (write("wrong-cert.pem", &wrong_cert), write("wrong-key.pem", &wrong_key));
        let port = free_port("127.0.0.1");
        let host = format!("tcp://127.0.0.1:{port}");
        let bridge = format!("agtb{}", &uuid::Uuid::new_v4().simple().to_string()[..8]);
        let subnet = format!("10.217.{}.1/24", rand::random::<u8>());
        let made = Command::new("sh")
            .arg("-c")
            .arg(format!(
                "ip link add {bridge} type bridge && ip addr add {subnet} dev {bridge} && ip link set {bridge} up"
            ))
            .status()
            .is_ok_and(|s| s.success());
        let log = std::fs::File::create(dir.join("dockerd.log")).expect("log file");
        let mut command = Command::new("dockerd");
        command
            .arg("--data-root")
            .arg(dir.join("data"))
            .arg("--exec-root")
            .arg(dir.join("exec"))
            .arg("--pidfile")
            .arg(dir.join("dockerd.pid"))
            .arg("-H")
            .arg(format!("unix://{}", dir.join("docker.sock").display()))
            .args(["-H", &host, "--tlsverify"])
            .arg("--tlscacert")
            .arg(&ca)
            .arg("--tlscert")
            .arg(&server_cert)
            .arg("--tlskey")
            .arg(&server_key)
            // A default bridge of its own (not `--bridge=none`: a dockerd started so deletes the
            // host's `docker0`, the main engine's), and no iptables, NAT or forwarding rules of its
            // own: the main engine's (and the server's sandbox firewall) are left alone.
            .arg(format!("--bridge={bridge}"))
            .args(["--iptables=false", "--ip6tables=false", "--ip-masq=false"]);
        let (ok, driver) = crate::support::docker::docker(&["info", "--format", "{{.Driver}}"]);
        // Not btrfs (the main engine's on the disk scripts/dev/docker.sh makes): it needs its
        // data-root on btrfs, and this one is a directory of the host's (dockerd's own choice).
        if ok && !driver.is_empty() && driver != "btrfs" {
            command.arg(format!("--storage-driver={driver}"));
        }
        std::os::unix::process::CommandExt::process_group(&mut command, 0);
        // Made before dockerd starts, so that its Drop cleans up whatever fails from here on.
        let mut engine = Self { child: None, bridge, dir, host, ca, cert, key, wrong_cert, wrong_key };
        assert!(made, "making the second engine's bridge {}", engine.bridge);
        let child = command.stdin(Stdio::null()).stdout(log.try_clone().expect("log")).stderr(log).spawn();
        engine.child = Some(child.expect("starting dockerd"));
        let deadline = Instant::now() + Duration::from_secs(60);
        while !engine.cli(&["info", "--format", "{{.ServerVersion}}"]).0 {
            assert!(Instant::now() < deadline, "the second dockerd did not start: {}", engine.log());
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        engine
    }

    fn socket(&self) -> String {
        format!("unix://{}", self.dir.join("docker.sock").display())
    }

    /// Runs `docker` against this engine (its unix socket); (success, trimmed stdout).
    fn cli(&self, args: &[&str]) -> (bool, String) {
        let output = Command::new("docker").arg("-H").arg(self.socket()).args(args).output().expect("running docker");
        (output.status.success(), String::from_utf8_lossy(&output.stdout).trim().to_owned())
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("dockerd.log")).unwrap_or_default()
    }

    /// Copies an image of the main engine into this one.
    fn load_image(&self, image: &str) {
        let script = format!("docker save {image} | docker -H {} load", self.socket());
        let status = Command::new("sh").arg("-c").arg(script).status().expect("docker save | load");
        assert!(status.success(), "loading {image} into the second engine");
    }
}

impl Drop for SecondEngine {
    fn drop(&mut self) {
        // What the server made there (sandboxes outlive their server by design).
        let script = format!(
            "D='docker -H {}'; $D ps -aq | xargs -r $D rm -f; $D volume ls -q | xargs -r $D volume rm -f; \
             $D network prune -f",
            self.socket()
        );
        let _ = Command::new("sh").arg("-c").arg(script).stdout(Stdio::null()).stderr(Stdio::null()).status();
        if let Some(mut child) = self.child.take() {
            let group = format!("-{}", child.id());
            let kill = |signal: &str| {
                let _ = Command::new("kill").args([signal, "--", &group]).stderr(Stdio::null()).status();
            };
            kill("-TERM");
            let deadline = Instant::now() + Duration::from_secs(20);
            while Instant::now() < deadline && !matches!(child.try_wait(), Ok(Some(_))) {
                std::thread::sleep(Duration::from_millis(100));
            }
            kill("-KILL");
            let _ = child.wait();
        }
        // Whatever is still mounted under the data root (a dockerd killed mid-way).
        let _ = Command::new("sh")
            .arg("-c")
            .arg(format!("grep -o ' {}[^ ]*' /proc/mounts | sort -r | xargs -r -n1 umount -l", self.dir.display()))
            .status();
        let _ = Command::new("ip").args(["link", "del", &self.bridge]).stderr(Stdio::null()).status();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn write_engines(dir: &Path, name: &str, engines: serde_json::Value) -> String {
    let path = dir.join(name);
    std::fs::write(&path, json!({ "engines": engines }).to_string()).expect("writing the engines file");
    path.display().to_string()
}

async fn engine_of(server: &TestServer, agent: &str) -> String {
    let mut db = sqlx::PgConnection::connect(&server.database_url).await.expect("connecting to the test database");
    sqlx::query_scalar::<_, String>("SELECT engine FROM agents WHERE id = $1::uuid")
        .bind(agent)
        .fetch_one(&mut db)
        .await
        .expect("the agent's engine")
}

/// This host's own (non-loopback) IPv4 address: the source of its default route.
fn host_address() -> std::net::IpAddr {
    let socket = std::net::UdpSocket::bind("0.0.0.0:0").expect("a UDP socket");
    // No packet is sent: connecting a UDP socket only picks the route and the source address.
    socket.connect("192.0.2.254:9").or_else(|_| socket.connect("203.0.113.1:9")).expect("a route off this host");
    socket.local_addr().expect("the socket's address").ip()
}

#[tokio::test]
async fn agents_are_placed_on_a_remote_tls_engine_and_stay_there() {
    if skip_unless_docker("it places agents on a second Docker engine")
        || skip_unless_root("it starts a second dockerd")
    {
        return;
    }
    let began = Instant::now();
    let engine = SecondEngine::start().await;
    engine.load_image(&crate::support::docker::test_image());
    eprintln!("second engine up with the image after {:?}", began.elapsed());

    // The remote engine's agent networks come from a range of their own (that engine knows
    // nothing of the main engine's networks on this same host). Its sandboxes dial the server at
    // the host's own address, the engine's own tunnel URL (not `host.docker.internal`, the
    // server's default, which names each network's gateway).
    let pool = format!("10.216.{}.0/24", rand::random::<u8>());
    let host_addr = host_address();
    // Chosen ahead: the engines file names it before the server starts.
    let tunnel_port = free_port("0.0.0.0");
    let remote_tunnel = format!("ws://{host_addr}:{tunnel_port}/tunnel");
    let engines = write_engines(
        &engine.dir,
        "engines.json",
        json!([
            {"name": "local", "capacity": 1},
            {"name": "remote", "host": engine.host, "ca": engine.ca, "cert": engine.cert, "key": engine.key,
             "capacity": 1, "tunnel_url": remote_tunnel, "subnet_pool": pool},
        ]),
    );
    let tunnel_listen = format!("0.0.0.0:{tunnel_port}");
    let server = TestServer::start_with(&[
        ("AGENTHOLD_DOCKER_ENGINES", &engines),
        ("AGENTHOLD_TUNNEL_LISTEN", &tunnel_listen),
        ("AGENTHOLD_ORPHAN_SWEEP_SECS", "1"),
        ("AGENTHOLD_ORPHAN_GRACE_SECS", "0"),
    ])
    .await;

    // The server cannot install the sandbox firewall on a remote host, and says so.
    let reminder = server.log().lines().any(|l| {
        l.contains("install the sandbox firewall on this remote engine's host yourself") && l.contains("remote")
    });
    assert!(reminder, "{}", server.log());

    // Two created at once, one room on each engine: both placed, one on each (the one that
    // loses the race for an engine's last room is placed again).
    let (a, b) = tokio::join!(server.create_agent(json!({})), server.create_agent(json!({})));
    let (engine_a, engine_b) = (engine_of(&server, &a).await, engine_of(&server, &b).await);
    let agent = match (engine_a.as_str(), engine_b.as_str()) {
        ("local", "remote") => b,
        ("remote", "local") => a,
        other => panic!("both agents on one engine: {other:?}"),
    };
    let (_, view) = server.get(&format!("/api/v1/agents/{agent}")).await;
    assert_eq!(view["engine"], "remote", "the API says where the agent lives: {view}");
    let (status, body) = server.post("/api/v1/agents", json!({"name": "one-too-many", "harness": "fake"})).await;
    assert_eq!((status, body["error"]["code"].as_str()), (503, Some("CAPACITY")), "{body}");
    assert!(
        body["error"]["message"].as_str().is_some_and(|m| m.contains("local 1/1") && m.contains("remote 1/1")),
        "{body}"
    );

    // A real turn over the real tunnel, its sandbox on the remote engine only.
    let session = server.create_session(&agent).await;
    let started = Instant::now();
    server.prompt(&session, "write kept.txt made on the remote engine\ntext done").await;
    let events = server.wait_turns(&session, 1, TURN).await;
    eprintln!("first turn on the remote engine (sandbox made and started) took {:?}", started.elapsed());
    assert!(events.iter().any(|e| e["type"] == "turn_end"), "{events:?}");
    let container = server.container(&agent);
    let (ok, running) = engine.cli(&["inspect", "-f", "{{.State.Running}}", &container]);
    assert_eq!((ok, running.as_str()), (true, "true"), "the sandbox runs on the remote engine");
    assert!(!crate::support::docker::docker(&["inspect", &container]).0, "and not on the local one");
    let (_, env) = engine.cli(&["inspect", "-f", "{{range .Config.Env}}{{println .}}{{end}}", &container]);
    assert!(env.lines().any(|l| l == format!("AGENTHOLD_TUNNEL_URL={remote_tunnel}")), "{env}");

    // Sleep stops it there; a prompt wakes it on the same engine, with its home.
    let (status, _) = server.post(&format!("/api/v1/agents/{agent}/sleep"), json!({})).await;
    assert_eq!(status, 200);
    let (_, running) = engine.cli(&["inspect", "-f", "{{.State.Running}}", &container]);
    assert_eq!(running, "false", "sleep stops the remote container");
    let started = Instant::now();
    server.prompt(&session, "run cat kept.txt").await;
    let events = server.wait_turns(&session, 2, TURN).await;
    eprintln!("wake and turn on the remote engine took {:?}", started.elapsed());
    assert!(last_run_output(&events).contains("made on the remote engine"), "{events:#?}");
    let (_, running) = engine.cli(&["inspect", "-f", "{{.State.Running}}", &container]);
    assert_eq!(running, "true");

    // A sandbox killed on the remote engine ends its turn at once: that engine's events are
    // followed too (without them the turn would wait for the 60 s reconnect grace).
    server.prompt(&session, "text going\nsleep 60000").await;
    crate::support::docker::wait_for(TURN, "the long turn to start", || async {
        crate::support::texts(&server.events(&session).await).contains(&"going".to_owned()).then_some(())
    })
    .await;
    let killed = Instant::now();
    assert!(engine.cli(&["kill", &container]).0, "docker kill on the remote engine");
    crate::support::docker::wait_for(Duration::from_secs(20), "the turn to end with SANDBOX_EXITED", || async {
        let events = server.events(&session).await;
        events.iter().any(|e| e["payload"]["code"] == "SANDBOX_EXITED").then_some(())
    })
    .await;
    eprintln!("the kill on the remote engine ended the turn after {:?}", killed.elapsed());
    crate::support::docker::wait_for(Duration::from_secs(10), "the remote engine's die event", || async {
        let log = server.log();
        log.lines()
            .any(|l| l.contains("the engine reports the sandbox died") && l.contains(agent.as_str()))
            .then_some(())
    })
    .await;

    // The orphan sweep covers the remote engine: objects of an agent that does not exist go.
    let ghost = uuid::Uuid::new_v4();
    let ghost_volume = format!("{}-home-{ghost}", server.instance);
    let instance_label = format!("agenthold.instance={}", server.instance);
    let agent_label = format!("agenthold.agent={ghost}");
    let made = engine.cli(&["volume", "create", "--label", &instance_label, "--label", &agent_label, &ghost_volume]);
    assert!(made.0, "a ghost volume on the remote engine");
    crate::support::docker::wait_for(Duration::from_secs(30), "the remote orphan to be swept", || async {
        (!engine.cli(&["volume", "inspect", &ghost_volume]).0).then_some(())
    })
    .await;
    let home = format!("{}-home-{agent}", server.instance);
    assert!(engine.cli(&["volume", "inspect", &home]).0, "a live agent's home on the remote engine stays");

    // Deleting it removes its container, home volume and network from the remote engine.
    let (status, _) = server.delete(&format!("/api/v1/agents/{agent}")).await;
    assert_eq!(status, 204);
    let label = format!("label=agenthold.agent={agent}");
    for args in [
        vec!["ps", "-aq", "--filter", &label],
        vec!["volume", "ls", "-q", "--filter", &label],
        vec!["network", "ls", "-q", "--filter", &label],
    ] {
        let (ok, left) = engine.cli(&args);
        assert!(ok && left.is_empty(), "{args:?} left on the remote engine: {left}");
    }
    assert!(!engine.cli(&["volume", "inspect", &home]).0);
    // Its room is free again.
    let again = server.create_agent(json!({})).await;
    assert_eq!(engine_of(&server, &again).await, "remote");
    drop(server);

    // A client certificate the engine does not trust: the server starts, says why the engine
    // is unavailable, and places nothing there.
    let engines = write_engines(
        &engine.dir,
        "wrong.json",
        json!([
            {"name": "local", "capacity": 0},
            {"name": "remote", "host": engine.host, "ca": engine.ca, "cert": engine.wrong_cert,
             "key": engine.wrong_key, "capacity": 5},
        ]),
    );
    let server = TestServer::start_with(&[("AGENTHOLD_DOCKER_ENGINES", &engines)]).await;
    let (status, body) = server.post("/api/v1/agents", json!({"name": "nowhere", "harness": "fake"})).await;
    assert_eq!((status, body["error"]["code"].as_str()), (503, Some("CAPACITY")), "{body}");
    assert!(body["error"]["message"].as_str().is_some_and(|m| m.contains("remote unavailable")), "{body}");
    let log = server.log();
    let line = log.lines().find(|l| l.contains("the Docker engine does not answer")).unwrap_or_default();
    assert!(
        line.contains("remote") && line.contains("BadCertificate"),
        "the unavailable engine is logged with its name and why: {log}"
    );
    eprintln!("the refused certificate, as logged: {line}");
    drop(server);

    // A bad engines file stops the start with a clear message.
    let engines =
        write_engines(&engine.dir, "bad.json", json!([{"name": "remote", "host": engine.host, "capacity": 1}]));
    let output = Command::new(env!("CARGO_BIN_EXE_agenthold"))
        .env("AGENTHOLD_DOCKER_ENGINES", &engines)
        // Never reached: the file is checked first.
        .env("DATABASE_URL", "postgres://nobody@127.0.0.1:1/none")
        .env("AGENTHOLD_MODE", "test")
        .env("AGENTHOLD_DATA_DIR", engine.dir.join("bad-data"))
        .env("AGENTHOLD_LISTEN", "127.0.0.1:0")
        .env("AGENTHOLD_TUNNEL_LISTEN", "127.0.0.1:0")
        .env("AGENTHOLD_INSTANCE", format!("ahx{}", &uuid::Uuid::new_v4().simple().to_string()[..8]))
        .output()
        .expect("running agenthold");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(stderr.contains("AGENTHOLD_DOCKER_ENGINES") && stderr.contains("ca, cert and key"), "{stderr}");
    eprintln!("whole test took {:?}", began.elapsed());
}
