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
    /// What people call it (`Claude Code`), for the UI.
    pub label: &'static str,
    /// Models it is known to take, most usual first: suggestions (`GET /api/v1/harnesses`); any
    /// name `check_model` accepts may be set.
    pub models: &'static [&'static str],
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
    /// The base image carries it (`agenthold/base`): its agents default to that image.
    pub in_base_image: bool,
    /// The provider logins on the account it takes, most preferred first (one per provider is
    /// delivered: `logins::chosen`).
    pub account_logins: &'static [crate::logins::kinds::LoginKind],
    /// What one idle, started harness holds in memory with its sandbox (MiB; measured:
    /// `<harness>_idle_agent_rss_mib` in docs/benchmarks.md): the warm pool's budget counts it.
    pub idle_mib: u32,
    /// Whether a harness the warm pool starts runs one throwaway turn before its session is
    /// opened ahead (`fleet::pooled_harness::warm`): for a harness whose first prompt in a process
    /// starts services of its own that later prompts reuse.
    pub warm_up_turn: bool,
}

impl Profile {
    /// Nothing to say: no secrets, hosts, logins, install, mode.
    pub const BARE: Profile = Profile {
        label: "",
        models: &[],
        secrets: &[],
        provider_hosts: &[],
        login_dir: None,
        install: None,
        session_mode: None,
        development_only: false,
        in_base_image: false,
        account_logins: &[],
        idle_mib: 64,
        warm_up_turn: false,
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
    /// The terminal command that signs in for a login method the harness advertises without one
    /// (seed 003's `TerminalLoginer`; `logins::methods`). `None`: none.
    fn terminal_login(&self, _method_id: &str) -> Option<Vec<String>> {
        None
    }
    /// Login methods the server may call on its own when the harness asks for authentication
    /// (seed 003's `AutoAuthenticator`): `(method id, the variable that must be in the harness's
    /// environment for it — an attached key's placeholder, say)`.
    fn auto_authenticate(&self) -> &'static [(&'static str, &'static str)] {
        &[]
    }
}

/// The login methods the agent's harness advertised (`init`: its `initialize` answer), each with
/// the terminal command that signs in when the server can run one; plus the adapter's own
/// terminal login (`cli-login`) when the harness advertised none that runs in a terminal.
pub fn login_methods(
    agent: &crate::store::agents::AgentRow,
    init: Option<&serde_json::Value>,
    tools_dir: &str,
    home_dir: &str,
) -> Vec<crate::logins::methods::LoginMethod> {
    let Some(adapter) = adapter(&agent.harness) else { return Vec::new() };
    let context = LaunchContext { agent, tools_dir, home_dir };
    let program = adapter.launch(&context).ok().and_then(|launch| launch.argv.first().cloned());
    let terminal = |id: &str| adapter.terminal_login(id);
    let mut methods = init
        .map(|init| crate::logins::methods::from_initialize(init, program.as_deref(), &terminal))
        .unwrap_or_default();
    if !methods.iter().any(|m| m.terminal.is_some())
        && let Some(argv) = adapter.terminal_login("cli-login")
    {
        methods.push(crate::logins::methods::LoginMethod {
            id: "cli-login".to_owned(),
            name: format!("Sign in with `{}`", argv.join(" ")),
            description: Some("in the agent's terminal; the login stays on its home volume".to_owned()),
            terminal: Some(argv),
        });
    }
    methods
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

/// The login methods the named harness's adapter may call on its own for a process started with
/// variables of these names (those whose key variable is among them).
pub fn automatic_methods(harness: &str, env_names: &[String]) -> Vec<String> {
    adapter(harness)
        .map(|a| a.auto_authenticate())
        .unwrap_or_default()
        .iter()
        .filter(|(_, variable)| env_names.iter().any(|name| name == variable))
        .map(|(method, _)| (*method).to_owned())
        .collect()
}

/// The adapter of this name.
pub fn adapter(name: &str) -> Option<&'static dyn HarnessAdapter> {
    ADAPTERS.iter().copied().find(|adapter| adapter.name() == name)
}

/// The provider login kinds the named harness takes (none for an unknown name).
pub fn account_logins(name: &str) -> &'static [crate::logins::kinds::LoginKind] {
    adapter(name).map(|a| a.profile().account_logins).unwrap_or_default()
}

