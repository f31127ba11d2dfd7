//! Starting processes: stdout/stderr/exit, the environment, stdin, signals.

use std::time::Duration;

use agenthold_sandboxd::protocol::{Control, DataKind, ExitStatus};

use crate::harness::{Msg, Sandboxd, Server, TOKEN, alive, until};

#[tokio::test]
async fn hello_then_stdout_stderr_and_exit() {
    let server = Server::start().await;
    let sandboxd = Sandboxd::start(&server.url, &[]);
    let mut conn = server.accept().await;
    assert_eq!(conn.path, "/tunnel");
    assert_eq!(conn.authorization.as_deref(), Some(format!("Bearer {TOKEN}").as_str()));
    assert_eq!(conn.hello().await, vec![], "a fresh sandboxd holds nothing");
    conn.resume(&[]).await;

    conn.start(1, &["sh", "-c", "echo hello; echo err >&2; exit 3"], &[]).await;
    assert_eq!(conn.output(DataKind::Stdout, 1, 0, 6).await, b"hello\n");
    assert_eq!(conn.output(DataKind::Stderr, 1, 0, 4).await, b"err\n");
    let (status, stdout_end) = conn.exited(1).await;
    assert_eq!(status, ExitStatus { code: Some(3), signal: None });
    assert_eq!(stdout_end, 6);
    conn.send(&Control::Forget { channel: 1 }).await;
    sandboxd.stop().await;
}

#[tokio::test]
async fn environment_is_exactly_what_was_given_plus_login_defaults() {
    let server = Server::start().await;
    let sandboxd = Sandboxd::start(&server.url, &[]);
    let mut conn = server.accept().await;
    conn.handshake().await;

    conn.start(1, &["env"], &[("FOO", "bar"), ("HOME", "/somewhere")]).await;
    let (_, end) = conn.exited(1).await;
    let text = String::from_utf8(conn.output(DataKind::Stdout, 1, 0, end as usize).await).expect("utf8");
    let mut keys: Vec<&str> = text.lines().filter_map(|l| l.split('=').next()).collect();
    keys.sort_unstable();
    assert_eq!(keys, ["FOO", "HOME", "LOGNAME", "PATH", "USER"], "{text}");
    assert!(text.contains("HOME=/somewhere\n"), "given values win: {text}");
    assert!(text.contains("PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\n"), "{text}");

    conn.start(2, &["pwd"], &[]).await;
    assert_eq!(conn.output(DataKind::Stdout, 2, 0, 5).await, b"/tmp\n");

    conn.send(&Control::Start {
        channel: 3,
        argv: vec!["/no/such/program".into()],
        env: vec![],
        cwd: "/tmp".into(),
        user: None,
    })
    .await;
    conn.expect("start failed", |m| matches!(m, Msg::Control(Control::StartFailed { channel: 3, .. })).then_some(()))
        .await;
    sandboxd.stop().await;
}

#[tokio::test]
async fn stdin_round_trip_with_cat() {
    let server = Server::start().await;
    let sandboxd = Sandboxd::start(&server.url, &[]);
    let mut conn = server.accept().await;
    conn.handshake().await;

    conn.start(4, &["cat"], &[]).await;
    conn.send_data(DataKind::Stdin, 4, 0, b"abc\n").await;
    let written = |want: u64| {
        move |m: &Msg| match m {
            Msg::Control(Control::StdinWritten { channel: 4, offset }) if *offset == want => Some(()),
            _ => None,
        }
    };
    conn.expect("stdin written 4", written(4)).await;
    assert_eq!(conn.output(DataKind::Stdout, 4, 0, 4).await, b"abc\n");

    // A resend of what was written is ignored; the next frame goes on.
    conn.send_data(DataKind::Stdin, 4, 0, b"abc\n").await;
    conn.send_data(DataKind::Stdin, 4, 4, b"def\n").await;
    conn.expect("stdin written 8", written(8)).await;
    conn.send(&Control::CloseStdin { channel: 4 }).await;
    let (status, end) = conn.exited(4).await;
    assert_eq!((status.code, end), (Some(0), 8));
    assert_eq!(conn.output(DataKind::Stdout, 4, 4, 4).await, b"def\n", "no duplicate of abc");
    sandboxd.stop().await;
}

#[tokio::test]
async fn signal_reaches_the_process_group() {
    let server = Server::start().await;
    let sandboxd = Sandboxd::start(&server.url, &[]);
    let mut conn = server.accept().await;
    conn.handshake().await;

    let pid = conn.start(5, &["sleep", "100"], &[]).await;
    assert!(alive(pid));
    conn.send(&Control::Signal { channel: 5, signal: 9 }).await;
    let (status, _) = conn.exited(5).await;
    assert_eq!(status, ExitStatus { code: None, signal: Some(9) });

    // A shell's child is in the shell's group: SIGTERM to the group ends both.
    let pid = conn.start(6, &["sh", "-c", "sleep 100; echo unreachable"], &[]).await;
    let mut sleeper = 0;
    until("the shell's sleep child", || {
        sleeper = crate::harness::process_table().iter().find(|(_, (ppid, _))| *ppid == pid).map_or(0, |(p, _)| *p);
        sleeper != 0
    })
    .await;
    conn.send(&Control::Signal { channel: 6, signal: 15 }).await;
    let (status, end) = conn.exited(6).await;
    assert_eq!((status.signal, end), (Some(15), 0));
    until("the group's sleep is gone", || !alive(sleeper)).await;
    conn.assert_quiet(Duration::from_millis(100), |m| matches!(m, Msg::Data(f) if f.channel == 6)).await;
    sandboxd.stop().await;
}
