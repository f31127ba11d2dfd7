//! The server → egress proxy link (docs/proxy.md, "How the server feeds it"). The server owns
//! what the proxy must know and writes it into the proxy's configuration file: one sandbox entry
//! per agent, with the agent's proxy identity ([`identity`]), its allow-list ([`egress`]) and the
//! injection rules of its attached secrets. [`build::build_config`] is the pure mapping, [`file`]
//! the file's shape, [`check`] the check against the proxy's own policy, [`coverage`] whether its
//! CA covers a secret's host (asked when a secret is stored or attached), [`write`] the atomic 0600
//! write, [`task`] the loop that rebuilds on every change, [`gather`] its read of every agent in a
//! few statements, [`sources`] the addresses each agent is admitted from.
//! [`identity::sandbox_proxy_env`] gives a harness the environment that sends its traffic through
//! the proxy.

pub mod build;
pub mod check;
pub mod coverage;
pub mod egress;
pub mod file;
pub mod gather;
pub mod identity;
pub mod sources;
pub mod task;
pub mod write;

pub use build::{AgentInput, Inputs, SecretsInput, build_config};
pub use identity::{Identity, sandbox_proxy_env};
