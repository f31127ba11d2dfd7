//! What the tests share, none of it a test: the server under test and the helpers around it.
//!
//! - [`server`]: [`TestServer`], a real `agenthold` process on its own database, ports and data
//!   directory, with HTTP and WebSocket clients; the event-list helpers (re-exported here, the
//!   tests' everyday imports).
//! - [`in_process`]: a server built and served in the test's own process, its router driven with
//!   `oneshot` (the routes matrix).
//! - [`docker`]: a Docker driver on an instance of its own, `docker` CLI queries, waiting for a
//!   condition.
//! - [`db_gate`]: a TCP gate between a server and Postgres (an outage as the server sees one).
//! - [`login`]: a loopback HTTPS stand-in for the providers' APIs and their login exchanges.
//! - [`proxy`]: a stand-in for `api.anthropic.com` and the real `agenthold-proxy` binary.
//! - [`secrets`]: users with tokens, secrets, and a look through the database for a value.
//! - [`kube_replay`]: a Kubernetes API server that replays recorded exchanges.
//! - [`skip`]: a test that cannot run here says so and is counted (`make test` lists the skips).

pub mod db_gate;
pub mod docker;
pub mod in_process;
pub mod kube_replay;
pub mod login;
pub mod proxy;
pub mod secrets;
pub mod server;
pub mod skip;

pub use server::{
    TestServer, assert_gap_free, driver, free_port, last_run_output, of_type, remove_docker_objects, seqs, texts,
};
