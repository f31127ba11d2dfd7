//! The test side of the tunnel: a real WebSocket server on 127.0.0.1:0 speaking the protocol,
//! and the real `sandboxd` binary started against it. Every wait has a deadline.

use std::collections::HashMap;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agenthold_sandboxd::protocol::{Control, DataFrame, DataKind, ExitStatus, ProcessState, ResumeFrom};
use futures_util::{SinkExt as _, StreamExt as _};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio::process::{Child, Command};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::handshake::server::{Request, Response};

/// How long any single wait may take.
pub const DEADLINE: Duration = Duration::from_secs(10);

/// The token the tests hand sandboxd.
pub const TOKEN: &str = "test-token-123";

/// A message from sandboxd.
#[derive(Debug, Clone, PartialEq)]
pub enum Msg {
    /// A text frame.
    Control(Control),
    /// A binary frame.
    Data(DataFrame),
}

/// Path and `Authorization` header of a handshake request.
type SeenRequest = (String, Option<String>);

/// A connection's byte stream: plain TCP or TLS over it.
pub trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

/// The listening side.
pub struct Server {
    listener: TcpListener,
    /// `ws://127.0.0.1:<port>/tunnel`.
    pub url: String,
}

impl Server {
    /// Binds 127.0.0.1:0.
    pub async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let port = listener.local_addr().expect("local addr").port();
        Self { listener, url: format!("ws://127.0.0.1:{port}/tunnel") }
    }

    /// Accepts one TCP connection, without a handshake.
    pub async fn accept_tcp(&self) -> TcpStream {
        let (stream, _) = tokio::time::timeout(DEADLINE, self.listener.accept())
            .await
            .expect("sandboxd connects in time")
            .expect("accept");
        stream
    }

    /// Accepts one TCP connection if one comes within `wait`.
    pub async fn try_accept_tcp(&self, wait: Duration) -> Option<TcpStream> {
        let (stream, _) = tokio::time::timeout(wait, self.listener.accept()).await.ok()?.expect("accept");
        Some(stream)
    }

    /// Accepts one connection and completes the WebSocket handshake.
    pub async fn accept(&self) -> Conn {
        let stream = self.accept_tcp().await;
        Self::handshake(Box::new(stream)).await
    }

    /// Completes the WebSocket handshake on an accepted stream.
    pub async fn handshake(stream: Box<dyn Io>) -> Conn {
        let seen: Arc<Mutex<Option<SeenRequest>>> = Arc::default();
        let record = seen.clone();
        #[expect(clippy::result_large_err, reason = "the signature tungstenite's Callback wants")]
        let callback = move |request: &Request, response: Response| {
            let auth = request.headers().get("authorization").and_then(|v| v.to_str().ok()).map(str::to_owned);
            *record.lock().expect("lock") = Some((request.uri().path().to_owned(), auth));
            Ok(response)
        };
        let ws = tokio::time::timeout(DEADLINE, tokio_tungstenite::accept_hdr_async(stream, callback))
            .await
            .expect("handshake in time")
            .expect("handshake");
        let (path, authorization) = seen.lock().expect("lock").take().expect("request seen");
        Conn { ws, path, authorization, pending: Vec::new(), pings: 0 }
    }
}

/// One accepted tunnel connection.
pub struct Conn {
    ws: WebSocketStream<Box<dyn Io>>,
    /// The request path.
    pub path: String,
    /// The `Authorization` header sandboxd sent.
    pub authorization: Option<String>,
    /// Messages received while waiting for something else.
    pending: Vec<Msg>,
    /// WebSocket pings received so far (answered by tungstenite while the test reads).
    pub pings: usize,
}

impl Conn {
    /// The next message (pending ones first); panics after the deadline.
    pub async fn recv(&mut self) -> Msg {
        if !self.pending.is_empty() {
            return self.pending.remove(0);
        }
        self.recv_fresh().await
    }

