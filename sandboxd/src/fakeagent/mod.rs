//! fakeagent: a scripted ACP agent for tests, benchmarks and UI work. It speaks JSON-RPC 2.0
//! (one JSON object per line) on stdin/stdout; every prompt's text is a script of commands
//! (`text`, `write`, `run`, `ask`, `mcp`, `flood`, `crash`, …) it acts out. `docs/fakeagent.md`
//! describes the script language and the `FAKEAGENT_*` environment variables.
//!
//! Threads, not async: one reader thread owns stdin and routes every message; each running
//! prompt has its own thread; stdout is one lock-serialised writer ([`wire::Out`]).

pub mod agent;
pub mod config;
pub mod fetch;
pub mod history;
pub mod mcp;
pub mod script;
pub mod turn;
pub mod wire;

pub use config::Config;

/// Serves ACP on the process's stdin/stdout until stdin ends; returns the exit code.
pub fn run_stdio(config: Config) -> i32 {
    let agent = agent::Agent::new(config, wire::Out::new(Box::new(std::io::stdout())));
    match agent.serve(std::io::stdin().lock()) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("fakeagent: cannot read stdin: {e}");
            1
        }
    }
}
