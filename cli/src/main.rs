//! `agentholdctl`: parses the command line and runs it (see [`agenthold_cli::cli`]).

use std::process::ExitCode;

use agenthold_cli::cli::Args;
use agenthold_cli::commands::run;
use agenthold_cli::error::EXIT_FAILURE;
use clap::Parser;

fn main() -> ExitCode {
    let args = Args::parse();
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("agentholdctl: starting the runtime: {error}");
            return ExitCode::from(EXIT_FAILURE);
        }
    };
    match runtime.block_on(run(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            eprintln!("agentholdctl: {failure:#}");
            ExitCode::from(failure.exit_code())
        }
    }
}
