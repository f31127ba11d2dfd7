//! Whatever the server sends, sandboxd does not die.

use agenthold_sandboxd::protocol::{Control, DataKind};
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
    // A signal number that is not one, and a duplicate channel, answered without harm.
    conn.send(&Control::Signal { channel: 1, signal: 12345 }).await;
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
