//! The server going away: stdout kept and resent exactly, processes kept running, processes the
//! server no longer knows killed, backpressure when the buffer is full, retries.

use std::time::Duration;

use agenthold_sandboxd::protocol::{Control, DataKind, ProcessState};

use crate::harness::{Msg, Sandboxd, Server, alive, until};

const SCRIPT: &str = "for i in 1 2 3; do echo line$i; done; read x; echo got$x; read y; echo end$y";

#[tokio::test]
async fn resend_after_reconnect_is_exact_and_the_process_keeps_running() {
    let server = Server::start().await;
    let sandboxd = Sandboxd::start(&server.url, &[]);
    let mut conn = server.accept().await;
    conn.handshake().await;
    let pid = conn.start(7, &["sh", "-c", SCRIPT], &[]).await;
    assert_eq!(conn.output(DataKind::Stdout, 7, 0, 18).await, b"line1\nline2\nline3\n");
    drop(conn); // no ack

    let mut conn = server.accept().await;
    let held = conn.hello().await;
    assert_eq!(
        held,
        vec![ProcessState {
            channel: 7,
            pid: Some(pid),
            stdout_acked: 0,
            stdout_end: 18,
            stdin_written: 0,
            stdin_accepted: 0,
            exit: None
        }]
    );
    conn.resume(&[(7, 6)]).await;
    assert_eq!(conn.output(DataKind::Stdout, 7, 6, 12).await, b"line2\nline3\n", "exactly the missing bytes");
    conn.send_data(DataKind::Stdin, 7, 0, b"A\n").await;
    assert_eq!(conn.output(DataKind::Stdout, 7, 18, 5).await, b"gotA\n", "the process kept running");
    conn.send(&Control::Ack { channel: 7, offset: 18 }).await;
    conn.expect("stdin written", |m| {
        matches!(m, Msg::Control(Control::StdinWritten { channel: 7, offset: 2 })).then_some(())
    })
    .await;
    drop(conn);

    let mut conn = server.accept().await;
    let held = conn.hello().await;
    assert_eq!(
        held,
        vec![ProcessState {
            channel: 7,
            pid: Some(pid),
            stdout_acked: 18,
            stdout_end: 23,
            stdin_written: 2,
            stdin_accepted: 2,
            exit: None
        }]
    );
    conn.resume(&[(7, 18)]).await;
    assert_eq!(conn.output(DataKind::Stdout, 7, 18, 5).await, b"gotA\n", "only the unacked bytes");
    conn.send_data(DataKind::Stdin, 7, 2, b"B\n").await;
    assert_eq!(conn.output(DataKind::Stdout, 7, 23, 5).await, b"endB\n");
    let (status, end) = conn.exited(7).await;
    assert_eq!((status.code, end), (Some(0), 28));
    drop(conn);

    // The exit is kept, and repeated, until the server forgets it.
    let mut conn = server.accept().await;
    let held = conn.hello().await;
    assert_eq!(held.len(), 1);
    assert_eq!((held[0].stdout_end, held[0].exit.map(|e| e.code)), (28, Some(Some(0))));
    conn.resume(&[(7, 28)]).await;
    conn.exited(7).await;
    conn.send(&Control::Forget { channel: 7 }).await;
    drop(conn);
    let mut conn = server.accept().await;
    assert_eq!(conn.hello().await, vec![], "forgotten");
    assert!(!alive(pid));
    sandboxd.stop().await;
}

#[tokio::test]
async fn output_written_while_the_server_is_away_is_delivered() {
    let server = Server::start().await;
    let sandboxd = Sandboxd::start(&server.url, &[]);
    let mut conn = server.accept().await;
    conn.handshake().await;
    conn.start(8, &["sh", "-c", "read x; echo one; echo two; exit 4"], &[]).await;
    conn.send_data(DataKind::Stdin, 8, 0, b"go\n").await;
    conn.expect("stdin written", |m| matches!(m, Msg::Control(Control::StdinWritten { channel: 8, .. })).then_some(()))
        .await;
    drop(conn);

    // Everything happened while disconnected: wait until the next Hello shows the exit.
    let mut conn = server.accept().await;
    let mut held = conn.hello().await;
    while held[0].exit.is_none() {
        drop(conn);
        conn = server.accept().await;
        held = conn.hello().await;
    }
    assert_eq!((held[0].stdout_acked, held[0].stdout_end), (0, 8));
    conn.resume(&[(8, 0)]).await;
    assert_eq!(conn.output(DataKind::Stdout, 8, 0, 8).await, b"one\ntwo\n");
    let (status, end) = conn.exited(8).await;
    assert_eq!((status.code, end), (Some(4), 8));
    sandboxd.stop().await;
}

