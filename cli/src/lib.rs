//! `agentholdctl`, a command-line client for the agenthold API: the REST calls as subcommands
//! printing text or JSON, `login`, `watch` (a session's event stream), `prompt --follow` and
//! `exec` (a command typed into an agent's terminal). The binary only parses arguments and calls
//! [`commands::run`]. [`api::Client`] (reqwest and tokio-tungstenite over rustls) is also the
//! benchmark's client.

pub mod api;
pub mod cli;
pub mod commands;
pub mod credentials;
pub mod endpoint;
pub mod error;
pub mod follow;
pub mod login;
pub mod output;
pub mod secret;
pub mod terminal;
pub mod tls;
pub mod watch;
