//! Integration tests for the `fakeagent` binary: each test runs the real binary with piped
//! stdio and its own temporary HOME, and talks ACP to it as a client would.

#![expect(clippy::unwrap_used, reason = "tests fail loudly on unexpected shapes")]

mod fetch;
mod protocol;
mod script;
mod sessions;
mod support;
