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
    let lines = config::stderr_lines();
    // A few lines are written before serving (they are on stderr before the first answer, as a
    // harness's start-up complaints are); a flood goes on beside serving.
    let write = move || {
        use std::io::Write as _;
        let mut err = std::io::BufWriter::new(std::io::stderr().lock());
        for n in 1..=lines {
            if writeln!(err, "fakeagent: stderr line {n} of {lines}").is_err() {
                return;
            }
        }
        let _ = err.flush();
    };
    match lines {
        0 => {}
        1..=1000 => write(),
        _ => drop(std::thread::spawn(write)),
    }
    let agent = agent::Agent::new(config, wire::Out::new(Box::new(std::io::stdout())));
    match agent.serve(std::io::stdin().lock()) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("fakeagent: cannot read stdin: {e}");
            1
        }
    }
}
