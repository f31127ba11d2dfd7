//! Integration tests against a real `agenthold` process, real Postgres and (by default) a real
//! Docker engine, with the real sandboxd and fakeagent speaking ACP over the real tunnel.

mod agent_changes;
mod bad_input;
mod custom_image;
mod driver_delete;
mod driver_events;
mod driver_hardening;
mod driver_oom;
mod driver_stale;
mod driver_support;
mod edges_input;
mod edges_login;
mod edges_origin;
mod edges_stream;
mod edges_terminal;
mod edges_tunnel;
mod failures;
mod hardening;
mod lifecycle;
mod people;
mod permissions_flow;
mod proxy_feed;
mod proxy_feed_e2e;
mod proxy_support;
mod restart;
mod sandbox_confinement;
mod sandbox_proxy;
mod secrets_api;
mod secrets_startup;
mod secrets_support;
mod stream;
mod support;
mod takeover;
mod tunnel_tls;
mod turn_limits;
mod turns;
