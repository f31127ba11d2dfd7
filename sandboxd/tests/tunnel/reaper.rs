//! sandboxd as PID 1 (in a new PID namespace via `unshare`): orphans are reaped, and the exit
//! statuses of its own children are not stolen.

use agenthold_sandboxd::protocol::DataKind;
use tokio::process::Command;

use crate::harness::{Sandboxd, Server, process_table, skip_unless_unshare, until};

#[tokio::test]
async fn pid_one_reaps_orphans_but_not_its_own_children() {
    if skip_unless_unshare(&["--pid", "--fork", "--mount-proc"]) {
        return;
    }
    let server = Server::start().await;
    let mut unshare = Command::new("unshare");
    unshare.args(["--pid", "--fork", "--mount-proc", "--kill-child=SIGTERM", "--"]);
    let sandboxd = Sandboxd::start_wrapped(unshare, &server.url, &[]).await;
    let mut conn = server.accept().await;
    conn.handshake().await;

    // Each shell leaves an orphan behind (re-parented to PID 1) and exits with its own code.
    for channel in 1..=5u32 {
        let script = format!("(sleep 0.2 </dev/null >/dev/null 2>&1 &); echo $$; exit {}", 10 + channel);
        conn.start(channel, &["sh", "-c", &script], &[]).await;
    }
    for channel in 1..=5u32 {
        let (status, end) = conn.exited(channel).await;
        assert_eq!(status.code, Some(10 + channel as i32), "own child's status reported, not stolen");
        assert!(end > 0);
        let _ = conn.output(DataKind::Stdout, channel, 0, end as usize).await;
    }
    // The orphaned sleeps had sandboxd as parent: once they end they must be reaped (a zombie
    // would stay a child of sandboxd forever).
    let pid = sandboxd.pid();
    until("every orphan ended and was reaped", || !process_table().values().any(|(ppid, _)| *ppid == pid)).await;
    sandboxd.stop().await;
}
