//! `agentholdctl`, a small command-line client for the agenthold API: the REST calls as
//! subcommands printing JSON, plus `watch` (a session's event stream) and `exec` (a command
//! typed into an agent's terminal). The binary only parses arguments and calls [`cli::run`].

pub mod api;
pub mod cli;
pub mod endpoint;
pub mod error;
pub mod http;
pub mod terminal;
pub mod watch;
