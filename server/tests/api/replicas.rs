//! Two server replicas on one database (docs/replicas.md), real processes, real Docker
//! sandboxes. Sandboxes dial a small round-robin TCP balancer in front of both replicas' tunnel
//! ports (as they would a load balancer); a replica that does not own the agent redirects
//! sandboxd to the one that does. Commands sent to either replica reach the owner; events
//! stored by one reach watchers on the other; a replica killed with SIGKILL mid-turn is taken
//! over by the other once its lease lapses, with every event exactly once.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::skip::skip_unless_docker;
use crate::support::{TestServer, assert_gap_free, of_type, seqs};

const STALL: Duration = Duration::from_secs(90);

/// A round-robin TCP balancer on 0.0.0.0: each connection goes to the next backend port on
/// 127.0.0.1 that accepts it. Stops with the test (its task is aborted on drop).
struct Balancer {
    port: u16,
    backends: Arc<Mutex<Vec<u16>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Balancer {
    async fn start() -> Self {
        let listener = tokio::net::TcpListener::bind("0.0.0.0:0").await.expect("binding the balancer");
        let port = listener.local_addr().expect("addr").port();
        let backends: Arc<Mutex<Vec<u16>>> = Arc::default();
        let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let task = {
            let backends = Arc::clone(&backends);
            tokio::spawn(async move {
                while let Ok((mut inbound, _)) = listener.accept().await {
                    let ports = backends.lock().expect("backends").clone();
                    let first = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    tokio::spawn(async move {
                        for i in 0..ports.len() {
                            let port = ports[(first + i) % ports.len()];
                            if let Ok(mut outbound) = tokio::net::TcpStream::connect(("127.0.0.1", port)).await {
                                let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                                return;
                            }
                        }
                    });
                }
            })
        };
        Self { port, backends, task }
    }

    fn route_to(&self, ports: &[u16]) {
        *self.backends.lock().expect("backends") = ports.to_vec();
    }

    fn tunnel_url(&self) -> String {
        format!("ws://host.docker.internal:{}/tunnel", self.port)
    }
}

impl Drop for Balancer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Both replicas' settings: sandboxes dial the balancer; leases last 3 s. The firewall is the
/// operator's here (two replicas on one host would each install only their own tunnel port).
fn replica_env(balancer: &Balancer) -> Vec<(String, String)> {
    vec![
        ("AGENTHOLD_TUNNEL_URL".into(), balancer.tunnel_url()),
        ("AGENTHOLD_LEASE_TTL_SECS".into(), "3".into()),
        ("AGENTHOLD_SANDBOX_FIREWALL".into(), "external".into()),
    ]
}

/// Two replicas on one database behind a balancer of their own that tries A first, then B;
/// `None` (the test skips, see [`skip_unless_docker`]) unless the driver is Docker: sandboxes
/// dial the balancer at the Docker host's address.
async fn two_replicas() -> Option<(Balancer, TestServer, TestServer)> {
    if skip_unless_docker("sandboxes dial the replicas' balancer at the Docker host's address") {
        return None;
    }
    let balancer = Balancer::start().await;
    let env = replica_env(&balancer);
    let a = TestServer::start_with(&as_refs(&env)).await;
    let b = a.replica(&[]).await;
    balancer.route_to(&[a.tunnel_port(), b.tunnel_port()]);
    Some((balancer, a, b))
}

fn as_refs(env: &[(String, String)]) -> Vec<(&str, &str)> {
    env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect()
}

fn flood_indices(events: &[Value]) -> Vec<i64> {
    events.iter().filter_map(|e| e["payload"]["_meta"]["fakeagent"]["i"].as_i64()).collect()
}

#[tokio::test]
async fn either_replica_serves_any_agent_and_streams_what_the_other_stores() {
    let Some((balancer, a, b)) = two_replicas().await else { return };
    // The first sandbox connection lands on B, which does not own the agent.
    balancer.route_to(&[b.tunnel_port(), a.tunnel_port()]);

    let agent = a.create_agent(json!({})).await;
    let session = a.create_session(&agent).await;
    a.prompt(&session, "text first, on A").await;
    a.wait_turns(&session, 1, STALL).await;
    assert!(
        b.log().contains("sandboxd sent to the agent's replica"),
        "B redirected the sandbox to A; B's log: {}",
        b.log()
    );

    // A prompt sent to B runs on A (B forwards it); B's watcher sees what A stores.
    let mut on_b = b.watch(&session, "0").await;
    let mut seen = on_b.until("turn_end", STALL).await;
    b.prompt(&session, "flood 300 200\ntext done").await;
    seen.extend(on_b.until("turn_end", STALL).await);
    assert_gap_free(&seen);
    assert_eq!(flood_indices(&seen), (1..=300).collect::<Vec<i64>>(), "every update once, in order");
    assert_eq!(seqs(&seen), seqs(&a.events(&session).await), "B's stream and the log agree");
    assert!(!a.log().contains("sandboxd sent to"), "the sandbox stayed with A");

    // A cancel sent to B stops A's turn (409 until the turn has started: on a loaded machine a
    // missed heartbeat may move the lease, and the turn waits for the sandbox to reconnect).
    b.prompt(&session, "sleep 60000\ntext late").await;
    cancel_once_started(&b, &session, [&a, &b]).await;
    let end = on_b.until("turn_end", STALL).await;
    assert_eq!(end.last().map(|e| e["payload"]["stop_reason"].clone()), Some(json!("cancelled")));

    // Sleep and wake through B act on A's sandbox.
    let (status, body) = b.post(&format!("/api/v1/agents/{agent}/sleep"), json!({})).await;
    assert!(status < 300, "sleep through B: {status} {body}");
    assert_eq!(container_running(&a.container(&agent)), Some(false), "the sandbox stopped");
    let (status, body) = b.post(&format!("/api/v1/agents/{agent}/wake"), json!({})).await;
    assert!(status < 300, "wake through B: {status} {body}");
    assert_eq!(container_running(&a.container(&agent)), Some(true), "the sandbox runs again");

    // A terminal opened on B runs in A's sandbox (B relays it to A).
    let printed = crate::lifecycle::terminal(&b, &agent, "echo relayed-$((6*7))").await;
    assert!(printed.contains("relayed-42"), "the relayed terminal ran the line: {printed:?}");

    // Deleting through B closes the session's streams on A too.
    let mut on_a = a.watch(&session, "0").await;
    let (status, body) = b.delete(&format!("/api/v1/agents/{agent}")).await;
    assert_eq!(status, 204, "{body}");
    assert!(on_a.closes_within(Duration::from_secs(15)).await, "A's stream of the deleted session closes");
    assert_eq!(container_running(&a.container(&agent)), None, "the sandbox is gone");
}

/// A replica that stalls past its lease (SIGSTOP: a loaded machine, a long pause) loses its
/// agents to the other: a prompt sent through the other meanwhile runs there once the sandbox
/// follows, the stalled replica gives the agent up when it wakes, and prompts and cancels through
/// either replica still reach the turn.
#[tokio::test]
async fn a_replica_stalled_past_its_lease_gives_its_agent_up_and_either_replica_still_drives_it() {
    let Some((_balancer, a, b)) = two_replicas().await else { return };
    let agent = a.create_agent(json!({})).await;
    let session = a.create_session(&agent).await;
    a.prompt(&session, "text first, on A").await;
    a.wait_turns(&session, 1, STALL).await;

    let a_pid = a.pid().expect("A runs").to_string();
    let signal = |name: &str| {
        let status = std::process::Command::new("kill").args([name, &a_pid]).status().expect("kill");
        assert!(status.success(), "kill {name} A");
    };
    signal("-STOP");
    // Past the lease (3 s) and two of B's heartbeats.
    tokio::time::sleep(Duration::from_secs(5)).await;
    b.prompt(&session, "text while A stalls").await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    signal("-CONT");
    let events = b.wait_turns(&session, 2, STALL).await;
    assert!(texts_of(&events).contains("while A stalls"), "{events:?}");

    // Through either replica, once A has given the agent up.
    a.prompt(&session, "text through A").await;
    b.wait_turns(&session, 3, STALL).await;
    let sleeping = b.prompt(&session, "sleep 60000\ntext late").await["turn_id"].clone();
    cancel_once_started(&a, &session, [&a, &b]).await;
    let deadline = std::time::Instant::now() + STALL;
    let events = loop {
        let events = b.events(&session).await;
        if of_type(&events, "turn_end").iter().any(|e| e["payload"]["turn_id"] == sleeping) {
            break events;
        }
        assert!(std::time::Instant::now() < deadline, "the cancelled turn never ended: {}", last_events(&events, 12));
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_gap_free(&events);
    let ends = of_type(&events, "turn_end");
    let mut turns: Vec<&Value> = ends.iter().map(|e| &e["payload"]["turn_id"]).collect();
    turns.dedup();
    assert_eq!(turns.len(), ends.len(), "one turn_end per turn: {}", last_events(&events, 12));
    let slept = ends.iter().find(|e| e["payload"]["turn_id"] == sleeping);
    assert_eq!(
        slept.map(|e| e["payload"]["stop_reason"].clone()),
        Some(json!("cancelled")),
        "the sleeping turn was cancelled: {}",
        last_events(&events, 12)
    );
}

/// Cancels the session's turn through `via`, posting again while it answers 409 (the turn not
/// started yet) for up to [`STALL`]; a failure says both replicas' logs and the session's last
/// events.
async fn cancel_once_started(via: &TestServer, session: &str, [a, b]: [&TestServer; 2]) {
    let deadline = std::time::Instant::now() + STALL;
    loop {
        let (status, body) = via.post(&format!("/api/v1/sessions/{session}/cancel"), json!({})).await;
        if status == 202 {
            return;
        }
        assert_eq!(status, 409, "{body}"); // not started yet
        if std::time::Instant::now() >= deadline {
            let events = via.events(session).await;
            panic!(
                "the turn never started (or the cancel never reached it); A's log: {}\nB's log: {}\nthe session's last events: {}",
                a.log(),
                b.log(),
                last_events(&events, 4)
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The last `n` events, each on a line (for a failure's message).
fn last_events(events: &[Value], n: usize) -> String {
    events[events.len().saturating_sub(n)..].iter().map(Value::to_string).collect::<Vec<_>>().join("\n")
}

fn texts_of(events: &[Value]) -> String {
    crate::support::texts(events).join(" ")
}

#[tokio::test]
async fn a_secret_attached_through_the_other_replica_reaches_the_owners_harness() {
    use crate::support::secrets::{admin, create_secret, personal_workspace, unique_value};
    let Some((_balancer, a, b)) = two_replicas().await else { return };
    let agent = a.create_agent(json!({})).await;
    let session = a.create_session(&agent).await;
    a.prompt(&session, "text awake on A").await;
    a.wait_turns(&session, 1, STALL).await;

    // Attached through B, which does not own the agent: the environment change is forwarded to
    // A's supervisor, whose harness starts again with the placeholder before the next turn.
    let workspace = personal_workspace(&b).await;
    let secret =
        create_secret(&b, &workspace, json!({"name": "router", "preset": "openrouter", "value": unique_value()})).await;
    let path = format!("/api/v1/agents/{agent}/secrets/OPENROUTER_API_KEY");
    let (status, body) = admin(&b, "PUT", &path, json!({"secret_id": secret})).await;
    assert_eq!(status, 200, "{body}");
    b.prompt(&session, "run printenv OPENROUTER_API_KEY || echo unset").await;
    let events = a.wait_turns(&session, 2, STALL).await;
    let printed: String =
        events.iter().filter_map(|e| e["payload"]["content"][0]["content"]["text"].as_str()).collect();
    assert!(printed.contains("sk-or-v1-agenthold-"), "the harness sees the placeholder: {printed:?}");
    assert!(!printed.contains("unset"), "{printed:?}");
}

/// The harness log is in the memory of the replica running the agent: read through the other
/// one, the read is relayed there (the caller's credentials checked again by the owner) and the
/// agent is neither woken nor moved; an operator is refused on either replica.
#[tokio::test]
async fn the_harness_log_is_read_through_either_replica_without_moving_the_agent() {
    use crate::support::secrets::{call, make_user};
    let Some((_balancer, a, b)) = two_replicas().await else { return };
    let agent = a.create_agent(json!({"env": {"FAKEAGENT_STDERR_LINES": "40"}})).await;
    let session = a.create_session(&agent).await;
    a.prompt(&session, "text awake on A").await;
    a.wait_turns(&session, 1, STALL).await;

    let path = format!("/api/v1/agents/{agent}/harness-log");
    let started = std::time::Instant::now();
    let on_b = loop {
        let (status, log) = b.get(&path).await;
        assert_eq!(status, 200, "{log}");
        if log["text"].as_str().is_some_and(|t| t.contains("line 40 of 40")) {
            break log;
        }
        assert!(started.elapsed() < STALL, "B never read A's log: {log}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(on_b["live"], true, "answered by the replica running it: {on_b}");
    let (_, on_a) = a.get(&path).await;
    assert_eq!((&on_a["text"], &on_a["generation"]), (&on_b["text"], &on_b["generation"]), "the same log");
    let (_, view) = b.get(&format!("/api/v1/agents/{agent}")).await;
    assert_eq!(view["desired_state"], "awake", "{view}");
    // A prompt through A still runs on A: the lease stayed.
    a.prompt(&session, "text still on A").await;
    a.wait_turns(&session, 2, STALL).await;
    assert!(!a.log().contains("sandboxd sent to"), "the sandbox stayed with A");

    // The owner checks the caller again: an operator of the workspace is refused through B.
    let (_, me) = b.get("/api/v1/me").await;
    let workspace = me["workspaces"][0]["workspace_id"].as_str().expect("workspace").to_owned();
    let operator = make_user(&b, "hlrop").await;
    let member = format!("/api/v1/workspaces/{workspace}/members/{}", operator.id);
    assert_eq!(call(&b, "PUT", &member, &b.token, json!({"role": "operator"})).await.0, 204);
    let (status, refused) = call(&b, "GET", &path, &operator.token, json!({})).await;
    assert_eq!(status, 403, "{refused}");
}

// Twenty-odd streams parsed while the test drives the servers: a thread of their own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_killed_mid_turn_is_taken_over_with_every_event_exactly_once() {
    let Some((_balancer, mut a, b)) = two_replicas().await else { return };

    // Issue 14's chaos load: 20 sessions streaming at 200 events/s, owned by A.
    const AGENTS: usize = 20;
    const UPDATES: i64 = 3000;
    let created = futures_util::future::join_all((0..AGENTS).map(|_| async {
        let agent = a.create_agent(json!({})).await;
        let session = a.create_session(&agent).await;
        a.prompt(&session, "text warm").await;
        a.wait_turns(&session, 1, STALL).await;
        session
    }))
    .await;
    let sessions: Vec<String> = created;
    for session in &sessions {
        a.prompt(session, &format!("flood {UPDATES} 200\ntext done")).await;
    }
    // Watchers on A, the replica about to die: each reconnects to the survivor with its last seq.
    let urls = [format!("127.0.0.1:{}", a.api_port()), format!("127.0.0.1:{}", b.api_port())];
    let followers: Vec<_> = sessions
        .iter()
        .map(|session| tokio::spawn(follow_until_turn_end(urls.clone(), a.token.clone(), session.clone(), 2)))
        .collect();
    // Mid-turn for the last session at least (on an idle machine the floods start within a second
    // of each other and take 15 s, so all are).
    wait_for_updates(&b, &sessions[AGENTS - 1], 300).await;
    let killed_at = chrono::Utc::now();
    a.kill();

    let mut moved = 0;
    for (follower, session) in followers.into_iter().zip(&sessions) {
        let (seen, reconnects) =
            follower.await.expect("the follower").unwrap_or_else(|e| panic!("{}", stalled(&e, &b)));
        assert_gap_free(&seen);
        let indices = flood_indices(&seen);
        assert!(
            indices == (1..=UPDATES).collect::<Vec<i64>>(),
            "every update exactly once, in order: {} updates seen, ending {:?}; the last events: {}\n\nB's log: {}",
            indices.len(),
            indices.iter().rev().take(3).collect::<Vec<_>>(),
            last_events(&seen, 4),
            b.log()
        );
        assert_eq!(seen.last().map(|e| e["payload"]["stop_reason"].clone()), Some(json!("end_turn")));
        assert!(of_type(&seen, "error").is_empty(), "{:?}", of_type(&seen, "error"));
        // A watcher stays on A only if its turn ended before the kill (a machine loaded enough to
        // spread the floods' starts over their 15 s); every other one moved to the survivor.
        if reconnects == 0 {
            let ended: chrono::DateTime<chrono::Utc> = seen
                .last()
                .and_then(|e| e["created_at"].as_str())
                .and_then(|t| t.parse().ok())
                .expect("the turn_end's time");
            assert!(
                ended < killed_at,
                "a watcher that never moved saw its turn end after the kill ({ended} ≥ {killed_at})"
            );
        } else {
            moved += 1;
        }
        let stored = b.events(session).await;
        assert_eq!(seqs(&seen), seqs(&stored), "the stream and the log agree");
    }
    assert!(moved >= 1, "the last session was mid-flood at the kill: its watcher moved to the survivor");
    // B owns every agent now (taken over by its heartbeat, or when the sandbox reconnected to it).
    let b_id = std::fs::read_to_string(b.data_dir.join("replica-id")).expect("B's replica id");
    let owners: Vec<String> = {
        use sqlx::Connection as _;
        let mut db = sqlx::PgConnection::connect(&b.database_url).await.expect("the database");
        sqlx::query_scalar("SELECT DISTINCT replica_id::text FROM agent_leases")
            .fetch_all(&mut db)
            .await
            .expect("leases")
    };
    assert_eq!(owners, vec![b_id.trim().to_owned()], "every lease is B's");

    // The taken-over harness keeps serving, now on B.
    b.prompt(&sessions[0], "text after the takeover").await;
    let events = b.wait_turns(&sessions[0], 3, STALL).await;
    assert_gap_free(&events);
}

/// A stalled watcher's failure: what stalled, the serving replica's last log lines and what the
/// sandboxes printed.
fn stalled(what: &str, server: &TestServer) -> String {
    let log = server.log();
    let tail: Vec<&str> = log.lines().rev().take(200).collect::<Vec<_>>().into_iter().rev().collect();
    format!("{what}\n\nthe replica's last log lines:\n{}\n\nsandboxes:\n{}", tail.join("\n"), server.sandbox_logs())
}

/// Whether the container runs (`None`: it does not exist).
fn container_running(name: &str) -> Option<bool> {
    let output =
        std::process::Command::new("docker").args(["inspect", "-f", "{{.State.Running}}", name]).output().ok()?;
    if !output.status.success() {
        return None;
    }
    Some(String::from_utf8_lossy(&output.stdout).trim() == "true")
}

#[tokio::test]
async fn a_question_asked_through_one_replica_is_pushed_and_answered_on_the_other() {
    let Some((_balancer, a, b)) = two_replicas().await else { return };

    let agent = a.create_agent(json!({"posture": "ask"})).await;
    let session = a.create_session(&agent).await;
    let mut inbox_on_b = b.websocket("/api/v1/permissions/stream", &b.token).await;
    let first = inbox_on_b.next(STALL).await.expect("the inbox's first message");
    assert_eq!(first["permissions"].as_array().map(Vec::len), Some(0), "{first}");
    a.prompt(&session, "ask execute rm -rf build/\ntext after the answer").await;

    // B's inbox hears of the question A's supervisor stored.
    let pushed = inbox_on_b.next(STALL).await.expect("the question pushed on B");
    let id = pushed["permissions"][0]["id"].as_str().expect("a pending question").to_owned();
    let answer = format!("/api/v1/permissions/{id}/answer");
    // Answers through B reach A's supervisor, with its refusals.
    let (status, body) = b.post(&answer, json!({"option_id": "not-offered"})).await;
    assert_eq!((status, body["error"]["code"].as_str()), (400, Some("INVALID_OPTION")), "{body}");
    let (status, body) = b.post(&answer, json!({"decision": "allow"})).await;
    assert_eq!(status, 200, "{body}");
    let events = a.wait_turns(&session, 1, STALL).await;
    assert!(
        events.iter().any(|e| e["type"] == "update" && e.to_string().contains("after the answer")),
        "the harness had the answer and went on: {events:?}"
    );
    let (status, _) = b.post(&answer, json!({"decision": "deny"})).await;
    assert_eq!(status, 409, "the first answer won");
}

#[tokio::test]
async fn a_revoked_token_closes_its_streams_on_every_replica() {
    let Some((_balancer, a, b)) = two_replicas().await else { return };
    let agent = a.create_agent(json!({})).await;
    let session = a.create_session(&agent).await;
    let (status, created) = a.post("/api/v1/tokens", json!({"name": "script"})).await;
    assert_eq!(status, 201, "{created}");
    let (id, token) = (created["id"].as_str().expect("id"), created["token"].as_str().expect("token"));
    let mut on_b = b.watch_as(&session, token).await;
    let mut on_a = a.watch_as(&session, token).await;
    assert!(!on_b.closes_within(Duration::from_millis(500)).await, "open while the token holds");
    let (status, body) = a.delete(&format!("/api/v1/tokens/{id}")).await;
    assert!(status < 300, "{status} {body}");
    assert!(on_a.closes_within(Duration::from_secs(10)).await, "closed on A, where it was revoked");
    assert!(on_b.closes_within(Duration::from_secs(10)).await, "closed on B too");
}

// Twenty-odd streams parsed while the test drives the servers: a thread of their own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rolling_restart_of_both_replicas_during_a_flood_loses_and_repeats_nothing() {
    let Some((_balancer, mut a, mut b)) = two_replicas().await else { return };

    const AGENTS: usize = 3;
    const UPDATES: i64 = 6000;
    let mut sessions = Vec::new();
    for n in 0..AGENTS {
        // Owners on both replicas.
        let server = if n % 2 == 0 { &a } else { &b };
        let agent = server.create_agent(json!({})).await;
        let session = server.create_session(&agent).await;
        server.prompt(&session, &format!("flood {UPDATES} 200\ntext done")).await;
        sessions.push(session);
    }
    // Each watcher follows its session across the restarts: closed by one replica (1012), it
    // reconnects to the other with the last seq it has.
    let urls = [format!("127.0.0.1:{}", a.api_port()), format!("127.0.0.1:{}", b.api_port())];
    let followers: Vec<_> = sessions
        .iter()
        .map(|session| tokio::spawn(follow_until_turn_end(urls.clone(), a.token.clone(), session.clone(), 1)))
        .collect();
    // Each step mid-flood (30 s per session): A's restart moves sessions 0 and 2, B's session 1.
    for session in &sessions {
        wait_for_updates(&b, session, 100).await;
    }
    a.restart_gracefully().await;
    let before = b.events(&sessions[0]).await.len();
    wait_for_updates(&b, &sessions[0], before + 50).await;
    b.restart_gracefully().await;

    for (follower, session) in followers.into_iter().zip(&sessions) {
        let (seen, reconnects) =
            follower.await.expect("the follower").unwrap_or_else(|e| panic!("{}", stalled(&e, &a)));
        assert_gap_free(&seen);
        assert_eq!(flood_indices(&seen), (1..=UPDATES).collect::<Vec<i64>>(), "every update exactly once, in order");
        assert_eq!(seen.last().map(|e| e["payload"]["stop_reason"].clone()), Some(json!("end_turn")));
        assert!(of_type(&seen, "error").is_empty(), "{:?}", of_type(&seen, "error"));
        assert!(reconnects >= 1, "the watcher was moved by a restart");
        assert_eq!(seqs(&seen), seqs(&a.events(session).await), "the stream and the log agree");
    }
}

/// Waits until the session's log holds at least `count` events.
async fn wait_for_updates(server: &TestServer, session: &str, count: usize) {
    let deadline = tokio::time::Instant::now() + STALL;
    loop {
        let events = server.events(session).await;
        if events.len() >= count {
            return;
        }
        if tokio::time::Instant::now() >= deadline {
            panic!(
                "session {session} stalled below {count} events; its last events: {}\n\nthe server's log: {}\n\nsandboxes: {}",
                last_events(&events, 4),
                server.log(),
                server.sandbox_logs()
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Streams a session from `urls[0]`, moving to the other address whenever the stream closes,
/// with the last seq it has, until its `turns`-th `turn_end`; returns the events and the
/// reconnects.
async fn follow_until_turn_end(
    urls: [String; 2],
    token: String,
    session: String,
    turns: usize,
) -> Result<(Vec<Value>, usize), String> {
    use futures_util::StreamExt as _;
    use tokio_tungstenite::tungstenite::{Message, client::IntoClientRequest as _};
    let mut seen: Vec<Value> = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(240);
    let mut attempt = 0usize;
    let mut ended = 0usize;
    loop {
        assert!(tokio::time::Instant::now() < deadline, "the watcher never saw the turn end");
        let after = seen.last().and_then(|e| e["seq"].as_i64()).unwrap_or(0);
        let url = format!("ws://{}/api/v1/sessions/{session}/stream?after={after}", urls[attempt % 2]);
        attempt += 1;
        let mut request = url.into_client_request().expect("ws request");
        request.headers_mut().insert("authorization", format!("Bearer {token}").parse().expect("header"));
        let Ok((mut socket, _)) = tokio_tungstenite::connect_async(request).await else {
            tokio::time::sleep(Duration::from_millis(200)).await;
            continue;
        };
        loop {
            match tokio::time::timeout(STALL, socket.next()).await {
                Ok(Some(Ok(Message::Text(text)))) => {
                    let event: Value = serde_json::from_str(text.as_str()).expect("an event");
                    ended += usize::from(event["type"] == "turn_end");
                    seen.push(event);
                    if ended >= turns {
                        return Ok((seen, attempt - 1));
                    }
                }
                Ok(Some(Ok(_))) => {}
                Ok(_) => break,
                Err(_) => {
                    let last = seen.last().map(|e| e["seq"].clone());
                    return Err(format!("session {session}: the stream stalled for {STALL:?} after seq {last:?}"));
                }
            }
        }
    }
}

#[tokio::test]
async fn the_replica_route_is_on_its_own_listener_and_takes_only_signed_fresh_commands() {
    use agenthold_server::replicas::signing::{CallKey, NONCE_HEADER, SIGNATURE_HEADER, TIMESTAMP_HEADER};
    let server = TestServer::start().await;
    let agent = server.create_agent(json!({})).await;
    let path = format!("/internal/v1/agents/{agent}/commands");
    let prompt = json!({"command": "prompt"});
    let internal = format!("http://127.0.0.1:{}", server.internal_port);
    // Not on the public API's listener at all.
    let key = std::fs::read(server.data_dir.join("master.key")).expect("the master key file");
    let key = CallKey::derive(&agenthold_server::secrets::master_key::MasterKey::parse(&key).expect("a master key"));
    let signed = |path: &str, body: &serde_json::Value, at: i64| {
        let signed = key.sign(at, path, body.to_string().as_bytes());
        vec![(TIMESTAMP_HEADER, at.to_string()), (NONCE_HEADER, signed.nonce), (SIGNATURE_HEADER, signed.signature)]
    };
    let now = chrono::Utc::now().timestamp();
    let (status, _, _) =
        server.raw_with_headers("POST", &path, None, &signed(&path, &prompt, now), prompt.clone()).await;
    assert_ne!(status, 200, "the public listener does not serve replica calls");
    // Unsigned, with the API's credentials, tampered, stale, or replayed: refused.
    let post = |headers: Vec<(&'static str, String)>, path: String, body: serde_json::Value| {
        let (server, internal) = (&server, internal.clone());
        async move { server.raw_at(&internal, "POST", &path, None, &headers, body).await.0 }
    };
    assert_eq!(post(vec![], path.clone(), prompt.clone()).await, 401);
    assert_eq!(
        post(vec![("authorization", format!("Bearer {}", server.token))], path.clone(), prompt.clone()).await,
        401
    );
    let mut tampered = signed(&path, &prompt, now);
    tampered[0].1 = (now + 1).to_string();
    assert_eq!(post(tampered, path.clone(), prompt.clone()).await, 401);
    assert_eq!(post(signed(&path, &prompt, now - 120), path.clone(), prompt.clone()).await, 401, "too old");
    // Signed and fresh: bad commands are refused, an unknown agent is 404, a good command runs
    // here — once.
    let attach = json!({"command": "attach"});
    assert_eq!(post(signed(&path, &attach, now), path.clone(), attach).await, 422, "a command that cannot travel");
    let unknown = format!("/internal/v1/agents/{}/commands", uuid::Uuid::new_v4());
    assert_eq!(post(signed(&unknown, &prompt, now), unknown.clone(), prompt.clone()).await, 404);
    let headers = signed(&path, &prompt, now);
    let (status, _, answer) = server.raw_at(&internal, "POST", &path, None, &headers, prompt.clone()).await;
    assert_eq!((status, answer), (200, json!({"outcome": "done"})));
    assert_eq!(post(headers, path.clone(), prompt.clone()).await, 401, "the same request again: a replay");
    // The same command signed again in the same second (a nudge sent twice) is a new request.
    assert_eq!(post(signed(&path, &prompt, now), path.clone(), prompt.clone()).await, 200, "signed anew: taken");
    let sleep = json!({"command": "sleep"});
    let (status, _, answer) = server.raw_at(&internal, "POST", &path, None, &signed(&path, &sleep, now), sleep).await;
    assert_eq!((status, answer), (200, json!({"outcome": "lifecycle", "error": null})), "the sleep ran here");
    // A signed destroy of an agent that is not being deleted is refused; it lives on.
    let destroy = json!({"command": "destroy"});
    assert_eq!(post(signed(&path, &destroy, now), path.clone(), destroy).await, 409);
    assert_eq!(server.get(&format!("/api/v1/agents/{agent}")).await.0, 200);
}
