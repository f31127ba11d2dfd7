//! The command line (clap): global options and subcommands. [`crate::commands::run`] performs
//! them.

use std::path::PathBuf;

use clap::{Args as ClapArgs, Parser, Subcommand};

use crate::secret::Token;

/// A command-line client for the agenthold API. Prints text, or the server's JSON with `--json`;
/// errors go to stderr with the API's error code. Exit codes: 0 ok, 1 an HTTP error or other
/// failure, 2 bad usage, 3 a timeout; `prompt --follow`: 4 the turn was cancelled, 5 it ended in an
/// error, 6 it stopped for another reason.
#[derive(Debug, Parser)]
#[command(name = "agentholdctl", version)]
pub struct Args {
    /// The server's base URL, http:// or https:// (default: the one `login` stored, else
    /// http://127.0.0.1:7700).
    #[arg(long, global = true, help_heading = "Global options", env = "AGENTHOLD_URL")]
    pub url: Option<String>,
    /// API token, sent as `Authorization: Bearer <token>` (default: the one `login` stored for
    /// this server).
    #[arg(long, global = true, help_heading = "Global options", env = "AGENTHOLD_TOKEN", hide_env_values = true, value_parser = crate::secret::token_from_arg)]
    pub token: Option<Token>,
    /// A PEM file of CA certificates to trust (besides the built-in roots) for https:// and wss://.
    #[arg(long, global = true, help_heading = "Global options", env = "AGENTHOLD_CA_FILE", value_name = "PEM")]
    pub ca_file: Option<PathBuf>,
    /// Deadline in seconds for connecting to the server.
    #[arg(
        long,
        global = true,
        help_heading = "Global options",
        env = "AGENTHOLD_CONNECT_TIMEOUT",
        default_value_t = 10.0,
        value_name = "SECS"
    )]
    pub connect_timeout: f64,
    /// Deadline in seconds for one REST request, and for opening a WebSocket.
    #[arg(
        long,
        global = true,
        help_heading = "Global options",
        env = "AGENTHOLD_HTTP_TIMEOUT",
        default_value_t = 120.0,
        value_name = "SECS"
    )]
    pub http_timeout: f64,
    /// The login file (default: $XDG_CONFIG_HOME/agenthold/credentials or
    /// ~/.config/agenthold/credentials).
    #[arg(long, global = true, help_heading = "Global options", env = "AGENTHOLD_CREDENTIALS", value_name = "FILE")]
    pub credentials: Option<PathBuf>,
    /// Print the server's JSON (indented) instead of text.
    #[arg(long, global = true, help_heading = "Global options")]
    pub json: bool,
    /// Print the server's JSON on one line (implies --json).
    #[arg(long, global = true, help_heading = "Global options")]
    pub compact: bool,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
#[expect(clippy::large_enum_variant, reason = "parsed once per run; boxing would only obscure clap's derive")]
pub enum Command {
    /// Stores the server's URL and a token in the login file (mode 0600) for later commands. The
    /// token comes from --token / AGENTHOLD_TOKEN, else from the first line of stdin; with
    /// --username, stdin's first line is the password and a new API token is made.
    Login(LoginArgs),
    /// Deletes the login file (the token itself stays valid; revoke it with the API).
    Logout,
    /// Agents: create, list, show, patch, delete, sleep, wake.
    #[command(subcommand)]
    Agents(AgentsCommand),
    /// Sessions: create, show, list.
    #[command(subcommand)]
    Sessions(SessionsCommand),
    /// Sends a prompt to a session (answered at once with the turn id and the prompt's seq); with
    /// --follow, prints the turn's events until it ends and exits with its stop reason.
    Prompt(PromptArgs),
    /// Cancels the session's running turn.
    Cancel {
        /// Session id.
        session: String,
    },
    /// One page of a session's stored events.
    Events {
        /// Session id.
        session: String,
        /// Only events with a seq after this one.
        #[arg(long, default_value_t = 0)]
        after: u64,
        /// At most this many events (1-1000; the server's default is 100).
        #[arg(long)]
        limit: Option<u32>,
    },
    /// Follows a session's event stream, printing each event on one line.
    Watch(WatchArgs),
    /// Runs a command line in the agent's terminal (a real PTY shell) and prints its output.
    Exec {
        /// Deadline in seconds for the whole command.
        #[arg(long, default_value_t = 60.0, value_name = "SECS")]
        timeout: f64,
        /// Terminal width to ask for.
        #[arg(long, default_value_t = 250)]
        cols: u16,
        /// Terminal height to ask for.
        #[arg(long, default_value_t = 50)]
        rows: u16,
        /// Agent id.
        agent: String,
        /// The command line: the words are joined with spaces and typed into the shell.
        #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
        command: Vec<String>,
    },
}

