//! Tests that cannot run here say so, and are counted. [`skip`] prints `SKIPPED <test>: <reason>`
//! to stderr and appends the line to the file `AGENTHOLD_SKIP_LOG` names: nextest keeps a passing
//! test's output to itself, so that file is how `make test` (scripts/dev/test.sh) counts and lists
//! the skips at its end. Under `AGENTHOLD_SKIPS_FATAL=1` (`make test` on CI) a test that lacks
//! something `make test` provides fails instead of skipping.
//!
//! The caller returns from the test after a skip:
//!
//! ```ignore
//! if skip_unless_docker("the local driver sets no memory limit") {
//!     return;
//! }
//! ```
//!
//! (The sandboxd tests have a twin in `sandboxd/tests/tunnel/harness.rs`.)

use std::io::Write as _;

/// What a skipped test lacks: it decides whether `AGENTHOLD_SKIPS_FATAL=1` fails it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lacks {
    /// The driver this run chose (`AGENTHOLD_TEST_DRIVER`) is not the test's; `make test` runs it
    /// on its Docker pass. Never fatal.
    Driver,
    /// Something `make test` sets up itself (root, the Docker engine): fatal under
    /// `AGENTHOLD_SKIPS_FATAL=1`.
    Setup,
    /// Something a machine may lack for good (a kernel or filesystem feature). Never fatal.
    Feature,
}

/// Records that the running test skips, and why; the caller then returns. Panics instead when
/// the test lacks a [`Lacks::Setup`] and `AGENTHOLD_SKIPS_FATAL=1`.
pub fn skip(lacks: Lacks, reason: &str) {
    let line = format!("SKIPPED {}: {reason}", test_name());
    assert!(
        lacks != Lacks::Setup || std::env::var("AGENTHOLD_SKIPS_FATAL").as_deref() != Ok("1"),
        "{line}\n(AGENTHOLD_SKIPS_FATAL=1: `make test` provides this, so the test must run, not skip)"
    );
    eprintln!("{line}");
    if let Some(path) = std::env::var_os("AGENTHOLD_SKIP_LOG").filter(|p| !p.is_empty()) {
        // One append per line: the test processes nextest runs at once interleave whole lines.
        let appended = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .and_then(|mut file| file.write_all(format!("{line}\n").as_bytes()));
        if let Err(error) = appended {
            eprintln!("could not append to AGENTHOLD_SKIP_LOG ({}): {error}", path.to_string_lossy());
        }
    }
}

/// Skips the running test (see [`skip`]) unless the tests run on the Docker driver; whether it
/// did. `why`: what the test needs of Docker.
pub fn skip_unless_docker(why: &str) -> bool {
    let driver = super::driver();
    if driver == "docker" {
        return false;
    }
    skip(Lacks::Driver, &format!("Docker driver only (this run: AGENTHOLD_TEST_DRIVER={driver}): {why}"));
    true
}

/// Skips the running test (see [`skip`]) unless it runs as root; whether it did. `why`: what
/// the test needs root for.
pub fn skip_unless_root(why: &str) -> bool {
    if rustix::process::geteuid().is_root() {
        return false;
    }
    skip(Lacks::Setup, &format!("needs root: {why}"));
    true
}

/// The running test as nextest names it (`agenthold-server::api module::test`): libtest runs
/// each test on a thread named after it, and a `#[tokio::test]` body runs on that thread.
fn test_name() -> String {
    let thread = std::thread::current();
    let test = thread.name().unwrap_or("an unnamed test");
    format!("{}::{} {test}", env!("CARGO_PKG_NAME"), env!("CARGO_CRATE_NAME"))
}
