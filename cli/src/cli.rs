//! The command line: arguments (clap), and [`run`], which performs one subcommand and prints
//! its JSON result on stdout.

use std::collections::BTreeMap;
use std::io::Write;
use std::time::Duration;

use anyhow::Context;
use clap::{Args as ClapArgs, Parser, Subcommand};
use serde_json::{Value, json};

use crate::api::{Client, Token};
use crate::endpoint::{Endpoint, segment};
use crate::error::Failure;
use crate::terminal::{self, Size};
use crate::watch::{self, StopWhen};

/// A command-line client for the agenthold API. Prints JSON on stdout; errors go to stderr
/// with the API's error code. Exit codes: 0 ok, 1 an HTTP error or other failure, 2 bad
/// usage, 3 a timeout (`watch`, `exec`, `--http-timeout`).
#[derive(Debug, Parser)]
#[command(name = "agentholdctl", version)]
pub struct Args {
    /// The server's base URL (plain http only).
    #[arg(long, global = true, env = "AGENTHOLD_URL", default_value = "http://127.0.0.1:7700")]
    pub url: String,
    /// API token, sent as `Authorization: Bearer <token>`.
    #[arg(long, global = true, env = "AGENTHOLD_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// Deadline in seconds for one REST request, and for opening a WebSocket.
    #[arg(long, global = true, default_value_t = 120.0, value_name = "SECS")]
    pub http_timeout: f64,
    /// Print JSON on one line instead of indented.
    #[arg(long, global = true)]
    pub compact: bool,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Agents: create, list, show, delete, sleep, wake.
    #[command(subcommand)]
    Agents(AgentsCommand),
    /// Sessions: create, show, list.
    #[command(subcommand)]
    Sessions(SessionsCommand),
    /// Sends a prompt to a session (answered at once with the turn id and the prompt's seq).
    Prompt {
        /// Session id.
        session: String,
        /// The prompt text; `-` reads it from stdin.
        text: String,
    },
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
    /// Follows a session's event stream, printing each event as one JSON line.
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

/// `agents …`.
#[derive(Debug, Subcommand)]
pub enum AgentsCommand {
    /// Creates an agent (its sandbox is made on first use).
    Create {
        /// A unique name.
        #[arg(long)]
        name: String,
        /// The harness (`fake` for the scripted test agent).
        #[arg(long)]
        harness: String,
        /// The harness command, one word per flag: `--command prog --command arg`.
        #[arg(long, allow_hyphen_values = true, value_name = "WORD")]
        command: Vec<String>,
        /// An environment variable for the agent, `KEY=VALUE` (repeatable).
        #[arg(long, value_name = "KEY=VALUE")]
        env: Vec<String>,
        /// Docker image (default: the server's).
        #[arg(long)]
        image: Option<String>,
        /// CPU limit.
        #[arg(long)]
        cpus: Option<f64>,
        /// Memory limit in MiB.
        #[arg(long)]
        memory_mib: Option<i32>,
        /// Process limit.
        #[arg(long)]
        pids: Option<i32>,
    },
    /// Lists agents.
    List,
    /// Shows an agent.
    Show {
        /// Agent id.
        id: String,
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

fn seconds(flag: &str, secs: f64) -> Result<Duration, Failure> {
    Duration::try_from_secs_f64(secs)
        .ok()
        .filter(|d| !d.is_zero())
        .ok_or_else(|| Failure::Usage(format!("{flag} must be a positive number of seconds, not {secs}")))
}

fn parse_env(pairs: &[String]) -> Result<BTreeMap<String, String>, Failure> {
    let mut env = BTreeMap::new();
    for pair in pairs {
        let (key, value) =
            pair.split_once('=').ok_or_else(|| Failure::Usage(format!("--env {pair:?}: expected KEY=VALUE")))?;
        env.insert(key.to_owned(), value.to_owned());
    }
    Ok(env)
}

/// Runs one command.
pub async fn run(args: Args) -> Result<(), Failure> {
    let endpoint = Endpoint::parse(&args.url).map_err(|m| Failure::Usage(format!("--url / AGENTHOLD_URL: {m}")))?;
    let token = args.token.filter(|t| !t.is_empty()).map(Token::new);
    let client = Client::new(endpoint, token, seconds("--http-timeout", args.http_timeout)?);
    let printer = Printer { compact: args.compact };
    match args.command {
        Command::Agents(command) => agents(&client, &printer, command).await,
        Command::Sessions(command) => sessions(&client, &printer, command).await,
        Command::Prompt { session, text } => {
            let text = if text == "-" {
                tokio::task::spawn_blocking(|| std::io::read_to_string(std::io::stdin()))
                    .await
                    .context("reading the prompt from stdin")?
                    .context("reading the prompt from stdin")?
            } else {
                text
            };
            let path = format!("/api/v1/sessions/{}/prompt", segment(&session));
            printer.print(client.call("POST", &path, Some(&json!({"text": text}))).await?)
        }
        Command::Cancel { session } => {
            let path = format!("/api/v1/sessions/{}/cancel", segment(&session));
            printer.print(client.call("POST", &path, None).await?)
        }
        Command::Events { session, after, limit } => {
            let mut path = format!("/api/v1/sessions/{}/events?after={after}", segment(&session));
            if let Some(limit) = limit {
                path.push_str(&format!("&limit={limit}"));
            }
            printer.print(client.call("GET", &path, None).await?)
        }
        Command::Watch(watch) => {
            let stop = StopWhen {
                until: watch.until,
                count: watch.count,
                timeout: watch.timeout.map(|t| seconds("--timeout", t)).transpose()?,
            };
            let mut stdout = std::io::stdout().lock();
            watch::watch(&client, &watch.session, watch.after, &stop, &mut stdout).await.map(|_| ())
        }
        Command::Exec { timeout, cols, rows, agent, command } => {
            let mut stdout = std::io::stdout().lock();
            let size = Size { cols: cols.max(1), rows: rows.max(1) };
            terminal::exec(&client, &agent, &command.join(" "), size, seconds("--timeout", timeout)?, &mut stdout).await
        }
    }
}

async fn agents(client: &Client, printer: &Printer, command: AgentsCommand) -> Result<(), Failure> {
    let agent_path = |id: &str, action: &str| format!("/api/v1/agents/{}{action}", segment(id));
    let response = match command {
        AgentsCommand::Create { name, harness, command, env, image, cpus, memory_mib, pids } => {
            let mut body = json!({"name": name, "harness": harness, "env": parse_env(&env)?});
            if !command.is_empty() {
                body["command"] = json!(command);
            }
            if let Some(image) = image {
                body["image"] = json!(image);
            }
            if cpus.is_some() || memory_mib.is_some() || pids.is_some() {
                let mut limits = serde_json::Map::new();
                if let Some(cpus) = cpus {
                    limits.insert("cpus".into(), json!(cpus));
                }
                if let Some(memory_mib) = memory_mib {
                    limits.insert("memory_mib".into(), json!(memory_mib));
                }
                if let Some(pids) = pids {
                    limits.insert("pids".into(), json!(pids));
                }
                body["limits"] = Value::Object(limits);
            }
            client.call("POST", "/api/v1/agents", Some(&body)).await?
        }
        AgentsCommand::List => client.call("GET", "/api/v1/agents", None).await?,
        AgentsCommand::Show { id } => client.call("GET", &agent_path(&id, ""), None).await?,
        AgentsCommand::Delete { id } => client.call("DELETE", &agent_path(&id, ""), None).await?,
        AgentsCommand::Sleep { id } => client.call("POST", &agent_path(&id, "/sleep"), None).await?,
        AgentsCommand::Wake { id } => client.call("POST", &agent_path(&id, "/wake"), None).await?,
    };
    printer.print(response)
}

async fn sessions(client: &Client, printer: &Printer, command: SessionsCommand) -> Result<(), Failure> {
    let response = match command {
        SessionsCommand::Create { agent } => {
            let path = format!("/api/v1/agents/{}/sessions", segment(&agent));
            client.call("POST", &path, Some(&json!({}))).await?
        }
        SessionsCommand::Show { session } => {
            client.call("GET", &format!("/api/v1/sessions/{}", segment(&session)), None).await?
        }
        SessionsCommand::List { agent } => {
            client.call("GET", &format!("/api/v1/agents/{}/sessions", segment(&agent)), None).await?
        }
    };
    printer.print(response)
}

/// Prints JSON results.
struct Printer {
    /// One line instead of indented.
    compact: bool,
}

impl Printer {
    /// Prints a response body; an empty one (204) prints nothing.
    fn print(&self, value: Option<Value>) -> Result<(), Failure> {
        let Some(value) = value else { return Ok(()) };
        let text = if self.compact { serde_json::to_string(&value) } else { serde_json::to_string_pretty(&value) };
        let text = text.context("encoding the output")?;
        let mut stdout = std::io::stdout().lock();
        match writeln!(stdout, "{text}").and_then(|()| stdout.flush()) {
            Err(error) if error.kind() != std::io::ErrorKind::BrokenPipe => {
                Err(anyhow::Error::new(error).context("writing to stdout").into())
            }
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
#[expect(clippy::unwrap_used, reason = "tests fail loudly on unexpected values")]
mod tests {
    use super::*;

    #[test]
    fn parses_the_documented_command_lines() {
        let args = Args::try_parse_from([
            "agentholdctl",
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
        ])
        .unwrap();
        match args.command {
            Command::Agents(AgentsCommand::Create { command, env, .. }) => {
                assert_eq!(command, ["prog", "--flag"]);
                assert_eq!(env, ["A=1"]);
            }
            other => panic!("{other:?}"),
        }
        let args = Args::try_parse_from(["agentholdctl", "exec", "--timeout", "5", "a1", "echo", "-n", "hi", ">", "f"])
            .unwrap();
        match args.command {
            Command::Exec { agent, command, timeout, .. } => {
                assert_eq!((agent.as_str(), timeout), ("a1", 5.0));
                assert_eq!(command.join(" "), "echo -n hi > f");
            }
            other => panic!("{other:?}"),
        }
        let args = Args::try_parse_from([
            "agentholdctl",
            "watch",
            "s",
            "--after",
            "3",
            "--until",
            "turn_end",
            "--timeout",
            "1.5",
        ])
        .unwrap();
        assert!(matches!(args.command, Command::Watch(WatchArgs { after: 3, .. })));
    }

    #[test]
    fn env_pairs_and_durations() {
        assert_eq!(parse_env(&["A=b=c".into()]).unwrap()["A"], "b=c");
        assert!(parse_env(&["A".into()]).is_err());
        assert!(seconds("--t", 0.0).is_err());
        assert!(seconds("--t", -1.0).is_err());
        assert!(seconds("--t", f64::NAN).is_err());
        assert_eq!(seconds("--t", 0.25).unwrap(), Duration::from_millis(250));
    }
}
