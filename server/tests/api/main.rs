//! Integration tests against a real `agenthold` process, real Postgres and (by default) a real
//! Docker engine, with the real sandboxd and fakeagent speaking ACP over the real tunnel.

mod bad_input;
mod failures;
mod lifecycle;
mod people;
mod restart;
mod stream;
mod support;
mod takeover;
mod tunnel_tls;
mod turns;
