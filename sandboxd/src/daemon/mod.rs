//! The sandboxd daemon: [`run`] keeps a tunnel connection to the server up (reconnecting
//! forever, with backoff) and feeds one [`state::State`] with the server's messages and the
//! events of the processes and terminals it runs. Processes keep running, and their stdout keeps
//! being buffered, while the server is away.
//!
//! Everything runs on one thread (a current-thread runtime): the run loop is the only owner of
//! the state, and tasks talk to it through two queues (see [`event`]).
//!
//! Liveness: a WebSocket ping goes out every [`Config::ping_interval`]; a server that sends
//! nothing (no message, no pong) for [`Config::silence_limit`], or does not take a message for
//! as long, is taken for gone: the connection is dropped and dialled again.

mod buffer;
mod connection;
mod event;
mod process;
pub mod proxy_ca;
mod queue;
mod reaper;
mod state;
mod stdin;
mod terminal;
mod tls;
mod users;

use std::ffi::OsString;
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::StreamExt as _;
use tokio::signal::unix::{Signal, SignalKind, signal};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::{self, Message};

pub use connection::Token;
use connection::{Backoff, Link, Ws, WsStream};
use event::{BestEffort, Event};
use process::{Children, Sinks};
use state::State;
use users::AccountFiles;

use crate::protocol::{PING_INTERVAL_SECS, SILENT_TUNNEL_SECS};

/// Default cap on unacknowledged stdout bytes per process.
pub const DEFAULT_BUFFER_BYTES: usize = 64 * 1024 * 1024;

/// Capacity of the best-effort output queue, in chunks.
const BEST_EFFORT_QUEUE: usize = 64;

/// How long processes get after SIGTERM on shutdown before SIGKILL.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// Writes one log line to stderr.
pub(crate) fn log(args: std::fmt::Arguments<'_>) {
    eprintln!("sandboxd: {args}");
}

/// sandboxd's configuration.
#[derive(Clone)]
pub struct Config {
    /// The server's tunnel endpoint (`ws://host:port/tunnel`, or `wss://` for TLS).
    pub tunnel_url: String,
    /// This sandbox's token.
    pub token: Token,
    /// Cap on unacknowledged stdout bytes held per process.
    pub buffer_bytes: usize,
    /// A ping goes out this often.
    pub ping_interval: Duration,
    /// A server silent for this long (no message, no pong; or not taking a message) is gone.
    pub silence_limit: Duration,
    /// Whom the tunnel trusts, for a `wss://` URL (`None` for `ws://`: no TLS set up at all).
    pub tls: Option<Arc<rustls::ClientConfig>>,
    /// The image's environment (sandboxd's own less `AGENTHOLD_*`), under every process's.
    pub image_env: Vec<(OsString, OsString)>,
}

impl std::fmt::Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Config")
            .field("tunnel_url", &self.tunnel_url)
            .field("buffer_bytes", &self.buffer_bytes)
            .field("ping_interval", &self.ping_interval)
            .field("silence_limit", &self.silence_limit)
            .finish_non_exhaustive()
    }
}

/// A positive number from the environment variable `name`, or `default` when it is unset.
fn positive(name: &str, default: u64) -> Result<u64, String> {
    match std::env::var(name) {
        Ok(text) => match text.trim().parse::<u64>() {
            Ok(n) if n > 0 => Ok(n),
            _ => Err(format!("{name} must be a positive whole number")),
        },
        Err(_) => Ok(default),
    }
}

