//! Harness adapters: how to start each kind of harness in ACP mode and which environment it
//! needs (never secret values), which secret presets fit it, the hosts it talks to, where it
//! keeps its logins, the mode its sessions are put in so that agenthold's permission gate sees
//! its tool calls, and how to install it in a custom image. Nothing outside this module knows a
//! particular harness (docs/harnesses.md).

mod claude_code;
mod codex;
mod command;
mod fake;
mod opencode;

use crate::store::agents::AgentRow;

/// Where a harness is about to start.
pub struct LaunchContext<'a> {
    /// The agent.
    pub agent: &'a AgentRow,
    /// Where agenthold's tools are inside the sandbox.
    pub tools_dir: &'a str,
    /// The agent's home inside the sandbox.
    pub home_dir: &'a str,
}

/// What to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Launch {
    /// Program and arguments.
    pub argv: Vec<String>,
    /// Environment the adapter adds (the agent's own variables come on top).
    pub env: Vec<(String, String)>,
}

impl Launch {
    /// A launch of `argv` with no environment of the adapter's.
    pub fn argv(argv: Vec<String>) -> Self {
        Self { argv, env: Vec::new() }
    }
}

/// What an adapter says about its harness, for the API and the docs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Profile {
    /// Secret presets that fit it (`anthropic`, `openai`, `openrouter`), with the variable each
    /// is attached under.
    pub secrets: &'static [(&'static str, &'static str)],
    /// Hosts it talks to (its providers' APIs): allowed through the egress proxy.
    pub provider_hosts: &'static [&'static str],
    /// Where in the home directory it keeps its logins (kept across sleep and rebuild).
    pub login_dir: Option<&'static str>,
    /// How to install it in a custom image (a shell command run as root).
    pub install: Option<&'static str>,
    /// The ACP session mode (`session/set_mode`) every session is put in once opened, so that
    /// the harness asks agenthold's gate before it acts (`None`: the harness's own default).
    pub session_mode: Option<&'static str>,
    /// Only for development and tests (refused in production mode).
    pub development_only: bool,
}

impl Profile {
    /// Nothing to say: no secrets, hosts, logins, install, mode.
    pub const BARE: Profile = Profile {
        secrets: &[],
        provider_hosts: &[],
        login_dir: None,
        install: None,
        session_mode: None,
        development_only: false,
    };
}

/// `validate` of an adapter that runs a program of its own: it takes no `command`.
pub(crate) fn no_command(harness: &str, program: &str, command: Option<&[String]>) -> Result<(), String> {
    match command {
        Some(_) => Err(format!("the {harness} harness takes no command (it runs {program})")),
        None => Ok(()),
    }
}

/// One kind of harness.
pub trait HarnessAdapter: Send + Sync {
    /// Its name in the API (`"harness": "<name>"`).
    fn name(&self) -> &'static str;
    /// Checks what an agent was created with.
    fn validate(&self, command: Option<&[String]>) -> Result<(), String>;
    /// How to start it.
    fn launch(&self, context: &LaunchContext<'_>) -> Result<Launch, String>;
    /// What it needs and offers.
    fn profile(&self) -> Profile;
}

static ADAPTERS: &[&dyn HarnessAdapter] =
    &[&claude_code::ClaudeCode, &codex::Codex, &opencode::OpenCode, &fake::Fake, &command::CommandHarness];

/// The adapter of this name, if the server offers it in `mode` (`fake` only outside
/// production).
pub fn available(name: &str, mode: crate::config::Mode) -> Result<&'static dyn HarnessAdapter, String> {
    let adapter =
        adapter(name).ok_or_else(|| format!("unknown harness {name:?}; known: {}", names_in(mode).join(", ")))?;
    if adapter.profile().development_only && mode == crate::config::Mode::Production {
        return Err(format!(
            "the {name} harness is for development and tests only (AGENTHOLD_MODE=dev or test); known: {}",
            names_in(mode).join(", ")
        ));
    }
    Ok(adapter)
}

fn names_in(mode: crate::config::Mode) -> Vec<&'static str> {
    ADAPTERS
        .iter()
        .filter(|a| mode != crate::config::Mode::Production || !a.profile().development_only)
        .map(|a| a.name())
        .collect()
}

/// The model setting an adapter applies through its environment, if the agent has one.
pub(crate) fn model(context: &LaunchContext<'_>) -> Option<String> {
    context.agent.model.clone().filter(|m| !m.is_empty())
}

/// The adapter of this name.
pub fn adapter(name: &str) -> Option<&'static dyn HarnessAdapter> {
    ADAPTERS.iter().copied().find(|adapter| adapter.name() == name)
}

/// The names of all adapters, for error messages.
pub fn names() -> Vec<&'static str> {
    ADAPTERS.iter().map(|adapter| adapter.name()).collect()
}

/// The environment a harness process gets: the adapter's, then the agent's own variables.
pub fn environment(launch: &Launch, agent: &AgentRow, home_dir: &str) -> Vec<(String, String)> {
    let mut env = vec![("HOME".to_owned(), home_dir.to_owned())];
    env.extend(launch.env.iter().cloned());
    env.extend(agent.env.iter().cloned());
    env
}
