//! The proxy's integration tests: a real proxy on loopback, local stand-ins for the providers.

mod support;

mod attacks;
mod cut;
mod edges;
mod injection;
mod logs;
mod reload;
mod server_route;
mod tunnels;