impl Config {
    /// Reads `AGENTHOLD_TUNNEL_URL`, `AGENTHOLD_SANDBOX_TOKEN` and the optional
    /// `AGENTHOLD_SANDBOXD_BUFFER_BYTES`, `AGENTHOLD_TUNNEL_CA_FILE` and `AGENTHOLD_TUNNEL_CA_PEM`
    /// (extra CAs in PEM for `wss://`), `AGENTHOLD_PING_INTERVAL_MS` and `AGENTHOLD_SILENT_TUNNEL_MS` (for tests; default
    /// [`PING_INTERVAL_SECS`] and [`SILENT_TUNNEL_SECS`]); the rest of the environment is the
    /// image's.
    pub fn from_env() -> Result<Self, String> {
        let var = |name: &str| std::env::var(name).map_err(|_| format!("{name} is not set"));
        let buffer_bytes = positive("AGENTHOLD_SANDBOXD_BUFFER_BYTES", DEFAULT_BUFFER_BYTES as u64)?;
        let ping_ms = positive("AGENTHOLD_PING_INTERVAL_MS", PING_INTERVAL_SECS * 1000)?;
        let silence_ms = positive("AGENTHOLD_SILENT_TUNNEL_MS", SILENT_TUNNEL_SECS * 1000)?;
        let ca_file = std::env::var_os("AGENTHOLD_TUNNEL_CA_FILE").filter(|v| !v.is_empty()).map(PathBuf::from);
        let ca_pem = std::env::var("AGENTHOLD_TUNNEL_CA_PEM").ok().filter(|v| !v.trim().is_empty());
        let tunnel_url = var("AGENTHOLD_TUNNEL_URL")?;
        let tls = if tunnel_url.get(..6).is_some_and(|scheme| scheme.eq_ignore_ascii_case("wss://")) {
            Some(tls::client_config(ca_file.as_deref(), ca_pem.as_deref())?)
        } else {
            None
        };
        Ok(Self {
            tunnel_url,
            token: Token::new(var("AGENTHOLD_SANDBOX_TOKEN")?),
            buffer_bytes: usize::try_from(buffer_bytes).unwrap_or(usize::MAX),
            ping_interval: Duration::from_millis(ping_ms),
            silence_limit: Duration::from_millis(silence_ms),
            tls,
            image_env: users::image_environment(std::env::vars_os()),
        })
    }

    /// How often the run loop looks at the connection's liveness.
    fn tick(&self) -> Duration {
        (self.ping_interval.min(self.silence_limit) / 4).clamp(Duration::from_millis(10), Duration::from_secs(1))
    }
}

type Connecting = Pin<Box<dyn Future<Output = Result<Ws, connection::Refused>> + Send>>;

/// Where the connection is.
enum Conn {
    /// Waiting before the next attempt.
    Waiting(Pin<Box<tokio::time::Sleep>>),
    /// Dialling.
    Connecting(Connecting),
    /// Connected.
    Up {
        /// Incoming messages.
        stream: WsStream,
        /// Outgoing messages.
        link: Link,
        /// When something last came from the server.
        last_heard: Instant,
        /// When the last ping went out.
        last_ping: Instant,
    },
}

impl Conn {
    fn dial(config: &Config) -> Self {
        Self::dial_to(config.tunnel_url.clone(), config)
    }

    /// Dials `url` (the configured one, or where a redirect sent sandboxd) with the token.
    fn dial_to(url: String, config: &Config) -> Self {
        let (token, tls) = (config.token.clone(), config.tls.clone());
        Self::Connecting(Box::pin(async move { connection::connect(&url, &token, tls).await }))
    }

    fn wait(delay: Duration) -> Self {
        Self::Waiting(Box::pin(tokio::time::sleep(delay)))
    }

    fn link(&mut self) -> Option<&mut Link> {
        match self {
            Self::Up { link, .. } => Some(link),
            _ => None,
        }
    }

    /// The next thing that happens to the connection.
    async fn next(&mut self) -> Input {
        match self {
            Self::Waiting(sleep) => {
                sleep.as_mut().await;
                Input::Retry
            }
            Self::Connecting(attempt) => Input::Connected(attempt.as_mut().await.map(Box::new)),
            Self::Up { stream, .. } => Input::Server(stream.next().await),
        }
    }
}

/// One thing for the run loop to handle.
enum Input {
    Event(Event),
    Best(BestEffort),
    Retry,
    Connected(Result<Box<Ws>, connection::Refused>),
    Server(Option<Result<Message, tungstenite::Error>>),
    Tick,
    Shutdown,
}

/// Connection failures are logged when they change, and every 30th time otherwise.
#[derive(Default)]
struct FailureLog {
    last: Option<String>,
    repeats: u32,
}

impl FailureLog {
    fn failed(&mut self, err: String) {
        if self.last.as_deref() == Some(&err) {
            self.repeats += 1;
            if !self.repeats.is_multiple_of(30) {
                return;
            }
        } else {
            self.repeats = 0;
        }
        log(format_args!("cannot reach the server: {err} (retrying)"));
        self.last = Some(err);
    }
}

