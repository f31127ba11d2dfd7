//! Points a test can crash the server at, to show what a crash there leaves behind: with
//! `AGENTHOLD_MODE=test` and `AGENTHOLD_TEST_CRASH_AT=<point>`, reaching `<point>` aborts the
//! process (as a `SIGKILL` would end it: nothing after it runs, nothing is flushed or closed).
//! In any other mode the variable is ignored.

/// The claim of a pooled harness, after the agent's secrets and proxy identity are bound to the
/// pool's placeholders and before the claim is recorded (`api::warm_claim`).
pub const POOLED_CLAIM_BOUND: &str = "pooled-claim-bound";

/// Aborts the process if the test asked for a crash at `point`.
pub fn reach(point: &str) {
    let test_mode = std::env::var("AGENTHOLD_MODE").is_ok_and(|mode| mode == "test");
    if test_mode && std::env::var("AGENTHOLD_TEST_CRASH_AT").is_ok_and(|at| at == point) {
        eprintln!("agenthold: crashing at {point}, as AGENTHOLD_TEST_CRASH_AT asks (test mode)");
        std::process::abort();
    }
}