/// Every adapter, in the order the API lists them.
pub fn all() -> &'static [&'static dyn HarnessAdapter] {
    ADAPTERS
}

/// The names of all adapters, for error messages.
pub fn names() -> Vec<&'static str> {
    ADAPTERS.iter().map(|adapter| adapter.name()).collect()
}

/// The environment a harness process gets: the adapter's, then the agent's own variables. Node
/// sizes its heap from the host's memory, not the container's limit: unless the adapter or the
/// agent sets `NODE_OPTIONS`, it gets `--max-old-space-size` at [`node_heap_mib`] of the agent's
/// memory limit (docs/harnesses.md, "Memory").
pub fn environment(launch: &Launch, agent: &AgentRow, home_dir: &str) -> Vec<(String, String)> {
    let mut env = vec![("HOME".to_owned(), home_dir.to_owned())];
    env.extend(launch.env.iter().cloned());
    env.extend(agent.env.iter().cloned());
    if !launch.env.iter().any(|(name, _)| name == NODE_OPTIONS) {
        env.extend(node_options(agent));
    }
    env
}

/// `NODE_OPTIONS` with the agent's Node heap limit, unless its own `env` sets the variable (the
/// harness's environment, and its terminal's).
pub fn node_options(agent: &AgentRow) -> Option<(String, String)> {
    if agent.env.iter().any(|(name, _)| name == NODE_OPTIONS) {
        return None;
    }
    let heap = node_heap_mib(agent.memory_mib);
    Some((NODE_OPTIONS.to_owned(), format!("--max-old-space-size={heap}")))
}

/// Node's options variable.
const NODE_OPTIONS: &str = "NODE_OPTIONS";

