//! Liveness: sandboxd pings a server that answers and keeps its connection; it drops a
//! half-open one (silent, not reading) and dials again, its processes still running and their
//! output still held.

use std::time::Duration;

use agenthold_sandboxd::protocol::{Control, DataKind};

use crate::harness::{Msg, Sandboxd, Server, alive};

/// Fast liveness for tests: a ping every 100 ms, a server silent for 600 ms is gone.
const FAST: &[(&str, &str)] = &[("AGENTHOLD_PING_INTERVAL_MS", "100"), ("AGENTHOLD_SILENT_TUNNEL_MS", "600")];
/// The same pings with more room before a server counts as silent, so that a loaded machine
/// (nextest runs many tests at once on two cores) does not look like a dead server.
const KEEP: &[(&str, &str)] = &[("AGENTHOLD_PING_INTERVAL_MS", "100"), ("AGENTHOLD_SILENT_TUNNEL_MS", "1500")];

#[tokio::test]
async fn a_server_that_answers_pings_keeps_the_connection() {
    let server = Server::start().await;
    let sandboxd = Sandboxd::start(&server.url, KEEP);
    let mut conn = server.accept().await;
    conn.handshake().await;
    // Reading answers the pings; three silence limits go by without a message.
    conn.assert_quiet(Duration::from_millis(4500), |_| true).await;
    assert!(conn.pings >= 15, "pings every 100 ms, got {} in 4.5 s", conn.pings);
    assert!(server.try_accept_tcp(Duration::from_millis(100)).await.is_none(), "no reconnect");
    conn.start(1, &["echo", "still here"], &[]).await;
    assert_eq!(conn.output(DataKind::Stdout, 1, 0, 11).await, b"still here\n");
    sandboxd.stop().await;
}

#[tokio::test]
async fn a_half_open_server_is_dropped_and_output_is_kept() {
    const TOTAL: u64 = 30_000_000;
    let server = Server::start().await;
    let sandboxd = Sandboxd::start(&server.url, FAST);
    let mut conn = server.accept().await;
    conn.handshake().await;
    // More output than the sockets hold: sandboxd's sends block on a server that stopped reading.
    let pid = conn.start(1, &["sh", "-c", &format!("head -c {TOTAL} /dev/zero; exec sleep 100")], &[]).await;

    // From here `conn` is half-open: connected, but it neither reads nor writes.
    let mut again = server.accept().await;
    let held = again.hello().await;
    assert_eq!((held.len(), held[0].channel, held[0].pid, held[0].exit), (1, 1, Some(pid), None));
    assert!(alive(pid), "the process kept running");
    drop(conn);
    again.resume(&[(1, 0)]).await;
    let mut got = 0u64;
    while got < TOTAL {
        let frame = again
            .expect("stdout", |m| match m {
                Msg::Data(f) if f.kind == DataKind::Stdout && f.channel == 1 => Some(f.clone()),
                _ => None,
            })
            .await;
        assert_eq!(frame.offset, got, "contiguous, from the first byte");
        got += frame.payload.len() as u64;
        again.send(&Control::Ack { channel: 1, offset: got }).await;
    }
    assert_eq!(got, TOTAL, "every byte, once");
    sandboxd.stop().await;
}

#[tokio::test]
async fn a_silent_server_is_noticed_even_with_nothing_to_send() {
    let server = Server::start().await;
    let sandboxd = Sandboxd::start(&server.url, FAST);
    let mut conn = server.accept().await;
    conn.handshake().await;
    let pid = conn.start(1, &["sleep", "100"], &[]).await;
    // Neither read from nor written to from here: only sandboxd's pings go out, no pong comes back.
    let started = std::time::Instant::now();
    let mut again = server.accept().await;
    let waited = started.elapsed();
    let held = again.hello().await;
    assert_eq!((held.len(), held[0].pid), (1, Some(pid)));
    assert!(waited >= Duration::from_millis(500), "not before the silence limit: {waited:?}");
    eprintln!("a silent server was dropped after {waited:?} (limit 600 ms)");
    drop(conn);
    sandboxd.stop().await;
}