/// Runs sandboxd until SIGTERM or SIGINT, then stops what it runs (SIGTERM, and SIGKILL after a
/// grace period) and returns.
pub async fn run(config: Config) -> std::io::Result<()> {
    // Bounded by bytes all the same: a process's stdout reader takes permits of its buffer
    // (`buffer_bytes`) before it reads, so stdout in this queue never exceeds that; the other
    // events are one or a few per process (exit, EOF, stdin progress once its queue drained).
    let (events_tx, mut events) = mpsc::unbounded_channel();
    let (best_tx, mut best) = mpsc::channel(BEST_EFFORT_QUEUE);
    let children = Children::default();
    let reaper = reaper::start(children.clone());
    let uid = rustix::process::getuid();
    // Users are created only as PID 1 (the container's first process): a sandboxd that is a
    // child of the server (the local driver) or runs anywhere else never edits /etc/passwd.
    let in_sandbox = rustix::process::getpid().is_init();
    let sinks = Sinks { events: events_tx, best: best_tx, children };
    let may_create_users = uid.is_root() && in_sandbox;
    let mut state =
        State::new(config.buffer_bytes, may_create_users, AccountFiles::default(), config.image_env.clone(), sinks);
    let mut sigterm: Signal = signal(SignalKind::terminate())?;
    let mut sigint: Signal = signal(SignalKind::interrupt())?;
    let mut tick = tokio::time::interval(config.tick());
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);

    log(format_args!("starting, version {}, pid {}", env!("CARGO_PKG_VERSION"), std::process::id()));
    let mut conn = Conn::dial(&config);
    let mut backoff = Backoff::default();
    let mut failures = FailureLog::default();
    // Whether the attempt in flight follows a redirect (the next is not followed).
    let mut redirected = false;
    let mut shutdown_by: Option<Instant> = None;
    loop {
        let input = tokio::select! {
            Some(event) = events.recv() => Input::Event(event),
            Some(output) = best.recv() => Input::Best(output),
            input = conn.next() => input,
            _ = tick.tick() => Input::Tick,
            _ = sigterm.recv() => Input::Shutdown,
            _ = sigint.recv() => Input::Shutdown,
        };
        match input {
            Input::Event(event) => state.on_event(event, conn.link()).await,
            Input::Best(output) => state.on_best(output, conn.link()).await,
            Input::Retry => {
                redirected = false;
                conn = Conn::dial(&config);
            }
            // The server sent sandboxd to the replica that owns its agent: dial it at once, once
            // (a second redirect is a failure: back to the configured address after the backoff).
            Input::Connected(Err(connection::Refused::Redirect(target))) if !redirected => {
                log(format_args!("the server sent sandboxd to {target}"));
                redirected = true;
                conn = Conn::dial_to(target, &config);
            }
            Input::Connected(Err(connection::Refused::Redirect(target))) => {
                failures.failed(format!("redirected again, to {target}"));
                conn = Conn::wait(backoff.next_delay());
            }
            Input::Connected(Ok(ws)) => {
                log(format_args!("connected to the server"));
                failures = FailureLog::default();
                let (sink, stream) = (*ws).split();
                let mut link = Link::new(sink, config.silence_limit);
                state.hello(&mut link).await;
                let now = Instant::now();
                conn = Conn::Up { stream, link, last_heard: now, last_ping: now };
            }
            Input::Connected(Err(connection::Refused::Failed(err))) => {
                failures.failed(err);
                conn = Conn::wait(backoff.next_delay());
            }
            Input::Server(Some(Ok(message))) => {
                if let Conn::Up { link, last_heard, .. } = &mut conn {
                    *last_heard = Instant::now();
                    let was_live = link.live;
                    state.on_message(message, link).await;
                    if link.live && !was_live {
                        backoff.reset();
                    }
                }
            }
            Input::Server(end) => {
                match end {
                    Some(Err(err)) => log(format_args!("connection lost: {err}")),
                    _ => log(format_args!("connection closed by the server")),
                }
                conn = Conn::wait(backoff.next_delay());
            }
            Input::Tick => {
                if let Conn::Up { link, last_heard, last_ping, .. } = &mut conn {
                    if last_heard.elapsed() > config.silence_limit {
                        let ms = config.silence_limit.as_millis();
                        log(format_args!("no word from the server for {ms} ms; reconnecting"));
                        link.broken = true;
                    } else if last_ping.elapsed() >= config.ping_interval {
                        *last_ping = Instant::now();
                        link.send(Message::Ping(Default::default())).await;
                    }
                }
            }
            Input::Shutdown => {
                if shutdown_by.is_none() {
                    log(format_args!("shutting down: stopping every process"));
                    state.signal_all(15);
                    shutdown_by = Some(Instant::now() + SHUTDOWN_GRACE);
                }
            }
        }
        if conn.link().is_some_and(|link| link.broken) {
            conn = Conn::wait(backoff.next_delay());
        }
        if shutdown_by.is_some_and(|deadline| state.all_done() || Instant::now() >= deadline) {
            state.signal_all(9);
            break;
        }
    }
    if let Some(reaper) = reaper {
        reaper.abort();
    }
    log(format_args!("stopped"));
    Ok(())
}