    async fn recv_fresh(&mut self) -> Msg {
        loop {
            let message = tokio::time::timeout(DEADLINE, self.ws.next())
                .await
                .expect("a message from sandboxd in time")
                .expect("connection open")
                .expect("message");
            match message {
                Message::Text(text) => {
                    return Msg::Control(serde_json::from_str(&text).expect("sandboxd sends valid control JSON"));
                }
                Message::Binary(bytes) => {
                    return Msg::Data(DataFrame::decode(bytes).expect("valid data frame"));
                }
                Message::Ping(_) => self.pings += 1,
                _ => {}
            }
        }
    }

    /// Waits for a message matching `pick`, keeping the others for later [`Conn::recv`]s.
    pub async fn expect<T>(&mut self, what: &str, mut pick: impl FnMut(&Msg) -> Option<T>) -> T {
        if let Some(i) = self.pending.iter().position(|m| pick(m).is_some()) {
            let msg = self.pending.remove(i);
            return pick(&msg).expect("picked");
        }
        let deadline = tokio::time::Instant::now() + DEADLINE;
        loop {
            let msg = tokio::time::timeout_at(deadline, self.recv_fresh())
                .await
                .unwrap_or_else(|_| panic!("waiting for {what}; got meanwhile {:?}", self.pending));
            if let Some(found) = pick(&msg) {
                return found;
            }
            self.pending.push(msg);
        }
    }

    /// Sends a control message.
    pub async fn send(&mut self, control: &Control) {
        let text = serde_json::to_string(control).expect("encode");
        self.raw(Message::text(text)).await;
    }

    /// Sends a data frame.
    pub async fn send_data(&mut self, kind: DataKind, channel: u32, offset: u64, payload: &[u8]) {
        let frame = DataFrame { kind, channel, offset, payload: bytes::Bytes::copy_from_slice(payload) };
        self.raw(Message::binary(frame.encode())).await;
    }

    /// Sends any WebSocket message.
    pub async fn raw(&mut self, message: Message) {
        tokio::time::timeout(DEADLINE, self.ws.send(message)).await.expect("send in time").expect("send");
    }

    /// Sends any WebSocket message; the peer may close the connection meanwhile.
    pub async fn raw_lossy(&mut self, message: Message) {
        let _ = tokio::time::timeout(DEADLINE, self.ws.send(message)).await.expect("send in time");
    }

    /// Waits for `Hello` (must be the first message) and returns its process list.
    pub async fn hello(&mut self) -> Vec<ProcessState> {
        match self.recv().await {
            Msg::Control(Control::Hello { protocol, version, processes }) => {
                assert_eq!(protocol, agenthold_sandboxd::protocol::PROTOCOL_VERSION);
                assert!(!version.is_empty());
                processes
            }
            other => panic!("expected hello, got {other:?}"),
        }
    }

    /// Sends `Resume` for `(channel, offset)` pairs.
    pub async fn resume(&mut self, channels: &[(u32, u64)]) {
        let channels = channels.iter().map(|&(channel, offset)| ResumeFrom { channel, offset }).collect();
        self.send(&Control::Resume { channels }).await;
    }

    /// Hello + an empty Resume.
    pub async fn handshake(&mut self) {
        self.hello().await;
        self.resume(&[]).await;
    }

    /// Starts `argv` on `channel` (user `None`, cwd `/tmp`) and returns its pid.
    pub async fn start(&mut self, channel: u32, argv: &[&str], env: &[(&str, &str)]) -> u32 {
        self.send(&Control::Start {
            channel,
            argv: argv.iter().map(|s| (*s).to_owned()).collect(),
            env: env.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect(),
            cwd: "/tmp".into(),
            user: None,
        })
        .await;
        self.expect("started", |m| match m {
            Msg::Control(Control::Started { channel: c, pid }) if *c == channel => Some(*pid),
            Msg::Control(Control::StartFailed { channel: c, message }) if *c == channel => {
                panic!("start failed: {message}")
            }
            _ => None,
        })
        .await
    }

    /// Collects `kind` output of `channel` until `len` bytes from `from` arrived; checks that the
    /// frames are contiguous from `from` (no gap, no duplicate).
    pub async fn output(&mut self, kind: DataKind, channel: u32, from: u64, len: usize) -> Vec<u8> {
        let mut out = Vec::new();
        while out.len() < len {
            let frame = self
                .expect(&format!("{kind:?} of channel {channel} at {}", from + out.len() as u64), |m| match m {
                    Msg::Data(f) if f.kind == kind && f.channel == channel => Some(f.clone()),
                    _ => None,
                })
                .await;
            assert_eq!(
                frame.offset,
                from + out.len() as u64,
                "contiguous {kind:?}, so far {:?}",
                String::from_utf8_lossy(&out)
            );
            out.extend_from_slice(&frame.payload);
        }
        assert_eq!(out.len(), len, "no more than asked: {:?}", String::from_utf8_lossy(&out));
        out
    }