/// The old-generation heap a Node process gets in a sandbox of `memory_mib`: three quarters of
/// it (the rest is Node's other memory and the harness's tools), at least 32 MiB.
pub fn node_heap_mib(memory_mib: i32) -> i64 {
    (i64::from(memory_mib) * 3 / 4).max(32)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Mode;

    fn agent(harness: &str, model: Option<&str>) -> AgentRow {
        AgentRow {
            id: crate::ids::AgentId::new(),
            workspace_id: uuid::Uuid::new_v4(),
            created_by: None,
            name: "a".to_owned(),
            harness: harness.to_owned(),
            command: None,
            model: model.map(str::to_owned),
            posture: None,
            policy: None,
            env: Vec::new(),
            image: "img".to_owned(),
            driver: "docker".to_owned(),
            engine: "local".to_owned(),
            permission_policy: "auto-approve".to_owned(),
            cpus: 1.0,
            memory_mib: 512,
            pids_limit: 64,
            disk_mib: None,
            turn_timeout_secs: None,
            login_user_id: None,
            sandbox_login_at: None,
            auto_sleep_secs: None,
            auth_method: None,
            desired_state: "awake".to_owned(),
            created_at: chrono::Utc::now(),
        }
    }

    fn launch(harness: &str, model: Option<&str>) -> Launch {
        let agent = agent(harness, model);
        let context = LaunchContext { agent: &agent, tools_dir: "/opt/agenthold", home_dir: "/home/agent" };
        adapter(harness).expect("adapter").launch(&context).expect("launch")
    }

    fn env<'a>(launch: &'a Launch, name: &str) -> Option<&'a str> {
        launch.env.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }

    #[test]
    fn fake_is_offered_outside_production_only() {
        assert!(available("fake", Mode::Dev).is_ok() && available("fake", Mode::Test).is_ok());
        let refused = available("fake", Mode::Production).err().expect("refused");
        assert!(refused.contains("development") && !refused.contains("fake,"), "{refused}");
        for name in ["claude-code", "codex", "opencode", "command"] {
            assert!(available(name, Mode::Production).is_ok(), "{name}");
        }
        assert!(available("nope", Mode::Dev).err().expect("unknown").contains("claude-code"));
    }

    #[test]
    fn claude_code_runs_its_acp_adapter_quietly_and_asks_the_gate() {
        let launched = launch("claude-code", Some("claude-x"));
        assert_eq!(launched.argv, ["claude-agent-acp"]);
        assert_eq!(env(&launched, "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"), Some("1"));
        assert_eq!(env(&launched, "ANTHROPIC_MODEL"), Some("claude-x"));
        assert_eq!(adapter("claude-code").expect("adapter").profile().session_mode, Some("default"));
        assert_eq!(env(&launch("claude-code", None), "ANTHROPIC_MODEL"), None);
    }

    #[test]
    fn codex_signs_in_with_its_key_and_asks_before_it_writes() {
        let launched = launch("codex", Some("gpt-x"));
        assert_eq!(
            launched.argv.last().map(String::as_str),
            Some("codex-acp"),
            "codex-acp, through the catalog script"
        );
        let config: serde_json::Value =
            serde_json::from_str(env(&launched, "CODEX_CONFIG").expect("config")).expect("json");
        assert_eq!(config["model"], "gpt-x");
        assert_eq!(adapter("codex").expect("adapter").profile().session_mode, Some("read-only"));
        assert!(env(&launched, "DEFAULT_AUTH_REQUEST").expect("auto auth").contains("api-key"));
    }

    /// Codex's own sandbox cannot start in ours, and switching it off would switch its approvals
    /// off too (codex.rs): the launch keeps mode `read-only`'s approval policy and sandbox (nothing
    /// in the configuration or the environment replaces them) and tells the model to run every
    /// command outside that sandbox, which asks the gate first.
    #[test]
    fn codex_keeps_its_approvals_and_runs_commands_only_through_the_gate() {
        let launched = launch("codex", None);
        let config: serde_json::Value =
            serde_json::from_str(env(&launched, "CODEX_CONFIG").expect("config")).expect("json");
        for key in [
            "sandbox_mode",
            "sandbox_workspace_write",
            "default_permissions",
            "permissions",
            "approval_policy",
            "approvals_reviewer",
            "profile",
            "features",
        ] {
            assert!(config.get(key).is_none(), "CODEX_CONFIG sets {key}: {config}");
        }
        assert_eq!(env(&launched, "INITIAL_AGENT_MODE"), None);
        assert_eq!(adapter("codex").expect("adapter").profile().session_mode, Some("read-only"));
        let instructions = config["developer_instructions"].as_str().expect("developer instructions");
        assert_eq!(instructions, codex::SANDBOX_INSTRUCTIONS);
        assert!(instructions.contains(r#"`sandbox_permissions: "require_escalated"`"#), "{instructions}");
        assert!(instructions.contains("every shell command"), "{instructions}");
    }

    #[test]
    fn opencode_asks_before_edits_commands_and_fetches() {
        let launched = launch("opencode", Some("anthropic/claude-x"));
        assert_eq!(launched.argv, ["opencode", "acp"]);
        let config: serde_json::Value =
            serde_json::from_str(env(&launched, "OPENCODE_CONFIG_CONTENT").expect("config")).expect("json");
        assert_eq!(config["permission"], serde_json::json!({"edit": "ask", "bash": "ask", "webfetch": "ask"}));
        assert_eq!(config["model"], "anthropic/claude-x");
    }

    #[test]
    fn node_harnesses_see_the_container_memory_limit_unless_the_agent_says_otherwise() {
        assert_eq!((node_heap_mib(2048), node_heap_mib(512), node_heap_mib(16)), (1536, 384, 32));
        let mut agent = agent("claude-code", None);
        agent.memory_mib = 2048;
        let launched = launch("claude-code", None);
        let env = environment(&launched, &agent, "/home/agent");
        let options: Vec<&str> = env.iter().filter(|(k, _)| k == "NODE_OPTIONS").map(|(_, v)| v.as_str()).collect();
        assert_eq!(options, ["--max-old-space-size=1536"]);
        agent.env = vec![("NODE_OPTIONS".to_owned(), "--enable-source-maps".to_owned())];
        let env = environment(&launched, &agent, "/home/agent");
        let options: Vec<&str> = env.iter().filter(|(k, _)| k == "NODE_OPTIONS").map(|(_, v)| v.as_str()).collect();
        assert_eq!(options, ["--enable-source-maps"], "the agent's own wins, alone");
    }

    #[test]
    fn no_adapter_puts_a_secret_value_in_its_environment() {
        for name in ["claude-code", "codex", "opencode"] {
            let launched = launch(name, None);
            for (key, _) in &launched.env {
                assert!(!key.ends_with("_API_KEY") && !key.ends_with("_TOKEN"), "{name} sets {key}");
            }
        }
    }
}
