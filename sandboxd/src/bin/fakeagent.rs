//! fakeagent: a scripted ACP agent on stdin/stdout (see `docs/fakeagent.md`). `fakeagent
//! --login` is its terminal login method: it writes `~/.fakeagent/login` and says so.

use agenthold_sandboxd::fakeagent::{Config, run_stdio};

fn main() {
    if std::env::args().nth(1).as_deref() == Some("--login") {
        std::process::exit(login());
    }
    std::process::exit(run_stdio(Config::from_env()));
}

/// The terminal login: a token file in the home directory, as a real harness's login leaves.
fn login() -> i32 {
    let Some(home) = std::env::var_os("HOME") else {
        eprintln!("fakeagent: no HOME to sign in to");
        return 1;
    };
    let dir = std::path::Path::new(&home).join(".fakeagent");
    let written = std::fs::create_dir_all(&dir).and_then(|()| std::fs::write(dir.join("login"), "signed in\n"));
    match written {
        Ok(()) => {
            println!("fakeagent: signed in");
            0
        }
        Err(e) => {
            eprintln!("fakeagent: cannot sign in: {e}");
            1
        }
    }
}
