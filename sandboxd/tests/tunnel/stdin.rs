//! stdin is exact: resends are ignored, overlaps give only their new tail, gaps and frames past
//! the queue bound are refused whole with `StdinRejected`, and nothing is ever dropped silently.

use agenthold_sandboxd::protocol::{Control, DataKind, MAX_STDIN_QUEUED_BYTES, ProcessState};

use crate::harness::{Conn, Msg, Sandboxd, Server};

/// Waits for a `StdinRejected` of `channel`: `(offset, expected, reason)`.
async fn rejected(conn: &mut Conn, channel: u32) -> (u64, u64, String) {
    conn.expect("stdin rejected", |m| match m {
        Msg::Control(Control::StdinRejected { channel: c, offset, expected, reason }) if *c == channel => {
            Some((*offset, *expected, reason.clone()))
        }
        _ => None,
    })
    .await
}

/// Waits for `StdinWritten` of `channel` at `offset`.
async fn written(conn: &mut Conn, channel: u32, offset: u64) {
    conn.expect(&format!("stdin written {offset}"), |m| {
        matches!(m, Msg::Control(Control::StdinWritten { channel: c, offset: o }) if *c == channel && *o == offset)
            .then_some(())
    })
    .await;
}

#[tokio::test]
async fn resends_overlaps_and_gaps_are_placed_exactly() {
    let server = Server::start().await;
    let sandboxd = Sandboxd::start(&server.url, &[]);
    let mut conn = server.accept().await;
    conn.handshake().await;
    let pid = conn.start(1, &["cat"], &[]).await;

    conn.send_data(DataKind::Stdin, 1, 0, b"abc").await;
    conn.send_data(DataKind::Stdin, 1, 0, b"abc").await; // a resend: ignored
    conn.send_data(DataKind::Stdin, 1, 1, b"bcd\n").await; // overlaps: only "d\n" is new
    conn.send_data(DataKind::Stdin, 1, 9, b"later").await; // a gap: refused whole
    let (offset, expected, reason) = rejected(&mut conn, 1).await;
    assert_eq!((offset, expected), (9, 5), "{reason}");
    assert!(reason.starts_with("gap"), "{reason}");
    written(&mut conn, 1, 5).await;
    assert_eq!(conn.output(DataKind::Stdout, 1, 0, 5).await, b"abcd\n");
    drop(conn);

    // The next connection's Hello says where stdin goes on.
    let mut conn = server.accept().await;
    let held = conn.hello().await;
    assert_eq!(
        held,
        vec![ProcessState {
            channel: 1,
            pid: Some(pid),
            stdout_acked: 0,
            stdout_end: 5,
            stdin_written: 5,
            stdin_accepted: 5,
            exit: None
        }]
    );
    conn.resume(&[(1, 5)]).await;
    conn.send_data(DataKind::Stdin, 1, 5, b"e\n").await;
    conn.send(&Control::CloseStdin { channel: 1 }).await;
    conn.send_data(DataKind::Stdin, 1, 7, b"too late\n").await;
    let (offset, expected, reason) = rejected(&mut conn, 1).await;
    assert_eq!((offset, expected, reason.as_str()), (7, 7, "stdin is closed"));
    let (status, end) = conn.exited(1).await;
    assert_eq!((status.code, end), (Some(0), 7));
    assert_eq!(conn.output(DataKind::Stdout, 1, 5, 2).await, b"e\n");
    sandboxd.stop().await;
}

#[tokio::test]
async fn stdin_past_the_bound_is_refused_whole_and_taken_once_there_is_room() {
    const MIB: usize = 1 << 20;
    let bound = MAX_STDIN_QUEUED_BYTES;
    let server = Server::start().await;
    let sandboxd = Sandboxd::start(&server.url, &[]);
    let mut conn = server.accept().await;
    conn.handshake().await;
    // Stops itself before reading any stdin; SIGCONT lets `wc` count it all.
    conn.start(2, &["sh", "-c", "kill -STOP $$; exec wc -c"], &[]).await;

    let chunk = vec![b'x'; MIB];
    let mut offset = 0u64;
    while offset < bound {
        conn.send_data(DataKind::Stdin, 2, offset, &chunk).await;
        offset += MIB as u64;
    }
    conn.send_data(DataKind::Stdin, 2, offset, &chunk).await;
    let (at, expected, reason) = rejected(&mut conn, 2).await;
    assert_eq!((at, expected), (bound, bound), "{reason}");
    assert!(reason.starts_with("full"), "{reason}");
    // A small frame is refused too while the queue is full: nothing past the bound is held.
    conn.send_data(DataKind::Stdin, 2, offset, b"y").await;
    let (_, expected, _) = rejected(&mut conn, 2).await;
    assert_eq!(expected, bound);

    conn.send(&Control::Signal { channel: 2, signal: 18 }).await; // SIGCONT
    written(&mut conn, 2, bound).await;
    conn.send_data(DataKind::Stdin, 2, offset, &chunk).await; // the refused frame, again
    written(&mut conn, 2, bound + MIB as u64).await;
    conn.send(&Control::CloseStdin { channel: 2 }).await;
    let (status, end) = conn.exited(2).await;
    let count = String::from_utf8(conn.output(DataKind::Stdout, 2, 0, end as usize).await).expect("utf8");
    assert_eq!((status.code, count.trim()), (Some(0), (bound + MIB as u64).to_string().as_str()));
    sandboxd.stop().await;
}