#[tokio::test]
async fn processes_missing_from_resume_are_killed_and_forgotten() {
    let server = Server::start().await;
    let sandboxd = Sandboxd::start(&server.url, &[]);
    let mut conn = server.accept().await;
    conn.handshake().await;
    let doomed = conn.start(1, &["sleep", "100"], &[]).await;
    let kept = conn.start(2, &["sleep", "100"], &[]).await;
    drop(conn);

    let mut conn = server.accept().await;
    let channels: Vec<u32> = conn.hello().await.iter().map(|p| p.channel).collect();
    assert_eq!(channels, [1, 2]);
    conn.resume(&[(2, 0)]).await;
    until("the unlisted process is killed", || !alive(doomed)).await;
    assert!(alive(kept));
    conn.assert_quiet(Duration::from_millis(200), |m| matches!(m, Msg::Control(Control::Exited { channel: 1, .. })))
        .await;
    drop(conn);

    let mut conn = server.accept().await;
    let channels: Vec<u32> = conn.hello().await.iter().map(|p| p.channel).collect();
    assert_eq!(channels, [2], "the killed one is forgotten");
    conn.resume(&[(2, 0)]).await;
    sandboxd.stop().await;
    until("sandboxd's shutdown stops what it ran", || !alive(kept)).await;
}

#[tokio::test]
async fn full_buffer_blocks_the_process_until_acked_and_nothing_is_lost() {
    const TOTAL: usize = 300_000;
    const BOUND: u64 = 10_000;
    let server = Server::start().await;
    let sandboxd = Sandboxd::start(&server.url, &[("AGENTHOLD_SANDBOXD_BUFFER_BYTES", "10000")]);
    let mut conn = server.accept().await;
    conn.handshake().await;
    let script = format!("head -c {TOTAL} /dev/zero | tr '\\0' a; echo done >&2");
    conn.start(9, &["sh", "-c", &script], &[]).await;

    // Without acks sandboxd holds at most BOUND bytes and the writer waits.
    let first = conn.output(DataKind::Stdout, 9, 0, BOUND as usize).await;
    assert!(first.iter().all(|&b| b == b'a'));
    conn.assert_quiet(Duration::from_millis(300), |m| matches!(m, Msg::Data(f) if f.kind == DataKind::Stdout)).await;
    drop(conn);
    let mut conn = server.accept().await;
    let held = conn.hello().await;
    assert_eq!((held[0].stdout_end, held[0].exit), (BOUND, None), "reading stopped at the bound");

    // Acking lets it go on, to the last byte, never holding more than BOUND unacked.
    conn.resume(&[(9, BOUND)]).await;
    let (mut got, mut acked) = (BOUND, BOUND);
    while got < TOTAL as u64 {
        let frame = conn
            .expect("more stdout", |m| match m {
                Msg::Data(f) if f.kind == DataKind::Stdout && f.channel == 9 => Some(f.clone()),
                _ => None,
            })
            .await;
        assert_eq!(frame.offset, got, "contiguous");
        assert!(frame.payload.iter().all(|&b| b == b'a'));
        got += frame.payload.len() as u64;
        assert!(got - acked <= BOUND, "held {} > bound", got - acked);
        if got - acked >= BOUND / 2 || got == TOTAL as u64 {
            conn.send(&Control::Ack { channel: 9, offset: got }).await;
            acked = got;
        }
    }
    let (status, end) = conn.exited(9).await;
    assert_eq!((status.code, end), (Some(0), TOTAL as u64));
    sandboxd.stop().await;
}

#[tokio::test]
async fn retries_after_a_dropped_connection_attempt() {
    let server = Server::start().await;
    let sandboxd = Sandboxd::start(&server.url, &[]);
    drop(server.accept_tcp().await); // closed before the handshake
    let mut conn = server.accept().await;
    conn.handshake().await;
    conn.start(1, &["echo", "ok"], &[]).await;
    assert_eq!(conn.output(DataKind::Stdout, 1, 0, 3).await, b"ok\n");
    sandboxd.stop().await;
}
