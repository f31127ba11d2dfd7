//! Byte pipes: a pass-through tunnel (or an upgraded WebSocket) copied both ways until both
//! sides close, the pipe is idle for too long, or the configuration no longer allows it. A
//! pass-through tunnel's first client bytes go through a check ([`crate::passthrough`]) before
//! anything reaches the upstream.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadHalf};

use crate::host::Target;
use crate::policy::Decision;
use crate::server::{ConnCtx, Credentials};

const BUFFER_BYTES: usize = 64 * 1024;

/// Resolves when the configuration stops allowing `decision` for these credentials and target
/// (a reload removed the sandbox, its allow entry or its rule, or loaded a bad file).
pub fn revoked(
    ctx: ConnCtx,
    credentials: Credentials,
    target: Target,
    decision: Decision,
) -> impl Future<Output = ()> + Send + 'static {
    let mut rx = ctx.shared.policy.clone();
    let peer = ctx.peer.ip();
    async move {
        loop {
            if rx.changed().await.is_err() {
                std::future::pending::<()>().await;
            }
            let state = rx.borrow_and_update().clone();
            let still = credentials
                .sandbox(&state, peer)
                .is_some_and(|(_, sandbox)| sandbox.decide_connect(&target) == decision);
            if !still {
                tracing::info!(%target, "configuration changed; closing the tunnel");
                return;
            }
        }
    }
}

/// Copies `a` ⇄ `b` until both directions end, `idle` passes without a byte, or `stop` resolves.
pub async fn pipe<A, B>(a: A, b: B, idle: Duration, stop: impl Future<Output = ()>)
where
    A: AsyncRead + AsyncWrite + Unpin,
    B: AsyncRead + AsyncWrite + Unpin,
{
    pipe_after(a, b, idle, stop, |a_read| async move { Some((a_read, Vec::new())) }).await;
}

/// Like [`pipe`], but nothing goes from `a` to `b` until `check` has looked at `a`'s first
/// bytes: it gives back the read half and the bytes it read (sent first), or `None` to close
/// the whole pipe. `b` ⇄ `a` flows from the start (a server may speak first).
pub async fn pipe_after<A, B, C, F>(a: A, b: B, idle: Duration, stop: impl Future<Output = ()>, check: C)
where
    A: AsyncRead + AsyncWrite + Unpin,
    B: AsyncRead + AsyncWrite + Unpin,
    C: FnOnce(ReadHalf<A>) -> F,
    F: Future<Output = Option<(ReadHalf<A>, Vec<u8>)>>,
{
    let start = Instant::now();
    let last = Arc::new(AtomicU64::new(0));
    let (a_read, mut a_write) = tokio::io::split(a);
    let (mut b_read, mut b_write) = tokio::io::split(b);
    let refused = tokio::sync::Notify::new();
    let up = async {
        let Some((mut a_read, first)) = check(a_read).await else {
            refused.notify_one();
            return;
        };
        if !first.is_empty() {
            if b_write.write_all(&first).await.is_err() {
                let _ = b_write.shutdown().await;
                return;
            }
            last.store(u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX), Ordering::Relaxed);
        }
        copy(&mut a_read, &mut b_write, &last, start).await;
    };
    let down = copy(&mut b_read, &mut a_write, &last, start);
    let watchdog = async {
        loop {
            let since = Duration::from_millis(last.load(Ordering::Relaxed));
            let deadline = start + since + idle;
            if Instant::now() >= deadline {
                return;
            }
            tokio::time::sleep_until(deadline.into()).await;
        }
    };
    tokio::select! {
        _ = async { tokio::join!(up, down) } => {}
        () = watchdog => {}
        () = stop => {}
        () = refused.notified() => {}
    }
}

async fn copy<R, W>(reader: &mut R, writer: &mut W, last: &AtomicU64, start: Instant)
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut buf = vec![0u8; BUFFER_BYTES];
    loop {
        let n = match reader.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        if writer.write_all(&buf[..n]).await.is_err() {
            break;
        }
        let _ = writer.flush().await;
        last.store(u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX), Ordering::Relaxed);
    }
    let _ = writer.shutdown().await;
}
