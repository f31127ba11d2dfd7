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

/// The image's environment as sandboxd gets it in a container, with its own variables.
const IMAGE_ENV: &[(&str, &str)] = &[
    ("PATH", "/opt/image/bin:/usr/local/bin:/usr/bin:/bin"),
    ("LANG", "C.UTF-8"),
    ("IMAGE_TOOL", "from-image"),
    ("OVERRIDDEN", "from-image"),
    ("HOME", "/image/home"),
    ("AGENTHOLD_SANDBOXD_BUFFER_BYTES", "1000000"),
];

/// `KEY=value` lines as pairs.
fn parse_env(text: &str) -> Vec<(String, String)> {
    text.lines().filter_map(|l| l.split_once('=')).map(|(k, v)| (k.to_owned(), v.to_owned())).collect()
}

/// The home directory of the user the tests run as, if passwd knows it.
fn own_home() -> Option<String> {
    let uid = rustix::process::getuid().as_raw().to_string();
    let passwd = std::fs::read_to_string("/etc/passwd").ok()?;
    passwd
        .lines()
        .map(|l| l.split(':').collect::<Vec<_>>())
        .find(|f| f.len() >= 7 && f[2] == uid)
        .map(|f| f[5].to_owned())
}

/// What a process's environment must be: the image's, less `AGENTHOLD_*`, HOME of its user,
/// the server's values over both.
fn check_environment(text: &str) {
    let env = parse_env(text);
    let get = |k: &str| env.iter().find(|(key, _)| key == k).map(|(_, v)| v.as_str());
    assert_eq!(get("PATH"), Some("/opt/image/bin:/usr/local/bin:/usr/bin:/bin"), "the image's PATH: {text}");
    assert_eq!(get("LANG"), Some("C.UTF-8"), "{text}");
    assert_eq!(get("IMAGE_TOOL"), Some("from-image"), "{text}");
    assert_eq!(get("OVERRIDDEN"), Some("from-server"), "the server's value wins: {text}");
    assert_eq!(get("FOO"), Some("bar"), "{text}");
    if let Some(home) = own_home() {
        assert_eq!(get("HOME"), Some(home.as_str()), "HOME follows the user: {text}");
    }
    assert!(get("USER").is_some() && get("LOGNAME").is_some(), "{text}");
    assert!(!env.iter().any(|(k, _)| k.starts_with("AGENTHOLD_")), "no AGENTHOLD_* variable: {text}");
    assert!(!text.contains(TOKEN), "the sandbox token never reaches a process: {text}");
}

#[tokio::test]
async fn environment_is_the_images_less_sandboxds_own_plus_what_was_given() {
    let server = Server::start().await;
    let sandboxd = Sandboxd::start_with_only(&server.url, IMAGE_ENV);
    let mut conn = server.accept().await;
    conn.handshake().await;

    let given = [("FOO", "bar"), ("OVERRIDDEN", "from-server")];
    conn.start(1, &["env"], &given).await;
    let (_, end) = conn.exited(1).await;
    let text = String::from_utf8(conn.output(DataKind::Stdout, 1, 0, end as usize).await).expect("utf8");
    check_environment(&text);

    // A terminal's shell gets the same.
    conn.send(&Control::OpenTerminal {
        channel: 20,
        cols: 200,
        rows: 50,
        argv: vec!["env".into()],
        env: given.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect(),
        cwd: "/tmp".into(),
        user: None,
    })
    .await;
    let mut seen = Vec::new();
    loop {
        let msg = conn
            .expect("terminal output or close", |m| match m {
                Msg::Data(f) if f.kind == DataKind::TerminalOutput && f.channel == 20 => Some(Some(f.payload.clone())),
                Msg::Control(Control::TerminalClosed { channel: 20 }) => Some(None),
                _ => None,
            })
            .await;
        match msg {
            Some(bytes) => seen.extend_from_slice(&bytes),
            None => break,
        }
    }
    check_environment(&String::from_utf8_lossy(&seen).replace('\r', ""));

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
