//! The `agenthold-proxy` binary: parses flags, sets up logging, and either serves the proxy or
//! makes its CA (`ca init`).

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context;
use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "agenthold-proxy", about = "agenthold's egress proxy")]
struct Cli {
    /// Address to listen on.
    #[arg(long, env = "AGENTHOLD_PROXY_LISTEN", default_value = "0.0.0.0:3128", global = true)]
    listen: SocketAddr,
    /// The configuration file (JSON), re-read when it changes.
    #[arg(long, env = "AGENTHOLD_PROXY_CONFIG", global = true)]
    config: Option<PathBuf>,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the proxy (the default).
    Serve,
    /// Manage the proxy's CA.
    Ca {
        #[command(subcommand)]
        command: CaCommand,
    },
}

#[derive(Subcommand)]
enum CaCommand {
    /// Write DIR/ca.pem and DIR/ca-key.pem (0600) unless both exist.
    Init {
        /// The directory.
        #[arg(long)]
        out: PathBuf,
        /// A host the CA may issue for (its name constraints); repeatable. Default: the
        /// provider presets.
        #[arg(long = "host")]
        hosts: Vec<String>,
        /// Add the provider presets to the given hosts.
        #[arg(long)]
        with_presets: bool,
    },
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    match cli.command.unwrap_or(Command::Serve) {
        Command::Ca { command: CaCommand::Init { out, hosts, with_presets } } => {
            let mut all: Vec<String> = hosts;
            if all.is_empty() || with_presets {
                all.extend(agenthold_proxy::ca::PRESET_HOSTS.iter().map(|h| (*h).to_owned()));
            }
            let made = agenthold_proxy::ca::init(&out, &all).context("making the CA")?;
            println!("{}", if made { "created" } else { "exists" });
            Ok(())
        }
        Command::Serve => {
            let config = cli.config.context("--config or AGENTHOLD_PROXY_CONFIG is required")?;
            let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
            runtime.block_on(async move {
                let listener = tokio::net::TcpListener::bind(cli.listen).await.context("binding the listen address")?;
                agenthold_proxy::run(listener, config, shutdown_signal()).await.context("serving")
            })
        }
    }
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(term) => term,
            Err(_) => {
                let _ = ctrl_c.await;
                return;
            }
        };
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
}
