//! Terminals: a shell on a PTY, input, output, resize, close.

use agenthold_sandboxd::protocol::{Control, DataKind};

use crate::harness::{Conn, Msg, Sandboxd, Server};

/// Collects terminal output of `channel` until it contains `needle`; returns all of it.
async fn read_until(conn: &mut Conn, channel: u32, seen: &mut Vec<u8>, needle: &str) {
    while !String::from_utf8_lossy(seen).contains(needle) {
        let frame = conn
            .expect(
                &format!("terminal output containing {needle:?}; so far {:?}", String::from_utf8_lossy(seen)),
                |m| match m {
                    Msg::Data(f) if f.kind == DataKind::TerminalOutput && f.channel == channel => Some(f.clone()),
                    Msg::Control(Control::StartFailed { message, .. }) => {
                        panic!("terminal failed: {message}")
                    }
                    _ => None,
                },
            )
            .await;
        assert_eq!(frame.offset, seen.len() as u64, "terminal offsets increase without gaps here");
        seen.extend_from_slice(&frame.payload);
    }
}

#[tokio::test]
async fn shell_on_a_pty() {
    let server = Server::start().await;
    let sandboxd = Sandboxd::start(&server.url, &[]);
    let mut conn = server.accept().await;
    conn.handshake().await;

    conn.send(&Control::OpenTerminal {
        channel: 10,
        cols: 80,
        rows: 24,
        argv: vec!["sh".into()],
        env: vec![("TERM".into(), "dumb".into()), ("PS1".into(), "$ ".into())],
        cwd: "/tmp".into(),
        user: None,
    })
    .await;
    let mut seen = Vec::new();
    conn.send_data(DataKind::TerminalInput, 10, 0, b"echo $((6*7))\n").await;
    read_until(&mut conn, 10, &mut seen, "42\r\n").await;

    conn.send_data(DataKind::TerminalInput, 10, 14, b"stty size; tty\n").await;
    read_until(&mut conn, 10, &mut seen, "24 80").await;
    read_until(&mut conn, 10, &mut seen, "/dev/pts/").await;
    conn.send(&Control::Resize { channel: 10, cols: 100, rows: 30 }).await;
    conn.send_data(DataKind::TerminalInput, 10, 30, b"stty size\n").await;
    read_until(&mut conn, 10, &mut seen, "30 100").await;

    conn.send_data(DataKind::TerminalInput, 10, 40, b"exit\n").await;
    conn.expect("terminal closed", |m| {
        matches!(m, Msg::Control(Control::TerminalClosed { channel: 10 })).then_some(())
    })
    .await;

    // CloseTerminal hangs up a shell that would run forever.
    conn.send(&Control::OpenTerminal {
        channel: 11,
        cols: 80,
        rows: 24,
        argv: vec!["sh".into()],
        env: vec![],
        cwd: "/tmp".into(),
        user: None,
    })
    .await;
    let mut seen = Vec::new();
    conn.send_data(DataKind::TerminalInput, 11, 0, b"echo ready\n").await;
    read_until(&mut conn, 11, &mut seen, "ready\r\n").await;
    conn.send(&Control::CloseTerminal { channel: 11 }).await;
    conn.expect("terminal closed", |m| {
        matches!(m, Msg::Control(Control::TerminalClosed { channel: 11 })).then_some(())
    })
    .await;

    conn.send(&Control::OpenTerminal {
        channel: 12,
        cols: 80,
        rows: 24,
        argv: vec!["/no/such/shell".into()],
        env: vec![],
        cwd: "/tmp".into(),
        user: None,
    })
    .await;
    conn.expect("open failed", |m| matches!(m, Msg::Control(Control::StartFailed { channel: 12, .. })).then_some(()))
        .await;
    sandboxd.stop().await;
}
