//! Harness adapters: how to start each kind of harness in ACP mode and which environment it
//! needs (never secret values). Nothing outside this module knows a particular harness.

mod command;
mod fake;

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

/// One kind of harness.
pub trait HarnessAdapter: Send + Sync {
    /// Its name in the API (`"harness": "<name>"`).
    fn name(&self) -> &'static str;
    /// Checks what an agent was created with.
    fn validate(&self, command: Option<&[String]>) -> Result<(), String>;
    /// How to start it.
    fn launch(&self, context: &LaunchContext<'_>) -> Result<Launch, String>;
}

static ADAPTERS: &[&dyn HarnessAdapter] = &[&fake::Fake, &command::CommandHarness];

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
