//! Integration tests against a real `agenthold` process, real Postgres and (by default) a real
//! Docker engine, with the real sandboxd and fakeagent speaking ACP over the real tunnel.

mod bad_input;
mod edges_input;
mod edges_login;
mod edges_origin;
mod edges_stream;
mod edges_terminal;
mod edges_tunnel;
mod failures;
mod lifecycle;
mod people;
mod restart;
mod stream;
mod support;
mod takeover;
mod turns;
