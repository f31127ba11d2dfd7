//! The benchmark's settings (flags or environment variables; `scripts/bench/run.sh` sets them).

use std::path::PathBuf;

use agenthold_cli::secret::Token;
use clap::Parser;

/// What to benchmark and how hard.
#[derive(Debug, Clone, Parser)]
#[command(name = "agenthold-bench", about = "Measures an agenthold server; prints one JSON object on stdout")]
pub struct Config {
    /// The server's API, `http://host:port` (a server of its own: the benchmark creates and
    /// deletes agents there).
    #[arg(long, env = "AGENTHOLD_URL", default_value = "http://127.0.0.1:17800")]
    pub url: String,
    /// An admin token of that server.
    #[arg(long, env = "AGENTHOLD_TOKEN", hide_env_values = true, value_parser = agenthold_cli::secret::parse_token)]
    pub token: Token,
    /// A scratch database with the migrations applied, on the same Postgres as the server's
    /// (the raw-insert baseline writes there).
    #[arg(long, env = "BENCH_SCRATCH_DATABASE_URL")]
    pub scratch_database_url: String,
    /// The server's own database (optional: the replay floor reads the replayed session's rows
    /// there, `replay_floor_events_per_s`).
    #[arg(long, env = "BENCH_DATABASE_URL")]
    pub database_url: Option<String>,
    /// The server's `AGENTHOLD_INSTANCE` (its containers are `<instance>-<agent id>`).
    #[arg(long, env = "AGENTHOLD_INSTANCE", default_value = "bench")]
    pub instance: String,
    /// The sandbox image (for the bare `docker run` baseline).
    #[arg(long, env = "AGENTHOLD_IMAGE", default_value = "agenthold/test:latest")]
    pub image: String,
    /// The server's metrics listener, `http://host:port` (optional: `metrics_scrape_ms`).
    #[arg(long, env = "BENCH_METRICS_URL")]
    pub metrics_url: Option<String>,
    /// A second replica of the same server, `http://host:port` (optional: `cross_replica_p99_ms`,
    /// the latency run with its watchers there).
    #[arg(long, env = "BENCH_REPLICA_URL")]
    pub replica_url: Option<String>,
    /// The server's pid, to report the CPU it used during the flood (optional).
    #[arg(long, env = "BENCH_SERVER_PID")]
    pub server_pid: Option<u32>,
    /// Events in the throughput flood (`flood N 0`).
    #[arg(long, default_value_t = 20_000)]
    pub flood_events: u64,
    /// Stream watchers during the flood and the latency run.
    #[arg(long, default_value_t = 10)]
    pub watchers: usize,
    /// Events in the latency run.
    #[arg(long, default_value_t = 5_000)]
    pub latency_events: u64,
    /// Rate of the latency run, events per second.
    #[arg(long, default_value_t = 1_000)]
    pub latency_rate: u64,
    /// Stored events a watcher replays from seq 0.
    #[arg(long, default_value_t = 100_000)]
    pub replay_events: i64,
    /// Rows per INSERT (and per transaction) in the raw-insert baseline.
    #[arg(long, default_value_t = 1_000)]
    pub raw_batch: usize,
    /// Repetitions of the start-up measurements (cold start, docker run, harness start, wake);
    /// the median is reported.
    #[arg(long, default_value_t = 3)]
    pub repeats: usize,
    /// Run only this part (`multi`: the single flood's CPU baseline, then the `multi` loads).
    #[arg(long, env = "BENCH_ONLY", value_enum)]
    pub only: Option<Only>,
    /// Agents in the large `multi` load (`multi_100`); 0 leaves it out.
    #[arg(long, default_value_t = 100)]
    pub multi_big_agents: usize,
    /// Sessions (one per warm agent) in the `load` part; 0 leaves it out.
    #[arg(long, env = "BENCH_LOAD_SESSIONS", default_value_t = 100)]
    pub load_sessions: usize,
    /// Watchers per session in the `load` part.
    #[arg(long, env = "BENCH_LOAD_WATCHERS", default_value_t = 10)]
    pub load_watchers: usize,
    /// Events per second per session in the `load` part.
    #[arg(long, env = "BENCH_LOAD_RATE", default_value_t = 5)]
    pub load_rate: u64,
    /// How long the `load` part streams (`make chaos`: 300).
    #[arg(long, env = "BENCH_LOAD_SECONDS", default_value_t = 60)]
    pub load_seconds: u64,
    /// The `scale` part's levels: agents held (all but the first 10 asleep) when it measures,
    /// comma-separated, grown one after the other.
    #[arg(long, env = "BENCH_SCALE_AGENTS", value_delimiter = ',', default_value = "10,100,1000")]
    pub scale_agents: Vec<usize>,
    /// Events of the `scale` part's flood (Postgres bytes per stored event).
    #[arg(long, env = "BENCH_SCALE_FLOOD_EVENTS", default_value_t = 200_000)]
    pub scale_flood_events: u64,
    /// Where the `scale` part writes its chart (SVG).
    #[arg(long, env = "BENCH_SCALE_SVG", default_value = ".dev/bench/scale.svg")]
    pub scale_svg: PathBuf,
    /// A second place for that chart (e.g. `docs/img/scale.svg`); unset: none.
    #[arg(long, env = "BENCH_SCALE_PLOT")]
    pub scale_plot: Option<PathBuf>,
}

/// A part of the benchmark run on its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Only {
    /// The many-agents loads and the flood they are compared with.
    Multi,
    /// The `load` part alone (`make chaos`).
    Load,
    /// The start-up figures alone: docker run, cold, pooled and harness start, wake.
    Startup,
    /// The event log's figures beside their floors alone: the flood against the raw insert, the
    /// replay against the replay floor.
    Log,
    /// The creation figures and their floors alone: docker run, 50 × (network + docker run) in
    /// parallel beside a burst of 50 agents, and 20 cold starts one second apart.
    Creation,
    /// What the server costs at 10, 100 and 1,000 agents, most of them asleep
    /// (`--scale-agents`), and per million stored events.
    Scale,
}
