//! `forward-floor`: the least any server can do with a stream of events — read each producer's
//! lines from loopback TCP and write them to that producer's watchers, whatever is queued in one
//! write per watcher — and nothing else (no storing, no parsing, no framing). The benchmark runs
//! it in its own process and reads its CPU (`floor.rs`): the floor under agenthold's figures for
//! the same load shape. Listens on 127.0.0.1 (an ephemeral port, printed as the first line of
//! stdout). A connection says what it is in its first line: `P <n>` (producer n) or `W <n>`
//! (a watcher of producer n, answered `ok` once subscribed; watchers come before their
//! producer). A slow watcher slows its producer (bounded queues), as agenthold's log does not
//! let a watcher miss a line. Exits when stdin closes.
//!
//! `forward-floor --store <database-url>` is the least a server that keeps a log can do: every
//! line is committed to Postgres before any watcher gets it, by one committer that takes
//! whatever lines are queued and stores them in one statement (group commit, as agenthold's
//! appender does), then hands each to its producer's watchers — still no parsing and no framing.
//! On exit it prints `<lines> lines in <commits> commits`.
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;
use sqlx::Connection as _;
use tokio::io::{AsyncBufReadExt, AsyncReadExt as _, AsyncWriteExt, BufReader};
use tokio::net::TcpListener;
use tokio::sync::mpsc;

/// Lines queued for a watcher before its producer waits.
const BACKLOG_LINES: usize = 1024;
/// Lines queued for the committer before the producers wait.
const COMMIT_QUEUE_LINES: usize = 8192;
/// Most lines stored by one statement.
const COMMIT_MAX_LINES: usize = 4096;
/// Longest line read (the producers' lines are ~100 bytes).
const MAX_LINE_BYTES: u64 = 64 * 1024;
/// The table `--store` writes: the shape of agenthold's `events` (a stream, a sequence number,
/// the payload as JSON, the commit's time), without its foreign keys.
const CREATE_TABLE: &str = "CREATE TABLE IF NOT EXISTS forward_floor_lines (
    producer bigint NOT NULL, seq bigint NOT NULL, payload jsonb NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (producer, seq))";
const INSERT_LINES: &str = "INSERT INTO forward_floor_lines (producer, seq, payload)
    SELECT producer, seq, payload::jsonb FROM UNNEST($1::bigint[], $2::bigint[], $3::text[]) AS l(producer, seq, payload)";

type Line = Arc<Vec<u8>>;
/// Each producer's watchers.
type Watchers = Arc<Mutex<HashMap<u64, Vec<mpsc::Sender<Line>>>>>;
/// A line for the committer: its producer and the line.
type Queued = (u64, Vec<u8>);

/// What the committer has done.
#[derive(Default)]
struct Committed {
    lines: AtomicU64,
    commits: AtomicU64,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let store = match std::env::args().nth(1).as_deref() {
        None => None,
        Some("--store") => Some(std::env::args().nth(2).ok_or("--store needs a database URL")?),
        Some(other) => return Err(format!("unknown argument {other:?}").into()),
    };
    let channels: Watchers = Arc::default();
    let committed = Arc::new(Committed::default());
    let to_committer = match store {
        None => None,
        Some(url) => {
            let mut connection = sqlx::PgConnection::connect(&url).await?;
            sqlx::raw_sql(CREATE_TABLE).execute(&mut connection).await?;
            sqlx::raw_sql("TRUNCATE forward_floor_lines").execute(&mut connection).await?;
            let (sender, receiver) = mpsc::channel(COMMIT_QUEUE_LINES);
            tokio::spawn(commit(connection, receiver, channels.clone(), committed.clone()));
            Some(sender)
        }
    };
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    println!("{}", listener.local_addr()?.port());
    let stdin_closed = async {
        let _ =
            tokio::task::spawn_blocking(|| std::io::Read::read_to_end(&mut std::io::stdin(), &mut Vec::new())).await;
    };
    let storing = to_committer.is_some();
    tokio::select! {
        result = accept(listener, channels, to_committer) => result?,
        () = stdin_closed => {}
    }
    if storing {
        let (lines, commits) = (committed.lines.load(Ordering::Relaxed), committed.commits.load(Ordering::Relaxed));
        println!("{lines} lines in {commits} commits");
    }
    Ok(())
}

async fn accept(
    listener: TcpListener,
    channels: Watchers,
    to_committer: Option<mpsc::Sender<Queued>>,
) -> std::io::Result<()> {
    loop {
        let (socket, _) = listener.accept().await?;
        tokio::spawn(serve(socket, channels.clone(), to_committer.clone()));
    }
}

async fn serve(socket: tokio::net::TcpStream, channels: Watchers, to_committer: Option<mpsc::Sender<Queued>>) {
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
            // Storing, the committer finds the producer's watchers; forwarding, this task does.
            let watchers =
                if to_committer.is_some() { Vec::new() } else { channels.lock().remove(&producer).unwrap_or_default() };
            let mut line = Vec::new();
            loop {
                line.clear();
                match (&mut reader).take(MAX_LINE_BYTES).read_until(b'\n', &mut line).await {
                    Ok(0) | Err(_) => return,
                    Ok(_) => {
                        if let Some(committer) = &to_committer {
                            if committer.send((producer, line.clone())).await.is_err() {
                                return;
                            }
                            continue;
                        }
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

/// The committer: takes whatever lines are queued (at most [`COMMIT_MAX_LINES`]), stores them in
/// one statement (its own transaction), then hands each to its producer's watchers, in order.
/// A failed statement ends the process: a floor that loses lines measures nothing.
async fn commit(
    mut connection: sqlx::PgConnection,
    mut queue: mpsc::Receiver<Queued>,
    channels: Watchers,
    committed: Arc<Committed>,
) {
    let mut next_seq: HashMap<u64, i64> = HashMap::new();
    let mut watchers: HashMap<u64, Vec<mpsc::Sender<Line>>> = HashMap::new();
    let mut batch: Vec<Queued> = Vec::with_capacity(COMMIT_MAX_LINES);
    while queue.recv_many(&mut batch, COMMIT_MAX_LINES).await > 0 {
        let (mut producers, mut seqs, mut payloads) = (Vec::new(), Vec::new(), Vec::new());
        for (producer, line) in batch.drain(..) {
            let seq = next_seq.entry(producer).or_insert(0);
            *seq += 1;
            producers.push(producer as i64);
            seqs.push(*seq);
            payloads
                .push(String::from_utf8(line).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()));
        }
        let stored =
            sqlx::query(INSERT_LINES).bind(&producers).bind(&seqs).bind(&payloads).execute(&mut connection).await;
        if let Err(error) = stored {
            eprintln!("forward-floor: storing {} lines: {error}", producers.len());
            std::process::exit(1);
        }
        committed.lines.fetch_add(producers.len() as u64, Ordering::Relaxed);
        committed.commits.fetch_add(1, Ordering::Relaxed);
        for (producer, payload) in producers.into_iter().zip(payloads) {
            let producer = producer as u64;
            let line = Arc::new(payload.into_bytes());
            let mine =
                watchers.entry(producer).or_insert_with(|| channels.lock().remove(&producer).unwrap_or_default());
            for watcher in mine.iter() {
                let _ = watcher.send(line.clone()).await;
            }
        }
    }
}
