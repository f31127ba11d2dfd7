//! The server's configuration: flags and `AGENTHOLD_*` environment variables
//! (docs/configuration.md). A leaf: it names none of the server's other modules; they build their
//! own values from it (`CallerCaps::of`, `SubnetPool::of`, the Kubernetes driver's
//! `Settings::of`).
//!
//! [`Config`] is one flat list of flags (each keeps its name, variable and place in `--help`); the
//! sections hold what the flags of one concern need — their value types, parsers and the
//! helpers deriving settings from them:
//! - [`mode`]: how the server runs (`production`, `dev`, `test`) and the subcommands;
//! - [`listen`]: the listeners, and the tunnel's URL and TLS;
//! - [`sandbox`]: the driver, images, egress, disk limits and agent networks' subnets;
//! - [`limits`]: agents' resource limits and the per-request and WebSocket limits;
//! - [`permissions`]: the default permission posture;
//! - [`auth`]: the public URL and the trusted reverse proxies;
//! - [`proxy`]: the egress proxy's files and address, and test-only upstream stand-ins;
//! - [`kubernetes`]: the Kubernetes driver's defaults;
//! - [`replicas`]: this replica's addresses and its lease.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::Parser;

use crate::secret::Secret;

pub mod auth;
pub mod kubernetes;
pub mod limits;
pub mod listen;
pub mod mode;
pub mod permissions;
pub mod proxy;
pub mod replicas;
pub mod runtime;
pub mod sandbox;

pub use kubernetes::KUBE_SERVER_LABELS;
pub use mode::{Command, Mode, SecretsCommand};
pub use permissions::Posture;
pub use proxy::{UpstreamOverride, UpstreamOverrides};
pub use sandbox::{DiskLimits, DriverKind, Egress, Firewall};

