//! fakeagent: a scripted ACP agent on stdin/stdout (see `docs/fakeagent.md`).

use agenthold_sandboxd::fakeagent::{Config, run_stdio};

fn main() {
    std::process::exit(run_stdio(Config::from_env()));
}
