//! Running as a user, and creating it when the image lacks it. sandboxd only creates users as
//! PID 1, so this runs it as PID 1 of a new PID + mount namespace (`unshare`) whose `/etc/passwd`,
//! `/etc/group` and `/home` are bind mounts of a temp dir: the host's files are never touched.

use std::os::unix::fs::MetadataExt as _;

use agenthold_sandboxd::protocol::{Control, DataKind};
use tokio::process::Command;

use crate::harness::{Conn, Msg, Sandboxd, Server, skip_unless_unshare};

const SETUP: &str = "set -e; mount --bind \"$D/passwd\" /etc/passwd; mount --bind \"$D/group\" /etc/group; \
                     mount --bind \"$D/home\" /home; exec \"$0\"";

async fn run_as(conn: &mut Conn, channel: u32, user: &str, script: &str) -> String {
    conn.send(&Control::Start {
        channel,
        argv: vec!["sh".into(), "-c".into(), script.into()],
        env: vec![],
        cwd: "/".into(),
        user: Some(user.into()),
    })
    .await;
    conn.expect("started", |m| match m {
        Msg::Control(Control::Started { channel: c, .. }) if *c == channel => Some(()),
        Msg::Control(Control::StartFailed { channel: c, message }) if *c == channel => panic!("{message}"),
        _ => None,
    })
    .await;
    let (status, end) = conn.exited(channel).await;
    assert_eq!(status.code, Some(0));
    String::from_utf8(conn.output(DataKind::Stdout, channel, 0, end as usize).await).expect("utf8")
}

#[tokio::test]
async fn missing_user_is_created_with_its_home_and_processes_run_as_it() {
    if skip_unless_unshare(&["--mount", "--pid", "--fork", "--mount-proc"]) {
        return;
    }
    let dir = std::env::temp_dir().join(format!("sandboxd-users-test-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("home/agent")).expect("dirs"); // root-owned, like a fresh volume
    std::fs::write(dir.join("passwd"), "root:x:0:0:root:/root:/bin/sh\nnode:x:1000:1000::/home/node:/bin/sh\n")
        .expect("passwd");
    std::fs::write(dir.join("group"), "root:x:0:\nnode:x:1000:\n").expect("group");

    let server = Server::start().await;
    let mut wrapper = Command::new("unshare");
    wrapper
        .args(["--mount", "--pid", "--fork", "--mount-proc", "--kill-child=SIGTERM", "--", "sh", "-c", SETUP])
        .env("D", &dir);
    let sandboxd = Sandboxd::start_wrapped(wrapper, &server.url, &[]).await;
    let mut conn = server.accept().await;
    conn.handshake().await;

    let out = run_as(&mut conn, 1, "agent", "id -u; id -g; id -un; echo $HOME $USER $LOGNAME; cd && pwd").await;
    assert_eq!(out, "1001\n1001\nagent\n/home/agent agent agent\n/home/agent\n");
    let passwd = std::fs::read_to_string(dir.join("passwd")).expect("passwd");
    assert!(
        passwd.ends_with("agent:x:1001:1001::/home/agent:/bin/bash\n")
            || passwd.ends_with("agent:x:1001:1001::/home/agent:/bin/sh\n"),
        "{passwd}"
    );
    assert!(std::fs::read_to_string(dir.join("group")).expect("group").ends_with("agent:x:1001:\n"));
    let home = std::fs::metadata(dir.join("home/agent")).expect("home");
    assert_eq!((home.uid(), home.gid()), (1001, 1001), "the root-owned home was handed over");

    // Second start: the user exists now, and is not created twice; an existing user works too.
    assert_eq!(run_as(&mut conn, 2, "agent", "id -u").await, "1001\n");
    assert_eq!(run_as(&mut conn, 3, "node", "id -un").await, "node\n");
    assert_eq!(
        std::fs::read_to_string(dir.join("passwd"))
            .expect("passwd")
            .lines()
            .filter(|l| l.starts_with("agent:"))
            .count(),
        1
    );

    // A terminal as the user.
    conn.send(&Control::OpenTerminal {
        channel: 4,
        cols: 80,
        rows: 24,
        argv: vec!["sh".into()],
        env: vec![],
        cwd: "/home/agent".into(),
        user: Some("agent".into()),
    })
    .await;
    conn.send_data(DataKind::TerminalInput, 4, 0, b"echo uid=$(id -u)\nexit\n").await;
    let mut seen = String::new();
    while !seen.contains("uid=1001") {
        let frame = conn
            .expect("terminal output", |m| match m {
                Msg::Data(f) if f.kind == DataKind::TerminalOutput && f.channel == 4 => Some(f.clone()),
                Msg::Control(Control::StartFailed { message, .. }) => panic!("{message}"),
                _ => None,
            })
            .await;
        seen.push_str(&String::from_utf8_lossy(&frame.payload));
    }
    conn.expect("closed", |m| matches!(m, Msg::Control(Control::TerminalClosed { channel: 4 })).then_some(())).await;

    sandboxd.stop().await;
    std::fs::remove_dir_all(&dir).ok();
}
