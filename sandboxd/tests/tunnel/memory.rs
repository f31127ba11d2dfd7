//! sandboxd stays small: the resident memory of an idle, connected sandboxd, and of one whose
//! terminal is flooded with input its shell never reads.

use std::time::Duration;

use agenthold_sandboxd::protocol::{Control, DataKind};

use crate::harness::{Msg, Sandboxd, Server};

/// `VmRSS` of `pid`, in KiB.
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).expect("VmRSS line");
    line.split_whitespace().nth(1).and_then(|n| n.parse().ok()).expect("a number")
}

#[tokio::test]
async fn idle_connected_sandboxd_stays_under_ten_mib() {
    let server = Server::start().await;
    let sandboxd = Sandboxd::start(&server.url, &[]);
    let mut conn = server.accept().await;
    conn.handshake().await;
    // Idle after having done some work.
    conn.start(1, &["echo", "warm"], &[]).await;
    assert_eq!(conn.output(DataKind::Stdout, 1, 0, 5).await, b"warm\n");
    conn.exited(1).await;
    tokio::time::sleep(Duration::from_millis(200)).await; // settle; not synchronisation
    let kib = rss_kib(sandboxd.pid());
    eprintln!("idle connected sandboxd VmRSS: {kib} KiB");
    assert!(kib <= 10 * 1024, "idle RSS {kib} KiB exceeds 10 MiB");
    sandboxd.stop().await;
}

#[tokio::test]
async fn terminal_input_nobody_reads_does_not_grow_sandboxd() {
    const FLOOD: usize = 50 << 20;
    const FRAME: usize = 64 << 10;
    let server = Server::start().await;
    let sandboxd = Sandboxd::start(&server.url, &[]);
    let mut conn = server.accept().await;
    conn.handshake().await;
    conn.send(&Control::OpenTerminal {
        channel: 30,
        cols: 80,
        rows: 24,
        argv: vec!["sleep".into(), "1000".into()], // never reads its terminal
        env: vec![],
        cwd: "/tmp".into(),
        user: None,
    })
    .await;
    let before = rss_kib(sandboxd.pid());
    let frame = vec![b'x'; FRAME];
    let mut offset = 0;
    while offset < FLOOD as u64 {
        conn.send_data(DataKind::TerminalInput, 30, offset, &frame).await;
        offset += FRAME as u64;
    }
    // sandboxd handles messages in order: once this start is answered, every input frame was.
    conn.start(1, &["true"], &[]).await;
    let after = rss_kib(sandboxd.pid());
    eprintln!("VmRSS before {before} KiB, after {} MiB of unread terminal input {after} KiB", FLOOD >> 20);
    assert!(after <= before + 16 * 1024, "RSS grew from {before} KiB to {after} KiB");
    conn.send(&Control::CloseTerminal { channel: 30 }).await;
    conn.expect("terminal closed", |m| {
        matches!(m, Msg::Control(Control::TerminalClosed { channel: 30 })).then_some(())
    })
    .await;
    sandboxd.stop().await;
}

/// Not a check, a measurement: `cargo test --test tunnel -- --ignored --nocapture throughput`.
#[tokio::test]
#[ignore = "a measurement, run by hand"]
async fn stdout_throughput() {
    use agenthold_sandboxd::protocol::Control;

    use crate::harness::Msg;

    const TOTAL: u64 = 256 * 1024 * 1024;
    let server = Server::start().await;
    let sandboxd = Sandboxd::start(&server.url, &[]);
    let mut conn = server.accept().await;
    conn.handshake().await;
    let started = std::time::Instant::now();
    conn.start(1, &["head", "-c", &TOTAL.to_string(), "/dev/zero"], &[]).await;
    let (mut got, mut acked) = (0u64, 0u64);
    while got < TOTAL {
        let frame = conn
            .expect("stdout", |m| match m {
                Msg::Data(f) if f.channel == 1 => Some(f.clone()),
                _ => None,
            })
            .await;
        got += frame.payload.len() as u64;
        if got - acked >= 1 << 20 || got == TOTAL {
            conn.send(&Control::Ack { channel: 1, offset: got }).await;
            acked = got;
        }
    }
    conn.exited(1).await;
    let secs = started.elapsed().as_secs_f64();
    eprintln!("stdout throughput: {:.0} MiB/s", TOTAL as f64 / secs / 1048576.0);
    sandboxd.stop().await;
}
