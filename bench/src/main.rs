//! `agenthold-bench`: runs the benchmarks against a server of its own and prints one JSON
//! object on stdout (progress on stderr). `scripts/bench/run.sh` (`make bench`) sets it up.

use clap::Parser;

use agenthold_bench::config::Config;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let config = Config::parse();
    let report = agenthold_bench::run(config).await?;
    println!("{report}");
    Ok(())
}