/// `login`'s arguments.
#[derive(Debug, Clone, ClapArgs)]
pub struct LoginArgs {
    /// Sign in as this user (the password is the first line of stdin) and make a new API token
    /// for the CLI, instead of storing a given token.
    #[arg(long, conflicts_with = "token")]
    pub username: Option<String>,
    /// The name of the token --username makes (shown in `GET /api/v1/tokens`).
    #[arg(long, default_value = "agentholdctl", requires = "username")]
    pub token_name: String,
}

/// `prompt`'s arguments.
#[derive(Debug, ClapArgs)]
pub struct PromptArgs {
    /// Session id.
    pub session: String,
    /// The prompt text; `-` reads it from stdin.
    pub text: String,
    /// Follow the turn until its `turn_end`; the exit code says how it ended.
    #[arg(long, short = 'f')]
    pub follow: bool,
    /// With --follow: give up after this many seconds (exit code 3).
    #[arg(long, value_name = "SECS", requires = "follow")]
    pub timeout: Option<f64>,
}

/// `watch`'s arguments.
#[derive(Debug, ClapArgs)]
pub struct WatchArgs {
    /// Session id.
    pub session: String,
    /// Start after this seq (0: from the beginning of the log).
    #[arg(long, default_value_t = 0)]
    pub after: u64,
    /// Stop after the first event of this type (e.g. `turn_end`).
    #[arg(long, value_name = "TYPE")]
    pub until: Option<String>,
    /// Stop after this many events.
    #[arg(long)]
    pub count: Option<u64>,
    /// Give up after this many seconds (exit code 3).
    #[arg(long, value_name = "SECS")]
    pub timeout: Option<f64>,
}

/// An agent's settings, shared by `agents create` and `agents patch`.
#[derive(Debug, Clone, Default, ClapArgs)]
pub struct AgentSettings {
    /// The harness: claude-code, codex, opencode, command, fake.
    #[arg(long)]
    pub harness: Option<String>,
    /// The harness command, one word per flag: `--command prog --command arg`.
    #[arg(long, allow_hyphen_values = true, value_name = "WORD")]
    pub command: Vec<String>,
    /// How the agent's tool calls are approved: autonomous, guarded, approval.
    #[arg(long)]
    pub posture: Option<String>,
    /// The model the harness uses (`""` clears it on patch).
    #[arg(long)]
    pub model: Option<String>,
    /// The login method the harness is signed in with when it asks (ACP `authenticate`; `""`
    /// clears it on patch).
    #[arg(long, value_name = "ID")]
    pub auth_method: Option<String>,
    /// An environment variable for the agent, `KEY=VALUE` (repeatable; on patch, replaces the
    /// whole environment).
    #[arg(long, value_name = "KEY=VALUE")]
    pub env: Vec<String>,
    /// Docker image (default: the server's).
    #[arg(long)]
    pub image: Option<String>,
    /// CPU limit.
    #[arg(long)]
    pub cpus: Option<f64>,
    /// Memory limit in MiB.
    #[arg(long)]
    pub memory_mib: Option<i32>,
    /// Process limit.
    #[arg(long)]
    pub pids: Option<i32>,
    /// The agent's turn time limit in seconds (0: the server's).
    #[arg(long, value_name = "SECS")]
    pub turn_seconds: Option<u32>,
    /// More fields as a JSON object, merged into the request body (e.g.
    /// `--set '{"egress":{"allow":["example.org"]}}'`); flags win over it.
    #[arg(long, value_name = "JSON")]
    pub set: Option<String>,
}

/// `agents …`.
#[derive(Debug, Subcommand)]
pub enum AgentsCommand {
    /// Creates an agent (its sandbox is made on first use).
    Create {
        /// A unique name in the workspace.
        #[arg(long)]
        name: String,
        /// The workspace (default: your personal one).
        #[arg(long)]
        workspace: Option<String>,
        /// Its settings (--harness is required).
        #[command(flatten)]
        settings: AgentSettings,
        /// A repository (https URL) cloned into its home at the first wake; sessions start in it.
        #[arg(long)]
        repo: Option<String>,
        /// The branch of --repo to clone (default: the remote's).
        #[arg(long, requires = "repo")]
        branch: Option<String>,
    },
    /// Lists agents.
    List,
    /// Shows an agent.
    Show {
        /// Agent id.
        id: String,
    },
    /// Changes an agent: each given setting replaces the current one (PATCH).
    Patch {
        /// Agent id.
        id: String,
        /// The settings to change.
        #[command(flatten)]
        settings: AgentSettings,
    },
    /// Deletes an agent with its sandbox, home volume, sessions and events.
    Delete {
        /// Agent id.
        id: String,
    },
    /// Stops the agent's sandbox; its home survives. A prompt or a terminal wakes it.
    Sleep {
        /// Agent id.
        id: String,
    },
    /// Starts the agent's sandbox.
    Wake {
        /// Agent id.
        id: String,
    },
}

