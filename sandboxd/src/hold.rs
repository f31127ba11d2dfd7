//! `sandboxd hold`: what an agent's network holder runs (the server's Docker driver, see
//! `server/src/sandbox/docker_netns.rs`). It does nothing but stay alive, so that the container
//! it is PID 1 of keeps the agent's network namespace while the sandbox sleeps; it ends on
//! `SIGTERM` or `SIGINT` (PID 1 has no default action for them, so it must ask for them).

use tokio::signal::unix::{SignalKind, signal};

/// Waits for `SIGTERM` or `SIGINT`. Errs only when the signals cannot be watched.
pub async fn hold() -> std::io::Result<()> {
    let mut terminate = signal(SignalKind::terminate())?;
    let mut interrupt = signal(SignalKind::interrupt())?;
    tokio::select! {
        _ = terminate.recv() => {}
        _ = interrupt.recv() => {}
    }
    Ok(())
}
