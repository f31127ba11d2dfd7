//! `forward-floor`: the least any server can do with a stream of events — read each producer's
//! lines from loopback TCP and write them to that producer's watchers, whatever is queued in one
//! write per watcher — and nothing else (no storing, no parsing, no framing). The benchmark runs
//! it in its own process and reads its CPU (`floor.rs`): the floor under agenthold's figures for
//! the same load shape. Listens on 127.0.0.1 (an ephemeral port, printed as the first line of
//! stdout). A connection says what it is in its first line: `P <n>` (producer n) or `W <n>`
//! (a watcher of producer n, answered `ok` once subscribed; watchers come before their
//! producer). A slow watcher slows its producer (bounded queues), as agenthold's log does not
//! let a watcher miss a line. Exits when stdin closes.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;
use tokio::io::{AsyncBufReadExt, AsyncReadExt as _, AsyncWriteExt, BufReader};
use tokio::net::TcpListener;
use tokio::sync::mpsc;

/// Lines queued for a watcher before its producer waits.
const BACKLOG_LINES: usize = 1024;
/// Longest line read (the producers' lines are ~100 bytes).
const MAX_LINE_BYTES: u64 = 64 * 1024;

type Line = Arc<Vec<u8>>;
/// Each producer's watchers.
type Watchers = Arc<Mutex<HashMap<u64, Vec<mpsc::Sender<Line>>>>>;

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    println!("{}", listener.local_addr()?.port());
    let channels: Watchers = Arc::default();
    let stdin_closed = async {
        let _ =
            tokio::task::spawn_blocking(|| std::io::Read::read_to_end(&mut std::io::stdin(), &mut Vec::new())).await;
    };
    tokio::select! {
        result = accept(listener, channels) => result,
        () = stdin_closed => Ok(()),
    }
}

async fn accept(listener: TcpListener, channels: Watchers) -> std::io::Result<()> {
    loop {
        let (socket, _) = listener.accept().await?;
        tokio::spawn(serve(socket, channels.clone()));
    }
}

async fn serve(socket: tokio::net::TcpStream, channels: Watchers) {
    let _ = socket.set_nodelay(true);
    let mut reader = BufReader::new(socket);
    let mut hello = String::new();
    if reader.read_line(&mut hello).await.is_err() {
        return;
    }
    let mut words = hello.split_whitespace();
    let (Some(role), Some(Ok(producer))) = (words.next(), words.next().map(str::parse::<u64>)) else { return };
    match role {
        "P" => {
            let watchers = channels.lock().remove(&producer).unwrap_or_default();
            let mut line = Vec::new();
            loop {
                line.clear();
                match (&mut reader).take(MAX_LINE_BYTES).read_until(b'\n', &mut line).await {
                    Ok(0) | Err(_) => return,
                    Ok(_) => {
                        let line = Arc::new(line.clone());
                        for watcher in &watchers {
                            let _ = watcher.send(line.clone()).await;
                        }
                    }
                }
            }
        }
        "W" => {
            let (sender, mut receiver) = mpsc::channel(BACKLOG_LINES);
            channels.lock().entry(producer).or_default().push(sender);
            let mut socket = reader.into_inner();
            if socket.write_all(b"ok\n").await.is_err() {
                return;
            }
            let mut out = Vec::new();
            while let Some(line) = receiver.recv().await {
                out.clear();
                out.extend_from_slice(&line);
                while let Ok(more) = receiver.try_recv() {
                    out.extend_from_slice(&more);
                }
                if socket.write_all(&out).await.is_err() {
                    return;
                }
            }
        }
        _ => {}
    }
}