    /// Waits for `Exited` of `channel`.
    pub async fn exited(&mut self, channel: u32) -> (ExitStatus, u64) {
        self.expect(&format!("exited {channel}"), |m| match m {
            Msg::Control(Control::Exited { channel: c, status, stdout_end }) if *c == channel => {
                Some((*status, *stdout_end))
            }
            _ => None,
        })
        .await
    }

    /// No message of `channel` (other than `allow`) is pending or arrives within `quiet`.
    pub async fn assert_quiet(&mut self, quiet: Duration, about: impl Fn(&Msg) -> bool) {
        assert!(!self.pending.iter().any(&about), "unexpected: {:?}", self.pending);
        if let Ok(msg) = tokio::time::timeout(quiet, self.recv_fresh()).await {
            assert!(!about(&msg), "unexpected: {msg:?}");
            self.pending.push(msg);
        }
    }
}

/// The real sandboxd binary. Dropping it sends SIGTERM, so sandboxd stops what it runs even when
/// a test fails.
pub struct Sandboxd {
    child: Child,
    /// The pid to signal: sandboxd's own (differs from `child` when it runs under a wrapper).
    target: u32,
}

impl Sandboxd {
    /// Starts sandboxd against `url`, with extra environment. `SANDBOXD_BIN` overrides the
    /// binary (e.g. to measure a release build).
    pub fn start(url: &str, extra_env: &[(&str, &str)]) -> Self {
        Self::spawn(url, extra_env, false)
    }

    /// Like [`Sandboxd::start`], but sandboxd's environment is only the tunnel variables and
    /// `env` (as in a container, where it is the image's `ENV`).
    pub fn start_with_only(url: &str, env: &[(&str, &str)]) -> Self {
        Self::spawn(url, env, true)
    }

    fn spawn(url: &str, extra_env: &[(&str, &str)], clean: bool) -> Self {
        let binary = std::env::var("SANDBOXD_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_sandboxd").to_owned());
        let mut command = Command::new(binary);
        if clean {
            command.env_clear();
        }
        Self::configure(&mut command, url, extra_env);
        let child = command.spawn().expect("spawn sandboxd");
        let target = child.id().expect("pid");
        Self { child, target }
    }

    /// Starts sandboxd as the last argument of `wrapper` (e.g. `unshare ... --`); `find` maps
    /// the wrapper's pid to sandboxd's.
    pub async fn start_wrapped(mut wrapper: Command, url: &str, extra_env: &[(&str, &str)]) -> Self {
        wrapper.arg(env!("CARGO_BIN_EXE_sandboxd"));
        Self::configure(&mut wrapper, url, extra_env);
        let child = wrapper.spawn().expect("spawn the wrapper");
        let outer = child.id().expect("pid");
        let mut target = 0;
        until("sandboxd under its wrapper", || {
            target = process_table().iter().find(|(_, (ppid, _))| *ppid == outer).map_or(0, |(pid, _)| *pid);
            target != 0
        })
        .await;
        Self { child, target }
    }

    fn configure(command: &mut Command, url: &str, extra_env: &[(&str, &str)]) {
        command
            .env("AGENTHOLD_TUNNEL_URL", url)
            .env("AGENTHOLD_SANDBOX_TOKEN", TOKEN)
            .envs(extra_env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::inherit())
            .stderr(Stdio::inherit());
    }

    /// sandboxd's pid.
    pub fn pid(&self) -> u32 {
        self.target
    }

    /// Panics if sandboxd has exited.
    pub fn assert_running(&mut self) {
        assert!(self.child.try_wait().expect("try_wait").is_none(), "sandboxd is still running");
    }

    fn terminate(&self) {
        if let Some(pid) = i32::try_from(self.target).ok().and_then(rustix::process::Pid::from_raw) {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
        }
    }

    /// SIGTERM (sandboxd stops what it runs) and waits for a clean exit.
    pub async fn stop(mut self) {
        self.terminate();
        let status = tokio::time::timeout(DEADLINE, self.child.wait()).await.expect("sandboxd stops in time");
        assert!(status.expect("wait").success(), "sandboxd exits cleanly on SIGTERM");
    }
}

