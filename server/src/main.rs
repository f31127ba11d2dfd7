//! `agenthold`: parses the configuration, starts logging, runs the server until SIGTERM/SIGINT.

use clap::Parser;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let config = agenthold_server::config::Config::parse();
    agenthold_server::telemetry::init();
    let listeners = agenthold_server::app::Listeners::bind(&config).await?;
    agenthold_server::app::run(config, listeners, agenthold_server::app::shutdown_signal()).await
}
