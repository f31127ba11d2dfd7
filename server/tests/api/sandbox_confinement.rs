//! Confined egress (issue 7, part 3): a real Docker sandbox reaches the server's tunnel and the
//! egress proxy on the host, and nothing else: not a service of the host's (on its gateway or on
//! another of its addresses), not another sandbox, not a container on an ordinary network (the
//! stand-in for "an outside address": nothing here ever sends traffic to an address the test
//! does not own, PROXY.md §4.4). Every listener is the test's own and records what reached it;
//! each is first shown reachable from where it should be, and the same probe from a sandbox with
//! `AGENTHOLD_SANDBOX_EGRESS=open` reaches the host's, so a closed port means confinement, not a
//! broken probe.

use std::io::BufRead;
use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::json;

use crate::support::docker::docker;
use crate::support::proxy::Proxy;
use crate::support::skip::skip_unless_docker;
use crate::support::{TestServer, last_run_output};

const TURN: Duration = Duration::from_secs(120);
/// The port the listeners inside containers use.
const INSIDE_PORT: u16 = 9999;

/// A listener on every address of the host; counts the connections it accepts.
struct HostListener {
    port: u16,
    /// The peer address of every connection accepted.
    peers: Arc<Mutex<Vec<std::net::IpAddr>>>,
}

impl HostListener {
    fn start() -> Self {
        let listener = TcpListener::bind(("0.0.0.0", 0)).expect("binding a host port");
        let port = listener.local_addr().expect("addr").port();
        let peers = Arc::new(Mutex::new(Vec::new()));
        let seen = Arc::clone(&peers);
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                if let Some(peer) = stream.ok().and_then(|s| s.peer_addr().ok()) {
                    seen.lock().unwrap_or_else(|p| p.into_inner()).push(peer.ip());
                }
            }
        });
        Self { port, peers }
    }

    /// Connections accepted from `ip`. Only the peer tells: a port just freed here may be one
    /// another test's sandboxes or server still dial, so a count of all connections is not
    /// this test's.
    fn accepted_from(&self, ip: &str) -> usize {
        let peers = self.peers.lock().unwrap_or_else(|p| p.into_inner());
        peers.iter().filter(|peer| peer.to_string() == ip).count()
    }
}

/// A listener inside a container's network namespace (the host's python, entered with
/// `nsenter`: the test image has no server of its own); records each peer it accepts.
struct NamespaceListener {
    child: Child,
    accepted: Arc<Mutex<Vec<String>>>,
}

const LISTENER: &str = "
import socket
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(('0.0.0.0', 9999))
s.listen(16)
print('listening', flush=True)
while True:
    c, a = s.accept()
    print('accepted', a[0], flush=True)
    c.close()
";

impl NamespaceListener {
    fn start(container: &str) -> Self {
        let (ok, pid) = docker(&["inspect", "--format", "{{.State.Pid}}", container]);
        assert!(ok && pid != "0", "the container {container} runs: {pid}");
        let mut child = Command::new("nsenter")
            .args(["-t", &pid, "-n", "python3", "-u", "-c", LISTENER])
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("nsenter python3");
        let stdout = child.stdout.take().expect("stdout");
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let accepted = Arc::new(Mutex::new(Vec::new()));
        let record = Arc::clone(&accepted);
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout).lines().map_while(Result::ok) {
                if line == "listening" {
                    let _ = ready_tx.send(());
                } else if let Some(peer) = line.strip_prefix("accepted ") {
                    record.lock().expect("accepted").push(peer.to_owned());
                }
            }
        });
        ready_rx.recv_timeout(Duration::from_secs(15)).expect("the listener in the container started");
        Self { child, accepted }
    }

    fn accepted(&self) -> Vec<String> {
        self.accepted.lock().expect("accepted").clone()
    }

    /// Waits until it has recorded `count` connections (its output is read by another thread).
    fn wait_accepted(&self, count: usize) {
        for _ in 0..100 {
            if self.accepted().len() >= count {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("the listener recorded {:?}, not {count} connections", self.accepted());
    }
}

impl Drop for NamespaceListener {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn container_ip(container: &str) -> String {
    let (ok, ip) =
        docker(&["inspect", "--format", "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}", container]);
    assert!(ok && !ip.is_empty(), "the address of {container}: {ip}");
    ip
}

/// Whether a TCP connection from the host (the test) to `ip:port` opens.
fn reachable_from_host(ip: &str, port: u16) -> bool {
    let addr = std::net::SocketAddr::new(ip.parse().expect("ip"), port);
    std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(3)).is_ok()
}

/// A `run` script that tries a TCP connection to each `(label, host, port)` and prints
/// `<label> open` or `<label> closed`.
fn probe_script(targets: &[(&str, String, u16)]) -> String {
    let tries: Vec<String> = targets
        .iter()
        .map(|(label, host, port)| {
            format!(
                "if timeout 3 bash -c 'exec 3<>/dev/tcp/{host}/{port}' 2>/dev/null; \
                 then echo '{label} open'; else echo '{label} closed'; fi"
            )
        })
        .collect();
    format!("run {}", tries.join("; "))
}

/// The output of the last `run` in the session, once `turns` turns have ended.
async fn run_output(server: &TestServer, session: &str, turns: usize) -> String {
    last_run_output(&server.wait_turns(session, turns, TURN).await)
}

fn state_of(output: &str, label: &str) -> Option<&'static str> {
    output.lines().find_map(|line| match line.strip_prefix(label)?.trim() {
        "open" => Some("open"),
        "closed" => Some("closed"),
        _ => None,
    })
}