/// `sessions …`.
#[derive(Debug, Subcommand)]
pub enum SessionsCommand {
    /// Opens a session on an agent.
    Create {
        /// Agent id.
        agent: String,
    },
    /// Shows a session (its `last_seq` among others).
    Show {
        /// Session id.
        session: String,
    },
    /// Lists an agent's session ids.
    List {
        /// Agent id.
        agent: String,
    },
}

#[cfg(test)]
#[expect(clippy::unwrap_used, reason = "tests fail loudly on unexpected values")]
mod tests {
    use clap::CommandFactory;

    use super::*;

    fn parse(args: &[&str]) -> Result<Args, clap::Error> {
        Args::try_parse_from(std::iter::once("agentholdctl").chain(args.iter().copied()))
    }

    #[test]
    fn the_definition_is_consistent() {
        Args::command().debug_assert();
    }

    #[test]
    fn parses_the_documented_command_lines() {
        let args = parse(&[
            "--url",
            "http://x:1",
            "agents",
            "create",
            "--name",
            "n",
            "--harness",
            "fake",
            "--command",
            "prog",
            "--command",
            "--flag",
            "--env",
            "A=1",
            "--posture",
            "approval",
        ])
        .unwrap();
        match args.command {
            Command::Agents(AgentsCommand::Create { name, settings, .. }) => {
                assert_eq!(name, "n");
                assert_eq!(settings.command, ["prog", "--flag"]);
                assert_eq!(settings.env, ["A=1"]);
                assert_eq!(settings.posture.as_deref(), Some("approval"));
            }
            other => panic!("{other:?}"),
        }
        let args = parse(&["exec", "--timeout", "5", "a1", "echo", "-n", "hi", ">", "f"]).unwrap();
        match args.command {
            Command::Exec { agent, command, timeout, .. } => {
                assert_eq!((agent.as_str(), timeout), ("a1", 5.0));
                assert_eq!(command.join(" "), "echo -n hi > f");
            }
            other => panic!("{other:?}"),
        }
        let args = parse(&["watch", "s", "--after", "3", "--until", "turn_end", "--timeout", "1.5"]).unwrap();
        assert!(matches!(args.command, Command::Watch(WatchArgs { after: 3, .. })));
    }

    #[test]
    fn parses_the_new_commands_and_global_flags() {
        let args = parse(&["prompt", "s1", "hello", "--follow", "--timeout", "30", "--json"]).unwrap();
        assert!(args.json);
        match args.command {
            Command::Prompt(PromptArgs { session, text, follow: true, timeout: Some(t) }) => {
                assert_eq!((session.as_str(), text.as_str(), t), ("s1", "hello", 30.0));
            }
            other => panic!("{other:?}"),
        }
        assert!(parse(&["prompt", "s1", "hello", "--timeout", "3"]).is_err(), "--timeout needs --follow");
        let args =
            parse(&["agents", "patch", "a1", "--model", "", "--cpus", "2", "--set", r#"{"policy":null}"#]).unwrap();
        match args.command {
            Command::Agents(AgentsCommand::Patch { id, settings }) => {
                assert_eq!((id.as_str(), settings.model.as_deref(), settings.cpus), ("a1", Some(""), Some(2.0)));
                assert_eq!(settings.harness, None);
            }
            other => panic!("{other:?}"),
        }
        let args = parse(&[
            "login",
            "--url",
            "https://h:1",
            "--token",
            "ah_x",
            "--ca-file",
            "/ca.pem",
            "--connect-timeout",
            "2",
        ])
        .unwrap();
        assert!(matches!(args.command, Command::Login(LoginArgs { username: None, .. })));
        assert_eq!(args.token, Some(Token::new("ah_x")));
        assert_eq!(args.ca_file, Some(PathBuf::from("/ca.pem")));
        assert_eq!(args.connect_timeout, 2.0);
        let args = parse(&["agents", "show", "a", "--token", " "]).unwrap();
        assert!(args.token.is_some_and(|t| t.is_empty()), "an empty token stands for none");
        assert!(parse(&["agents", "show", "a", "--token", "a b"]).is_err());
        assert!(parse(&["agents", "frobnicate"]).is_err());
        let args = parse(&["login", "--username", "ada", "--token-name", "laptop"]).unwrap();
        match args.command {
            Command::Login(LoginArgs { username, token_name }) => {
                assert_eq!((username.as_deref(), token_name.as_str()), (Some("ada"), "laptop"));
            }
            other => panic!("{other:?}"),
        }
        assert!(parse(&["login", "--username", "ada", "--token", "ah_x"]).is_err(), "one or the other");
        assert!(parse(&["login", "--token-name", "x"]).is_err(), "--token-name needs --username");
    }

    #[test]
    fn the_token_never_shows_in_debug_output() {
        let args = parse(&["--token", "ah_very_secret", "agents", "list"]).unwrap();
        assert!(!format!("{args:?}").contains("ah_very_secret"));
    }
}
