//! Whatever the server sends, sandboxd does not die.

use agenthold_sandboxd::protocol::{Control, DataFrame, DataKind, ResumeFrom};
use tokio_tungstenite::tungstenite::Message;

use crate::harness::{Sandboxd, Server};

#[tokio::test]
async fn garbage_from_the_server_is_logged_and_ignored() {
    let server = Server::start().await;
    let mut sandboxd = Sandboxd::start(&server.url, &[]);
    let mut conn = server.accept().await;
    conn.handshake().await;

    conn.raw(Message::text("not json")).await;
    conn.raw(Message::text(r#"{"type":"no_such_message","channel":1}"#)).await;
    conn.raw(Message::text(r#"{"type":"ack","channel":"x"}"#)).await;
    conn.raw(Message::binary(vec![1u8, 2])).await;
    conn.raw(Message::binary(vec![9u8; 20])).await;
    conn.raw(Message::Ping(vec![1, 2, 3].into())).await;
    conn.send_data(DataKind::Stdin, 99, 0, b"to nobody").await;
    conn.send_data(DataKind::TerminalInput, 99, 0, b"to nobody").await;
    conn.send_data(DataKind::Stdout, 99, 0, b"wrong direction").await;
    conn.send_data(DataKind::Stdin, 99, u64::MAX, b"at the very end").await;
    for control in [
        Control::Ack { channel: 99, offset: 5 },
        Control::Signal { channel: 99, signal: 9 },
        Control::CloseStdin { channel: 99 },
        Control::Forget { channel: 99 },
        Control::Resize { channel: 99, cols: 1, rows: 1 },
        Control::CloseTerminal { channel: 99 },
        Control::Resume { channels: vec![] },
        Control::Hello { protocol: 1, version: "x".into(), processes: vec![] },
        Control::Start { channel: 98, argv: vec![], env: vec![], cwd: "/tmp".into(), user: None },
        Control::Start { channel: 97, argv: vec!["true".into()], env: vec![], cwd: "/no/such/dir".into(), user: None },
        Control::Start {
            channel: 95,
            argv: vec!["true\0".into()],
            env: vec![("A\0B".into(), "x".into()), (String::new(), "y".into()), ("C=D".into(), "z".into())],
            cwd: "/tmp".into(),
            user: None,
        },
        Control::Resume { channels: vec![ResumeFrom { channel: 1, offset: u64::MAX }] },
        Control::OpenTerminal {
            channel: 94,
            cols: 0,
            rows: u16::MAX,
            argv: vec![],
            env: vec![],
            cwd: "/tmp".into(),
            user: None,
        },
        Control::Start {
            channel: 96,
            argv: vec!["true".into()],
            env: vec![],
            cwd: "/tmp".into(),
            user: Some("no-such-user-xyz".into()),
        },
    ] {
        conn.send(&control).await;
    }

    // Not PID 1, so sandboxd must not create the user (it never edits the host's /etc/passwd).
    conn.expect("unknown user refused", |m| {
        matches!(m, crate::harness::Msg::Control(Control::StartFailed { channel: 96, .. })).then_some(())
    })
    .await;
    let pid = conn.start(1, &["echo", "alive"], &[]).await;
    assert_ne!(pid, 0);
    // A signal number that is not one, an ack past the end, odd terminal sizes, and a duplicate
    // channel, answered without harm.
    conn.send(&Control::Signal { channel: 1, signal: 12345 }).await;
    conn.send(&Control::Ack { channel: 1, offset: u64::MAX }).await;
    let terminal = Control::OpenTerminal {
        channel: 93,
        cols: 0,
        rows: u16::MAX,
        argv: vec!["sleep".into(), "100".into()],
        env: vec![],
        cwd: "/tmp".into(),
        user: None,
    };
    conn.send(&terminal).await;
    conn.send(&Control::Resize { channel: 93, cols: u16::MAX, rows: 0 }).await;
    conn.send(&Control::CloseTerminal { channel: 93 }).await;
    assert_eq!(conn.output(DataKind::Stdout, 1, 0, 6).await, b"alive\n");
    conn.send(&Control::Start { channel: 1, argv: vec!["true".into()], env: vec![], cwd: "/tmp".into(), user: None })
        .await;
    conn.expect("duplicate channel refused", |m| {
        matches!(m, crate::harness::Msg::Control(Control::StartFailed { channel: 1, .. })).then_some(())
    })
    .await;
    sandboxd.assert_running();
    sandboxd.stop().await;
}

#[tokio::test]
async fn a_message_past_the_size_limit_ends_the_connection_not_sandboxd() {
    let server = Server::start().await;
    let mut sandboxd = Sandboxd::start(&server.url, &[]);
    let mut conn = server.accept().await;
    conn.handshake().await;
    let pid = conn.start(1, &["sleep", "100"], &[]).await;
    let huge = DataFrame { kind: DataKind::Stdin, channel: 1, offset: 0, payload: vec![0u8; 32 << 20].into() };
    conn.raw_lossy(Message::binary(huge.encode())).await;
    let mut conn = server.accept().await;
    let held = conn.hello().await;
    assert_eq!((held.len(), held[0].pid, held[0].stdin_accepted), (1, Some(pid), 0), "nothing of it was taken");
    conn.resume(&[(1, 0)]).await;
    sandboxd.assert_running();
    sandboxd.stop().await;
}