/// The server's configuration.
#[derive(Debug, Clone, Parser)]
#[command(name = "agenthold", version, about = "Runs coding agents in sandboxes and streams their sessions")]
pub struct Config {
    /// A subcommand instead of the server.
    #[command(subcommand)]
    pub command: Option<Command>,
    /// `production` (default), `dev` or `test`. Outside production, a missing master key is made
    /// in the data directory.
    #[arg(long, env = "AGENTHOLD_MODE", value_enum, default_value = "production")]
    pub mode: Mode,
    /// A file holding the 32-byte master key that encrypts secrets (raw, or base64).
    #[arg(long, env = "AGENTHOLD_MASTER_KEY_FILE")]
    pub master_key_file: Option<PathBuf>,
    /// The master key, base64 (prefer the file: the environment of a process is easier to read).
    #[arg(long, env = "AGENTHOLD_MASTER_KEY", hide_env_values = true)]
    pub master_key: Option<Secret>,
    /// Postgres connection URL.
    #[arg(long, env = "DATABASE_URL")]
    pub database_url: Secret,
    /// Where the API listens.
    #[arg(long, env = "AGENTHOLD_LISTEN", default_value = "127.0.0.1:7700")]
    pub listen: SocketAddr,
    /// Where the tunnel listens (sandboxes must reach it).
    #[arg(long, env = "AGENTHOLD_TUNNEL_LISTEN", default_value = "0.0.0.0:7701")]
    pub tunnel_listen: SocketAddr,
    /// The URL sandboxd dials; derived from the driver and the tunnel port when unset (`wss://`
    /// when the tunnel serves TLS).
    #[arg(long, env = "AGENTHOLD_TUNNEL_URL")]
    pub tunnel_url: Option<String>,
    /// The tunnel listener serves TLS (`wss://`) with this certificate chain (PEM); needs
    /// `--tunnel-tls-key`.
    #[arg(long, env = "AGENTHOLD_TUNNEL_TLS_CERT", requires = "tunnel_tls_key")]
    pub tunnel_tls_cert: Option<PathBuf>,
    /// The private key (PEM) of `--tunnel-tls-cert`.
    #[arg(long, env = "AGENTHOLD_TUNNEL_TLS_KEY", requires = "tunnel_tls_cert")]
    pub tunnel_tls_key: Option<PathBuf>,
    /// A PEM file of the CA (or self-signed certificate) sandboxes must trust to dial the TLS
    /// tunnel; the drivers hand it to sandboxd (unset: the public web roots only).
    #[arg(long, env = "AGENTHOLD_TUNNEL_TLS_CA")]
    pub tunnel_tls_ca: Option<PathBuf>,
    /// The sandbox driver.
    #[arg(long, env = "AGENTHOLD_DRIVER", value_enum, default_value = "docker")]
    pub driver: DriverKind,
    /// A JSON file listing the Docker engines sandboxes run on (the local one and remote ones
    /// over TCP with TLS client certificates), each with its capacity (docs/engines.md). Unset:
    /// the local engine only, with no capacity limit. A bad file stops the start.
    #[arg(long, env = "AGENTHOLD_DOCKER_ENGINES")]
    pub docker_engines: Option<PathBuf>,
    /// What Docker sandboxes reach: `confined` (the tunnel and the egress proxy only) or `open`.
    #[arg(long, env = "AGENTHOLD_SANDBOX_EGRESS", value_enum, default_value = "confined")]
    pub sandbox_egress: Egress,
    /// Who installs the host firewall confined sandboxes rely on: `iptables` (the server, at
    /// start) or `external` (the operator).
    #[arg(long, env = "AGENTHOLD_SANDBOX_FIREWALL", value_enum, default_value = "iptables")]
    pub sandbox_firewall: Firewall,
    /// The default sandbox image.
    #[arg(long, env = "AGENTHOLD_IMAGE", default_value = "agenthold/test:latest")]
    pub image: String,
    /// The permission posture of agents that name none (`autonomous`, `guarded`, `approval`;
    /// aliases `auto-approve`, `ask`); unset: `autonomous`.
    #[arg(long, env = "AGENTHOLD_DEFAULT_POSTURE", value_parser = permissions::parse_posture)]
    pub default_posture: Option<Posture>,
    /// A JSON file of the server owner's permission rules (`{"rules": [...]}`), checked before
    /// any agent's, in every posture (docs/permissions.md); the server refuses to start with a
    /// bad one.
    #[arg(long, env = "AGENTHOLD_POLICY_FILE")]
    pub policy_file: Option<PathBuf>,
    /// Refuse the `autonomous` posture: an agent that would run with it fails to start its harness.
    #[arg(long, env = "AGENTHOLD_FORBID_AUTONOMOUS", default_value_t = false, action = clap::ArgAction::Set)]
    pub forbid_autonomous: bool,
    /// Images agents may use besides `AGENTHOLD_IMAGE` and `AGENTHOLD_BASE_IMAGE` (always
    /// allowed), comma-separated: an exact reference (`registry.example.com/team/agent:1.4`) or a
    /// prefix ending in `*` (`registry.example.com/team/*`). Any other image is refused
    /// (`400 IMAGE_NOT_ALLOWED`): images on the engine may be other tenants' or the operator's.
    #[arg(long, env = "AGENTHOLD_ALLOWED_IMAGES", value_delimiter = ',', value_parser = sandbox::parse_image_pattern)]
    pub allowed_images: Vec<String>,
    /// The default image of agents running a harness the base image carries (claude-code,
    /// codex, opencode): `make base-image` builds it.
    #[arg(long, env = "AGENTHOLD_BASE_IMAGE", default_value = "agenthold/base:latest")]
    pub base_image: String,
    /// Where the server keeps files (the generated admin token, local sandboxes).
    #[arg(long, env = "AGENTHOLD_DATA_DIR", default_value = ".dev/data")]
    pub data_dir: PathBuf,
    /// The bootstrap admin token; generated on first start when unset.
    #[arg(long, env = "AGENTHOLD_ADMIN_TOKEN")]
    pub admin_token: Option<Secret>,
    /// Login name of the admin user created on first start.
    #[arg(long, env = "AGENTHOLD_BOOTSTRAP_ADMIN_USER", default_value = "admin")]
    pub bootstrap_admin_user: String,
    /// Password of the admin user created on first start; generated (and written to
    /// `<data dir>/admin-password`) when unset.
    #[arg(long, env = "AGENTHOLD_BOOTSTRAP_ADMIN_PASSWORD")]
    pub bootstrap_admin_password: Option<Secret>,
    /// How long a browser session lasts, in seconds.
    #[arg(long, env = "AGENTHOLD_SESSION_TTL_SECS", default_value_t = 12 * 3600)]
    pub session_ttl_secs: i64,
    /// Directory with the sandboxd and fakeagent binaries (default: next to this binary).
    #[arg(long, env = "AGENTHOLD_SANDBOX_BIN_DIR")]
    pub sandbox_bin_dir: Option<PathBuf>,
    /// Prefix of container, volume and network names (and their `agenthold.instance` label).
    #[arg(long, env = "AGENTHOLD_INSTANCE", default_value = "agenthold")]
    pub instance: String,
    /// Seconds a harness has to start and to answer initialize and session requests.
    #[arg(long, env = "AGENTHOLD_HARNESS_TIMEOUT_SECS", default_value_t = 120)]
    pub harness_timeout_secs: u64,
    /// Seconds of activity a turn may take (waiting in the queue or for a person's answer does
    /// not count); an agent's `limits.turn_seconds` overrides it.
    #[arg(long, env = "AGENTHOLD_TURN_TIMEOUT_SECS", default_value_t = 3600)]
    pub turn_timeout_secs: u64,
    /// The longest turn time limit an agent may set (`limits.turn_seconds`; over it:
    /// `LIMIT_TOO_HIGH`).
    #[arg(long, env = "AGENTHOLD_MAX_TURN_SECS", default_value_t = 86_400, value_parser = clap::value_parser!(i64).range(1..=2_592_000))]
    pub max_turn_secs: i64,
    /// Turns running at once on this server, all agents together (0: no limit). A prompt
    /// beyond it waits with a `TURN_QUEUED` notice in its session; a freed slot goes to the
    /// waiting turn whose workspace runs the fewest turns; a turn waiting for a person's answer
    /// does not hold a slot.
    #[arg(long, env = "AGENTHOLD_MAX_RUNNING_TURNS", default_value_t = 64)]
    pub max_running_turns: usize,
    /// Turns the agents of one workspace may run at once on this server (0: no limit).
    #[arg(long, env = "AGENTHOLD_MAX_RUNNING_TURNS_PER_WORKSPACE", default_value_t = 32)]
    pub max_running_turns_per_workspace: usize,
    /// Turns the agents one user made may run at once on this server (0: no limit).
    #[arg(long, env = "AGENTHOLD_MAX_RUNNING_TURNS_PER_USER", default_value_t = 16)]
    pub max_running_turns_per_user: usize,
    /// Where Prometheus scrapes `GET /metrics` (a listener of its own; unset: no metrics).
    #[arg(long, env = "AGENTHOLD_METRICS_LISTEN")]
    pub metrics_listen: Option<std::net::SocketAddr>,
    /// Sandboxes of the default image kept started and connected for agents not created yet
    /// (Docker driver; 0: none). A new agent of that image takes one (docs/design.md, "Warm pool").
    #[arg(long, env = "AGENTHOLD_WARM_POOL_SIZE", default_value_t = 1, value_parser = clap::value_parser!(u64).range(0..=64))]
    pub warm_pool_size: u64,
    /// Harnesses started ahead, one pooled sandbox each (Docker driver; docs/design.md, "Pooled
    /// harnesses"): comma-separated profiles `harness[@model][:VARIABLE[+VARIABLE…]]` —
    /// `claude-code,codex,opencode@anthropic/claude-sonnet-4-5` — whose variables (default: the
    /// harness's usual key, `ANTHROPIC_API_KEY` for Claude Code) are those an agent attaches its
    /// secrets under when it is created. Empty: none.
    /// Checked when the server starts (`fleet::pooled_harness::parse_profiles`).
    #[arg(long, env = "AGENTHOLD_WARM_POOL_HARNESSES", default_value = "")]
    pub warm_pool_harnesses: String,
    /// The memory the pooled harnesses may hold together, MiB, by each harness's measured idle
    /// size (Claude Code 330, Codex 275, OpenCode 530): each profile keeps one, and one more for
    /// every two of its harnesses claimed in the last minute (at most 4), within this.
    #[arg(long, env = "AGENTHOLD_WARM_POOL_HARNESS_MEMORY_MIB", default_value_t = 2048, value_parser = clap::value_parser!(u64).range(0..=1_048_576))]
    pub warm_pool_harness_memory_mib: u64,
    /// Seconds a pooled sandbox's sandboxd has to connect before the sandbox is removed and
    /// replaced.
    #[arg(long, env = "AGENTHOLD_WARM_POOL_CONNECT_TIMEOUT_SECS", default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub warm_pool_connect_timeout_secs: u64,
    /// Threads that run the server's async work (unset: one per core — `config::runtime`). Blocking work (files, password hashing) has threads of its own.
    #[arg(long, env = "AGENTHOLD_WORKER_THREADS", value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub worker_threads: Option<u16>,
    /// Connections in the server's Postgres pool.
    #[arg(long, env = "AGENTHOLD_DB_POOL_SIZE", default_value_t = 20, value_parser = clap::value_parser!(u32).range(2..=1000))]
    pub db_pool_size: u32,
    /// Connections of the pool that reads the event log's pages (catch-ups, pages, the fan-out
    /// between replicas), on Postgres's generic plans (`store::connect_log_reader`); beside
    /// `db_pool_size`.
    #[arg(long, env = "AGENTHOLD_DB_LOG_READ_POOL_SIZE", default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub db_log_read_pool_size: u32,
    /// Milliseconds a query may wait for a pool connection before it fails (an API call then
    /// answers 503 `DATABASE_UNAVAILABLE`). Outages are answered sooner: see
    /// `store::availability`.
    #[arg(long, env = "AGENTHOLD_DB_ACQUIRE_TIMEOUT_MS", default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(100..))]
    pub db_acquire_timeout_ms: u64,
    /// Requests handled at once per listener (API, tunnel); beyond it: 503 `SERVER_BUSY`.
    #[arg(long, env = "AGENTHOLD_MAX_CONCURRENT_REQUESTS", default_value_t = 1024, value_parser = clap::value_parser!(u64).range(1..))]
    pub max_concurrent_requests: u64,
    /// Of those, how many requests without credentials (logins, webhook deliveries, anything
    /// anonymous) may be handled at once: the rest is kept for signed-in callers.
    #[arg(long, env = "AGENTHOLD_MAX_ANONYMOUS_REQUESTS", default_value_t = 256, value_parser = clap::value_parser!(u64).range(1..))]
    pub max_anonymous_requests: u64,
    /// Requests one caller (one API token, browser session or agent credential) may have in
    /// flight at once; beyond: 429 `TOO_MANY_REQUESTS`.
    #[arg(long, env = "AGENTHOLD_MAX_REQUESTS_PER_CALLER", default_value_t = 64, value_parser = clap::value_parser!(u64).range(1..=100_000))]
    pub max_requests_per_caller: u64,
    /// Requests one agent may have in flight on the MCP route (`wait_turn` holds one).
    #[arg(long, env = "AGENTHOLD_MAX_MCP_REQUESTS_PER_AGENT", default_value_t = 4, value_parser = clap::value_parser!(u64).range(1..=1000))]
    pub max_mcp_requests_per_agent: u64,
    /// Seconds a request's body may take to arrive (plus one per 64 KiB it declares), apart from
    /// the handler's time; beyond: 408 `BODY_READ_TIMEOUT`. The body is read before the request
    /// takes a slot.
    #[arg(long, env = "AGENTHOLD_BODY_READ_SECS", default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..=300))]
    pub body_read_secs: u64,
    /// Seconds one request may take (WebSockets: until they are upgraded); beyond: 503
    /// `REQUEST_TIMEOUT`.
    #[arg(long, env = "AGENTHOLD_REQUEST_TIMEOUT_SECS", default_value_t = 120, value_parser = clap::value_parser!(u64).range(1..))]
    pub request_timeout_secs: u64,
    /// Calls one agent may make to agenthold's MCP tools per minute (per replica); past it a call
    /// is a tool error `RATE_LIMITED` (docs/triggers.md).
    #[arg(long, env = "AGENTHOLD_MCP_CALLS_PER_MINUTE", default_value_t = 120, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub mcp_calls_per_minute: u32,
    /// How often the read-only MCP tools' calls (`list_agents`, `wait_turn`, `read_events`) are
    /// written to the audit log: one `agent.mcp_reads` row per calling agent per period, with
    /// the counts per tool and outcome (`prompt_agent` is audited per call).
    #[arg(long, env = "AGENTHOLD_MCP_READ_AUDIT_SECS", default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub mcp_read_audit_secs: u64,
    /// Turns one agent may start in other agents per hour through the MCP tools; past it
    /// `prompt_agent` is a tool error `BUDGET_EXHAUSTED` (docs/triggers.md).
    #[arg(long, env = "AGENTHOLD_AGENT_PROMPTS_PER_HOUR", default_value_t = 120, value_parser = clap::value_parser!(i64).range(1..=100_000))]
    pub agent_prompts_per_hour: i64,
    /// The largest request body accepted (bytes); beyond: 413.
    #[arg(long, env = "AGENTHOLD_MAX_BODY_BYTES", default_value_t = 4 << 20, value_parser = clap::value_parser!(u64).range(1024..))]
    pub max_body_bytes: u64,
    /// Milliseconds between the scheduler's looks for due schedules (docs/triggers.md); a run
    /// starts at most this long after its time.
    #[arg(long, env = "AGENTHOLD_SCHEDULER_TICK_MS", default_value_t = 1000, value_parser = clap::value_parser!(u64).range(50..=60_000))]
    pub scheduler_tick_ms: u64,
    /// The largest webhook delivery body accepted (bytes); beyond: 413, refused before it is read.
    #[arg(long, env = "AGENTHOLD_WEBHOOK_MAX_BODY_BYTES", default_value_t = 1 << 20, value_parser = clap::value_parser!(u64).range(1024..=(64 << 20)))]
    pub webhook_max_body_bytes: u64,
    /// Seconds between housekeeping rounds (expired browser sessions and old login failures
    /// purged); 0: never.
    #[arg(long, env = "AGENTHOLD_HOUSEKEEPING_SECS", default_value_t = 600)]
    pub housekeeping_secs: u64,
    /// Seconds between the server's checks for ChatGPT logins to refresh.
    #[arg(long, env = "AGENTHOLD_LOGIN_REFRESH_EVERY_SECS", default_value_t = 300)]
    pub login_refresh_every_secs: u64,
    /// A ChatGPT login is refreshed this many seconds before its access token expires.
    #[arg(long, env = "AGENTHOLD_LOGIN_REFRESH_BEFORE_SECS", default_value_t = 3600)]
    pub login_refresh_before_secs: u64,
    /// Seconds a turn past its time limit has to stop after `session/cancel` before its
    /// harness is killed.
    #[arg(long, env = "AGENTHOLD_TURN_CANCEL_GRACE_SECS", default_value_t = 10)]
    pub turn_cancel_grace_secs: u64,
    /// Seconds a sandbox has to connect (back) before its turns fail.
    #[arg(long, env = "AGENTHOLD_RECONNECT_GRACE_SECS", default_value_t = 60)]
    pub reconnect_grace_secs: u64,
    /// Default CPU limit per agent (cores).
    #[arg(long, env = "AGENTHOLD_DEFAULT_CPUS", default_value_t = 2.0)]
    pub default_cpus: f64,
    /// Default memory limit per agent (MiB).
    #[arg(long, env = "AGENTHOLD_DEFAULT_MEMORY_MIB", default_value_t = 2048)]
    pub default_memory_mib: i32,
    /// Default process limit per agent.
    #[arg(long, env = "AGENTHOLD_DEFAULT_PIDS", default_value_t = 512)]
    pub default_pids_limit: i32,
    /// The most CPUs an agent may be given; unset: the host's cores.
    #[arg(long, env = "AGENTHOLD_MAX_CPUS")]
    pub max_cpus: Option<f64>,
    /// The most memory an agent may be given (MiB); unset: half the host's memory.
    #[arg(long, env = "AGENTHOLD_MAX_MEMORY_MIB")]
    pub max_memory_mib: Option<i32>,
    /// The most processes an agent may run.
    #[arg(long, env = "AGENTHOLD_MAX_PIDS", default_value_t = 4096)]
    pub max_pids: i32,
    /// Default disk space of an agent's sandbox (MiB): its home and its writable layer (the files
    /// outside the home) may each hold this much, where the engine can limit them
    /// (docs/security.md, "Disk"); an agent's `limits.disk_mib` overrides it.
    #[arg(long, env = "AGENTHOLD_SANDBOX_DISK_MIB", default_value_t = 10_240, value_parser = clap::value_parser!(i32).range(64..=(1 << 24)))]
    pub sandbox_disk_mib: i32,
    /// The most disk space an agent may be given (MiB).
    #[arg(long, env = "AGENTHOLD_MAX_DISK_MIB", default_value_t = 102_400, value_parser = clap::value_parser!(i32).range(64..=(1 << 24)))]
    pub max_disk_mib: i32,
    /// Disk limits of Docker sandboxes: `auto` (where the engine can enforce them; a warning
    /// says where it cannot), `required` (no sandbox starts on an engine that cannot) or `off`.
    #[arg(long, env = "AGENTHOLD_SANDBOX_DISK_LIMITS", value_enum, default_value = "auto")]
    pub sandbox_disk_limits: DiskLimits,
    /// The most agents one workspace may hold.
    #[arg(long, env = "AGENTHOLD_MAX_AGENTS_PER_WORKSPACE", default_value_t = 100, value_parser = clap::value_parser!(i64).range(1..=1_000_000))]
    pub max_agents_per_workspace: i64,
    /// The most agents one user may create (across workspaces).
    #[arg(long, env = "AGENTHOLD_MAX_AGENTS_PER_USER", default_value_t = 50, value_parser = clap::value_parser!(i64).range(1..=1_000_000))]
    pub max_agents_per_user: i64,
    /// The shortest time between two runs of a schedule, in seconds (a six-field expression
    /// firing every second is refused).
    #[arg(long, env = "AGENTHOLD_SCHEDULE_MIN_INTERVAL_SECS", default_value_t = 60, value_parser = clap::value_parser!(i64).range(1..=86_400))]
    pub schedule_min_interval_secs: i64,
    /// Sessions one agent may hold (`409 QUOTA_EXCEEDED` beyond; a trigger's run that would open
    /// one more is skipped, saying why).
    #[arg(long, env = "AGENTHOLD_MAX_SESSIONS_PER_AGENT", default_value_t = 10_000, value_parser = clap::value_parser!(i64).range(1..=10_000_000))]
    pub max_sessions_per_agent: i64,
    /// Bytes of events the sessions of one agent may store: at or over it no new turn starts
    /// (`409 QUOTA_EXCEEDED`) until sessions are deleted; a running turn finishes.
    #[arg(long, env = "AGENTHOLD_MAX_EVENT_BYTES_PER_AGENT", default_value_t = 1 << 30, value_parser = clap::value_parser!(i64).range(4096..=1 << 40))]
    pub max_event_bytes_per_agent: i64,
    /// Schedules the agents of one workspace may hold.
    #[arg(long, env = "AGENTHOLD_MAX_SCHEDULES_PER_WORKSPACE", default_value_t = 100, value_parser = clap::value_parser!(i64).range(1..=100_000))]
    pub max_schedules_per_workspace: i64,
    /// Webhooks the agents of one workspace may hold.
    #[arg(long, env = "AGENTHOLD_MAX_WEBHOOKS_PER_WORKSPACE", default_value_t = 100, value_parser = clap::value_parser!(i64).range(1..=100_000))]
    pub max_webhooks_per_workspace: i64,
    /// API tokens one user may hold.
    #[arg(long, env = "AGENTHOLD_MAX_TOKENS_PER_USER", default_value_t = 100, value_parser = clap::value_parser!(i64).range(1..=100_000))]
    pub max_tokens_per_user: i64,
    /// The origin browsers use to reach the API (`https://agenthold.example.com`); a
    /// cookie-authenticated WebSocket upgrade must come from it. Unset: the origin of the `Host`
    /// the browser connected to (`http://` or `https://` followed by the `Host` header).
    #[arg(long, env = "AGENTHOLD_PUBLIC_URL", value_parser = auth::parse_public_url)]
    pub public_url: Option<String>,
    /// Reverse proxies in front of the server whose `X-Forwarded-For` is believed (addresses or
    /// networks, comma-separated): the login throttle counts the client address they name.
    /// Unset: the header is ignored and the connection's peer counts.
    #[arg(long, env = "AGENTHOLD_TRUSTED_PROXIES", value_delimiter = ',', value_parser = auth::parse_trusted)]
    pub trusted_proxies: Vec<ipnet::IpNet>,
    /// The built browser UI (`web/dist`, made by `npm run build` in `web/`), served at `/`.
    /// Unset: the checkout's `web/dist` (where this binary was built from).
    #[arg(long, env = "AGENTHOLD_WEB_DIR")]
    pub web_dir: Option<PathBuf>,
    /// Seconds one WebSocket send to a browser or script (stream, terminal) may take before the
    /// socket is closed as stalled.
    #[arg(long, env = "AGENTHOLD_WS_SEND_TIMEOUT_SECS", default_value_t = 10)]
    pub ws_send_timeout_secs: u64,
    /// Seconds of silence (no message, not even a ping) after which a sandbox's tunnel is dropped.
    #[arg(long, env = "AGENTHOLD_SILENT_TUNNEL_SECS", default_value_t = agenthold_sandboxd::protocol::SILENT_TUNNEL_SECS)]
    pub silent_tunnel_secs: u64,
    /// Open files per process in a Docker sandbox (soft and hard `nofile`); default 65536, or
    /// the server's own hard limit if lower. The engine must be allowed at least as many.
    #[arg(long, env = "AGENTHOLD_SANDBOX_NOFILE", value_parser = clap::value_parser!(i64).range(64..=1_048_576))]
    pub sandbox_nofile: Option<i64>,
    /// The OCI runtime Docker sandboxes run under (`runc`, `runsc`, or any the engine has
    /// registered); checked against the engine at start. Root in a sandbox gets sudo only where
    /// it is not root on the host: under gVisor (`runsc`) or on an engine that remaps user
    /// namespaces (docs/security.md, "sudo in a sandbox").
    #[arg(long, env = "AGENTHOLD_SANDBOX_RUNTIME", default_value = sandbox::DEFAULT_RUNTIME,
          value_parser = sandbox::parse_runtime)]
    pub sandbox_runtime: String,
    /// The IPv4 pool agent networks' subnets are cut from (passed to the engine in each network's
    /// IPAM settings), or `engine` to let the engine pick from its own pools.
    #[arg(long, env = "AGENTHOLD_SANDBOX_SUBNET_POOL", default_value = sandbox::DEFAULT_POOL)]
    pub sandbox_subnet_pool: String,
    /// The prefix length of each agent network's subnet (between the pool's and 29).
    #[arg(long, env = "AGENTHOLD_SANDBOX_SUBNET_PREFIX", default_value_t = sandbox::DEFAULT_BLOCK_PREFIX)]
    pub sandbox_subnet_prefix: u8,
    /// At most this many agents on this server (creating one more answers 503 `CAPACITY`);
    /// unset: no limit.
    #[arg(long, env = "AGENTHOLD_MAX_AGENTS", value_parser = clap::value_parser!(u32).range(1..))]
    pub max_agents: Option<u32>,
    /// At most this many sandboxes awake at once on this host (a wake past it waits for one to
    /// sleep, with a `CAPACITY_WAIT` notice); unset: no limit.
    #[arg(long, env = "AGENTHOLD_MAX_AWAKE", value_parser = clap::value_parser!(u32).range(1..))]
    pub max_awake: Option<u32>,
    /// Seconds an agent may stay idle (no turn, no terminal, no prompt or output, no stream opened)
    /// before it is put to sleep; agents may override it (`auto_sleep_secs`); 0: never.
    #[arg(long, env = "AGENTHOLD_AUTO_SLEEP_SECS", default_value_t = 1800)]
    pub auto_sleep_secs: u64,
    /// Seconds between two sweeps for containers, volumes and networks of this instance whose
    /// agent no longer exists; 0: never.
    #[arg(long, env = "AGENTHOLD_ORPHAN_SWEEP_SECS", default_value_t = 600)]
    pub orphan_sweep_secs: u64,
    /// How old (seconds) such an object must be before a sweep removes it.
    #[arg(long, env = "AGENTHOLD_ORPHAN_GRACE_SECS", default_value_t = 600)]
    pub orphan_grace_secs: u64,
    /// This replica's id (docs/replicas.md); unset: the one kept in the data directory (made on
    /// first start), so a restarted server is the same replica and keeps its agents.
    #[arg(long, env = "AGENTHOLD_REPLICA_ID")]
    pub replica_id: Option<uuid::Uuid>,
    /// What sandboxes dial to reach this replica itself (another replica redirects a sandbox
    /// here when this one owns its agent); unset: derived like the tunnel URL from this
    /// replica's own tunnel port, ignoring `AGENTHOLD_TUNNEL_URL`.
    #[arg(long, env = "AGENTHOLD_REPLICA_TUNNEL_URL")]
    pub replica_tunnel_url: Option<String>,
    /// Where this replica serves the calls of the other replicas (forwarded commands, relayed
    /// terminals): its own listener, on the replicas' network — never the public API's. Default:
    /// loopback, any free port (replicas on one host); give an address of the replicas' network
    /// when they run on several.
    #[arg(long, env = "AGENTHOLD_INTERNAL_LISTEN", default_value = "127.0.0.1:0")]
    pub internal_listen: SocketAddr,
    /// Where the other replicas reach this one's internal listener (`http://host:port`, the
    /// replicas' own network); unset: `http://` and `AGENTHOLD_INTERNAL_LISTEN`'s bound address
    /// (127.0.0.1 for 0.0.0.0).
    #[arg(long, env = "AGENTHOLD_REPLICA_URL")]
    pub replica_url: Option<String>,
    /// How long (seconds) an agent stays owned by a replica that stopped heartbeating; another
    /// replica takes its agents over after it.
    #[arg(long, env = "AGENTHOLD_LEASE_TTL_SECS", default_value_t = 15.0, value_parser = replicas::lease_ttl)]
    pub lease_ttl_secs: f64,
    /// Keep the egress proxy's configuration file up to date (docs/proxy.md, "How the server
    /// feeds it").
    #[arg(long, env = "AGENTHOLD_PROXY_FEED", default_value_t = true, action = clap::ArgAction::Set)]
    pub proxy_feed: bool,
    /// The proxy's configuration file the server writes (default `<data dir>/proxy.json`).
    #[arg(long, env = "AGENTHOLD_PROXY_CONFIG_FILE")]
    pub proxy_config_file: Option<PathBuf>,
    /// The proxy's CA directory (`ca.pem`, `ca-key.pem`; made at start when absent; default
    /// `<data dir>/proxy-ca`).
    #[arg(long, env = "AGENTHOLD_PROXY_CA_DIR")]
    pub proxy_ca_dir: Option<PathBuf>,
    /// `host:port` sandboxes reach the proxy at (their `HTTPS_PROXY`). Unset, sandboxes do not
    /// use the proxy (docs/proxy.md, "Sandboxes and the proxy").
    #[arg(long, env = "AGENTHOLD_PROXY_ADDR")]
    pub proxy_addr: Option<String>,
    /// More addresses of the proxy itself (comma-separated), refused as destinations.
    #[arg(long, env = "AGENTHOLD_PROXY_OWN_ADDRS", value_delimiter = ',')]
    pub proxy_own_addrs: Vec<std::net::IpAddr>,
    /// Private or reserved addresses (comma-separated) the proxy may dial all the same for an
    /// allowed host: a package mirror the host's DNS points a registry's name at
    /// (docs/proxy.md, "Mirrors on private addresses").
    #[arg(long, env = "AGENTHOLD_PROXY_ALLOW_ADDRS", value_delimiter = ',')]
    pub proxy_allow_addrs: Vec<std::net::IpAddr>,
    /// Kubernetes driver: the namespace of the sandboxes' objects (unset: the kubeconfig's
    /// namespace, or the server's own when it runs in the cluster).
    #[arg(long, env = "AGENTHOLD_KUBE_NAMESPACE")]
    pub kube_namespace: Option<String>,
    /// Kubernetes driver: the image whose `/agenthold/` holds sandboxd and fakeagent (copied into
    /// each sandbox by an init container; images/tools/Dockerfile).
    #[arg(long, env = "AGENTHOLD_KUBE_TOOLS_IMAGE", default_value = "agenthold/tools:latest")]
    pub kube_tools_image: String,
    /// Kubernetes driver: the storage class of agents' home claims (unset: the cluster's default).
    #[arg(long, env = "AGENTHOLD_KUBE_STORAGE_CLASS")]
    pub kube_storage_class: Option<String>,
    /// Kubernetes driver: the size of each agent's home claim.
    #[arg(long, env = "AGENTHOLD_KUBE_HOME_SIZE", default_value = "10Gi")]
    pub kube_home_size: String,
    /// Kubernetes driver: labels (`k=v,k=v`) of the server's Pods, which sandboxes may reach on the
    /// tunnel's port (their NetworkPolicy).
    #[arg(long, env = "AGENTHOLD_KUBE_SERVER_LABELS", default_value = KUBE_SERVER_LABELS)]
    pub kube_server_labels: String,
    /// Kubernetes driver: labels (`k=v,k=v`) of the egress proxy's Pods, which sandboxes may reach
    /// on the proxy's port.
    #[arg(long, env = "AGENTHOLD_KUBE_PROXY_LABELS", default_value = KUBE_SERVER_LABELS)]
    pub kube_proxy_labels: String,
    /// Kubernetes driver: the port the egress proxy's Pods listen on (unset: the port of
    /// `AGENTHOLD_PROXY_ADDR`).
    #[arg(long, env = "AGENTHOLD_KUBE_PROXY_PORT")]
    pub kube_proxy_port: Option<u16>,
    /// TEST ONLY: `{"host:port": {"addr": "127.0.0.1:PORT", "ca_cert": "/path.pem"}}` copied into
    /// the proxy's `upstream_overrides`. Refused in production mode.
    #[arg(long, env = "AGENTHOLD_PROXY_TEST_UPSTREAM_OVERRIDES", value_parser = proxy::parse_overrides)]
    pub proxy_test_upstream_overrides: Option<UpstreamOverrides>,
}

/// A configuration parsed from `args` after the program's name, with a database URL and the
/// local driver unless `args` name others (unit tests).
#[cfg(test)]
pub(crate) fn parse(args: &[&str]) -> Result<Config, clap::Error> {
    let base = ["agenthold", "--database-url", "postgres://x", "--driver", "local"];
    Config::try_parse_from(base.iter().chain(args))
}
