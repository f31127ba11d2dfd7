//! `agenthold`: parses the configuration, starts logging, runs the server until SIGTERM/SIGINT
//! (or runs a subcommand, such as `agenthold secrets rotate`).

use clap::Parser;

use agenthold_server::config::{Command, Config, SecretsCommand};

/// mimalloc in place of glibc's allocator: the event path allocates and frees a JSON tree per
/// harness line, and glibc's free lists (`malloc_consolidate`, `unlink_chunk`) took a third of
/// the server's CPU under a flood (docs/benchmarks.md, "The flood's allocations"). Built without
/// asking for transparent huge pages (`no_thp`): each span it gave back and touched again had the
/// kernel zero 2 MiB, 14 % of the server's CPU under a flood ("The flood's ceiling").
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> anyhow::Result<()> {
    let config = Config::parse();
    let workers = config.runtime_workers();
    tokio::runtime::Builder::new_multi_thread().worker_threads(workers).enable_all().build()?.block_on(serve(config))
}

async fn serve(mut config: Config) -> anyhow::Result<()> {
    agenthold_server::telemetry::init();
    tracing::info!(workers = config.runtime_workers(), "the server's async work runs on this many threads");
    if let Some(command) = config.command.take() {
        let Command::Secrets(SecretsCommand::Rotate { old_key_file, new_key_file }) = command;
        let report =
            agenthold_server::secrets::rotate::run(config.database_url.expose(), &old_key_file, &new_key_file).await?;
        println!("{report}");
        return Ok(());
    }
    let listeners = agenthold_server::app::Listeners::bind(&config).await?;
    agenthold_server::app::run(config, listeners, agenthold_server::app::shutdown_signal()).await
}