/// An ordinary (not internal) network with one idle container on it, labelled with the server's
/// instance so that the server's cleanup removes both.
fn outside_container(instance: &str) -> String {
    let name = format!("{instance}-outside");
    let label = format!("agenthold.instance={instance}");
    assert!(docker(&["network", "create", "--label", &label, &name]).0, "creating {name}");
    let (ok, out) = docker(&[
        "run",
        "-d",
        "--name",
        &name,
        "--label",
        &label,
        "--network",
        &name,
        "--entrypoint",
        "sleep",
        "agenthold/test:latest",
        "infinity",
    ]);
    assert!(ok, "starting {name}: {out}");
    name
}

fn network_gateway(network: &str) -> String {
    let (ok, gateway) = docker(&["network", "inspect", "--format", "{{(index .IPAM.Config 0).Gateway}}", network]);
    assert!(ok && !gateway.is_empty(), "the gateway of {network}");
    gateway
}

#[tokio::test]
async fn a_confined_sandbox_reaches_the_tunnel_and_the_proxy_and_nothing_else() {
    if skip_unless_docker("the local driver does not confine") {
        return;
    }
    // The proxy first, on a port of its own choosing, on the file the server will write.
    let dir = std::env::temp_dir().join(format!("agenthold-confined-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).expect("dir");
    let config = dir.join("proxy.json");
    let proxy = Proxy::start(&config, "0.0.0.0:0", dir.join("proxy.log"));
    let proxy_port = proxy.port();
    let server = TestServer::start_with(&[
        ("AGENTHOLD_PROXY_ADDR", &format!("host.docker.internal:{proxy_port}")),
        ("AGENTHOLD_PROXY_CONFIG_FILE", config.to_str().expect("utf-8 path")),
    ])
    .await;

    // The server installed its firewall: the chain exists and is jumped to from INPUT.
    let rules = agenthold_server::sandbox::firewall::Rules::new(&server.instance, []);
    let chain = Command::new("iptables").args(["-w", "-S", &rules.chain]).output().expect("iptables");
    let chain = String::from_utf8_lossy(&chain.stdout).into_owned();
    assert!(chain.contains(&format!("--dport {}", server.tunnel_port())), "{chain}");
    assert!(chain.contains(&format!("--dport {proxy_port}")), "{chain}");

    let host = HostListener::start();
    let outside = outside_container(&server.instance);
    let outside_listener = NamespaceListener::start(&outside);
    let outside_ip = container_ip(&outside);
    let other_host_address = network_gateway(&outside);

    // A second sandbox, with a listener inside it.
    let other_agent = server.create_agent(json!({"name": "other"})).await;
    let other_session = server.create_session(&other_agent).await;
    server.prompt(&other_session, "run true").await;
    server.wait_turns(&other_session, 1, TURN).await;
    let other_container = server.container(&other_agent);
    let other_listener = NamespaceListener::start(&other_container);
    let other_ip = container_ip(&server.network_holder(&other_agent));

    // Each listener is reachable from the host: a closed port below is the sandbox's confinement.
    assert!(reachable_from_host(&outside_ip, INSIDE_PORT), "the outside listener from the host");
    assert!(reachable_from_host(&other_ip, INSIDE_PORT), "the other sandbox's listener from the host");
    assert!(reachable_from_host(&other_host_address, host.port), "the host listener");
    outside_listener.wait_accepted(1);
    other_listener.wait_accepted(1);
    let before = (outside_listener.accepted().len(), other_listener.accepted().len());

    let agent = server.create_agent(json!({})).await;
    let session = server.create_session(&agent).await;
    let targets = [
        ("tunnel", "host.docker.internal".to_owned(), server.tunnel_port()),
        ("proxy", "host.docker.internal".to_owned(), proxy_port),
        ("host-service-on-gateway", "host.docker.internal".to_owned(), host.port),
        ("host-service-elsewhere", other_host_address.clone(), host.port),
        (
            "api",
            "host.docker.internal".to_owned(),
            server.url.rsplit(':').next().and_then(|p| p.parse().ok()).expect("api port"),
        ),
        ("other-sandbox", other_ip.clone(), INSIDE_PORT),
        ("outside", outside_ip.clone(), INSIDE_PORT),
    ];
    server.prompt(&session, &probe_script(&targets)).await;
    let output = run_output(&server, &session, 1).await;
    println!("{output}");
    assert_eq!(state_of(&output, "tunnel"), Some("open"), "{output}");
    assert_eq!(state_of(&output, "proxy"), Some("open"), "{output}\n{}", proxy.log());
    for label in ["host-service-on-gateway", "host-service-elsewhere", "api", "other-sandbox", "outside"] {
        assert_eq!(state_of(&output, label), Some("closed"), "{label}: {output}");
    }
    // Nothing arrived anywhere (a late record would show within this pause).
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(outside_listener.accepted().len(), before.0, "the outside listener was reached");
    assert_eq!(other_listener.accepted().len(), before.1, "the other sandbox was reached");
    let prober = container_ip(&server.network_holder(&agent));
    assert_eq!(host.accepted_from(&prober), 0, "the host listener was reached from the sandbox ({prober})");

    // The sandbox has its holder's network namespace; that network is internal and its bridge
    // is one the firewall covers.
    let (ok, holder_id) = docker(&["inspect", "--format", "{{.Id}}", &server.network_holder(&agent)]);
    assert!(ok, "inspect the holder");
    let (ok, mode) = docker(&["inspect", "--format", "{{.HostConfig.NetworkMode}}", &server.container(&agent)]);
    assert!(ok && mode.trim() == format!("container:{}", holder_id.trim()), "{mode}");
    let (ok, network) = docker(&[
        "inspect",
        "--format",
        "{{range $name, $_ := .NetworkSettings.Networks}}{{$name}}{{end}}",
        &server.network_holder(&agent),
    ]);
    assert!(ok, "inspect");
    let (ok, settings) = docker(&[
        "network",
        "inspect",
        "--format",
        "{{.Internal}} {{index .Options \"com.docker.network.bridge.name\"}}",
        &network,
    ]);
    assert!(ok && settings.starts_with("true ") && settings.contains(&rules.interface_prefix), "{settings}");
    drop(proxy);
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn an_open_sandbox_reaches_the_hosts_services_so_the_probe_sees_an_open_port() {
    if skip_unless_docker("what an open Docker sandbox's network reaches") {
        return;
    }
    let server = TestServer::start_with(&[("AGENTHOLD_SANDBOX_EGRESS", "open")]).await;
    let rules = agenthold_server::sandbox::firewall::Rules::new(&server.instance, []);
    let chain = Command::new("iptables").args(["-w", "-n", "-L", &rules.chain]).output().expect("iptables");
    assert!(!chain.status.success(), "no firewall chain for open egress");
    let host = HostListener::start();
    let agent = server.create_agent(json!({})).await;
    let session = server.create_session(&agent).await;
    server.prompt(&session, &probe_script(&[("host-service", "host.docker.internal".to_owned(), host.port)])).await;
    let output = run_output(&server, &session, 1).await;
    assert_eq!(state_of(&output, "host-service"), Some("open"), "{output}");
    let sandbox = container_ip(&server.network_holder(&agent));
    assert!(host.accepted_from(&sandbox) >= 1, "the host listener saw the sandbox ({sandbox})");
    let (ok, internal) =
        docker(&["network", "inspect", "--format", "{{.Internal}}", &format!("{}-net-{agent}", server.instance)]);
    assert!(ok && internal == "false", "{internal}");
}
