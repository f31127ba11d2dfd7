//! sandboxd: the first process in every agenthold sandbox. Reads its configuration from the
//! environment and runs the daemon on a single-threaded runtime (see `agenthold_sandboxd::daemon`).
//! `sandboxd hold` instead only stays alive, as an agent's network holder (`agenthold_sandboxd::hold`).

use std::process::ExitCode;

use agenthold_sandboxd::daemon::{self, Config};

fn main() -> ExitCode {
    if std::env::args_os().nth(1).is_some_and(|arg| arg == "hold") {
        return hold();
    }
    let config = match Config::from_env() {
        Ok(config) => config,
        Err(err) => {
            eprintln!("sandboxd: {err}");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("sandboxd: cannot start the runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    // Before any process starts: the egress proxy's CA in the trust store.
    runtime.block_on(daemon::proxy_ca::install_from_env());
    match runtime.block_on(daemon::run(config)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("sandboxd: {err}");
            ExitCode::FAILURE
        }
    }
}

/// Runs `sandboxd hold` until it is asked to end.
fn hold() -> ExitCode {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build();
    match runtime.and_then(|runtime| runtime.block_on(agenthold_sandboxd::hold::hold())) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("sandboxd hold: {err}");
            ExitCode::FAILURE
        }
    }
}