impl Drop for Sandboxd {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            self.terminate();
        }
    }
}

/// Whether a process with `pid` exists and is not a zombie.
pub fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat.rfind(')').and_then(|i| stat[i + 1..].split_whitespace().next()) != Some("Z"),
        Err(_) => false,
    }
}

/// Waits until `check` holds, polling; panics after the deadline.
pub async fn until(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + DEADLINE;
    while !check() {
        assert!(tokio::time::Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// `(ppid, state)` of every process, by pid.
pub fn process_table() -> HashMap<u32, (u32, char)> {
    let mut table = HashMap::new();
    for entry in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let Some(i) = stat.rfind(')') else { continue };
        let mut fields = stat[i + 1..].split_whitespace();
        let state = fields.next().and_then(|s| s.chars().next()).unwrap_or('?');
        let ppid = fields.next().and_then(|s| s.parse().ok()).unwrap_or(0);
        table.insert(pid, (ppid, state));
    }
    table
}

/// What a skipped test lacks: it decides whether `AGENTHOLD_SKIPS_FATAL=1` fails it (the rules
/// of the API tests' `server/tests/api/support/skip.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lacks {
    /// Something `make test` sets up itself (root): fatal under `AGENTHOLD_SKIPS_FATAL=1`.
    Setup,
    /// Something a machine may lack for good (a kernel feature, namespaces a container may not
    /// make). Never fatal.
    Feature,
}

/// Records that the running test skips, and why: `SKIPPED <test>: <reason>` on stderr, and
/// appended to the file `AGENTHOLD_SKIP_LOG` names (nextest keeps a passing test's output to
/// itself: that file is how `make test` counts and lists the skips). The caller then returns.
/// Panics instead when the test lacks a [`Lacks::Setup`] and `AGENTHOLD_SKIPS_FATAL=1`.
pub fn skip(lacks: Lacks, reason: &str) {
    use std::io::Write as _;
    // libtest runs each test on a thread named after it (a `#[tokio::test]` body runs on it).
    let thread = std::thread::current();
    let test = thread.name().unwrap_or("an unnamed test");
    let line = format!("SKIPPED {}::{} {test}: {reason}", env!("CARGO_PKG_NAME"), env!("CARGO_CRATE_NAME"));
    assert!(
        lacks != Lacks::Setup || std::env::var("AGENTHOLD_SKIPS_FATAL").as_deref() != Ok("1"),
        "{line}\n(AGENTHOLD_SKIPS_FATAL=1: `make test` provides this, so the test must run, not skip)"
    );
    eprintln!("{line}");
    if let Some(path) = std::env::var_os("AGENTHOLD_SKIP_LOG").filter(|p| !p.is_empty()) {
        // One append per line: the test processes nextest runs at once interleave whole lines.
        let appended = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .and_then(|mut file| file.write_all(format!("{line}\n").as_bytes()));
        if let Err(error) = appended {
            eprintln!("could not append to AGENTHOLD_SKIP_LOG ({}): {error}", path.to_string_lossy());
        }
    }
}

/// Skips the running test (see [`skip`]) unless `unshare <args> true` works here; whether it
/// did. New namespaces need root ([`Lacks::Setup`]) and, as root, a kernel and a container that
/// allow them ([`Lacks::Feature`]).
pub fn skip_unless_unshare(args: &[&str]) -> bool {
    if !rustix::process::geteuid().is_root() {
        skip(Lacks::Setup, &format!("needs root: it runs sandboxd in new namespaces (`unshare {}`)", args.join(" ")));
        return true;
    }
    let works = std::process::Command::new("unshare")
        .args(args)
        .arg("true")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !works {
        skip(Lacks::Feature, &format!("`unshare {}` does not work here, as root", args.join(" ")));
    }
    !works
}
