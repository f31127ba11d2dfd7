//! [`run`]: performs one parsed command line — works out the server, token and TLS settings
//! (flags, environment, the login file), makes the calls and prints the results.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use serde_json::{Map, Value, json};

use crate::api::{self, Client};
use crate::cli::{AgentSettings, AgentsCommand, Args, Command, PromptArgs, SessionsCommand};
use crate::credentials::{self, Credentials};
use crate::endpoint::{Endpoint, segment};
use crate::error::Failure;
use crate::output::{self, Format, Printer};
use crate::secret::Token;
use crate::terminal::{self, Size};
use crate::watch::{self, StopWhen};
use crate::{follow, login};

/// The server used when neither a flag, the environment nor the login file names one.
pub const DEFAULT_URL: &str = "http://127.0.0.1:7700";

/// Where to connect and as whom, worked out from the flags and the login file.
#[derive(Debug)]
pub struct Target {
    /// The server.
    pub endpoint: Endpoint,
    /// The token, if any.
    pub token: Option<Token>,
    /// Timeouts and the CA file.
    pub options: api::Options,
}

/// Works out the target: flags and environment first; the login file gives the URL when none is
/// given, and its token and CA file only for the server it was stored for.
pub fn resolve(args: &Args, stored: Option<&Credentials>) -> Result<Target, Failure> {
    let url = args.url.as_deref().or(stored.map(|c| c.url.as_str())).unwrap_or(DEFAULT_URL);
    let endpoint = Endpoint::parse(url).map_err(|m| Failure::Usage(format!("--url / AGENTHOLD_URL: {m}")))?;
    let same_server = stored.filter(|c| Endpoint::parse(&c.url).is_ok_and(|e| e == endpoint));
    let given = args.token.clone().filter(|t| !t.is_empty());
    let token = given.or_else(|| same_server.map(|c| c.token.clone()));
    let ca_file = args.ca_file.clone().or_else(|| same_server.and_then(|c| c.ca_file.clone()));
    let options = api::Options {
        ca_file,
        connect_timeout: seconds("--connect-timeout", args.connect_timeout)?,
        timeout: seconds("--http-timeout", args.http_timeout)?,
    };
    Ok(Target { endpoint, token, options })
}

fn credentials_path(args: &Args) -> Result<PathBuf, Failure> {
    match &args.credentials {
        Some(path) => Ok(path.clone()),
        None => credentials::default_path(),
    }
}

/// Runs one command.
pub async fn run(args: Args) -> Result<(), Failure> {
    let printer = Printer {
        format: if args.json || args.compact { Format::Json { compact: args.compact } } else { Format::Text },
    };
    // The login file is read only when a flag it could stand in for is missing; `logout` never
    // needs it, and `login` replaces a broken one.
    let needed = args.url.is_none() || args.token.as_ref().is_none_or(Token::is_empty);
    let stored = match (&args.command, needed) {
        (Command::Logout, _) | (_, false) => None,
        (command, true) => {
            let loaded = credentials_path(&args).and_then(|path| credentials::load(&path));
            match loaded {
                Ok(stored) => stored,
                Err(_) if matches!(command, Command::Login(_)) => None,
                // No HOME to find the default file in: nothing stored.
                Err(Failure::Usage(_)) if args.credentials.is_none() && credentials::default_path().is_err() => None,
                Err(error) => return Err(error),
            }
        }
    };
    match &args.command {
        Command::Login(login) => {
            let target = resolve(&args, stored.as_ref())?;
            let given = args.token.clone().filter(|t| !t.is_empty());
            return login::login(target, given, login.clone(), &credentials_path(&args)?, printer).await;
        }
        Command::Logout => {
            let path = credentials_path(&args)?;
            let removed = credentials::remove(&path)?;
            let answer = json!({"removed": removed, "credentials": path});
            let text = |v: &Value| {
                let path = output::scalar(&v["credentials"]);
                if v["removed"] == true { format!("removed {path}") } else { format!("no login file at {path}") }
            };
            return printer.print(Some(answer), text, "");
        }
        _ => {}
    }
    let target = resolve(&args, stored.as_ref())?;
    let client = Client::new(target.endpoint, target.token, target.options)?;
    match args.command {
        Command::Login(_) | Command::Logout => Ok(()),
        Command::Agents(command) => agents(&client, printer, command).await,
        Command::Sessions(command) => sessions(&client, printer, command).await,
        Command::Prompt(PromptArgs { session, text, follow, timeout }) => {
            let text = if text == "-" { read_stdin().await? } else { text };
            if follow {
                let timeout = timeout.map(|t| seconds("--timeout", t)).transpose()?;
                let mut stdout = std::io::stdout().lock();
                return follow::prompt_and_follow(&client, &session, &text, timeout, printer, &mut stdout).await;
            }
            let path = format!("/api/v1/sessions/{}/prompt", segment(&session));
            printer.print(client.call("POST", &path, Some(&json!({"text": text}))).await?, output::prompt, "")
        }
        Command::Cancel { session } => {
            let path = format!("/api/v1/sessions/{}/cancel", segment(&session));
            printer.print(client.call("POST", &path, None).await?, output::fields, "cancelling")
        }
        Command::Events { session, after, limit } => {
            let mut path = format!("/api/v1/sessions/{}/events?after={after}", segment(&session));
            if let Some(limit) = limit {
                path.push_str(&format!("&limit={limit}"));
            }
            printer.print(client.call("GET", &path, None).await?, output::events, "")
        }
        Command::Watch(watch) => {
            let stop = StopWhen {
                until: watch.until,
                count: watch.count,
                timeout: watch.timeout.map(|t| seconds("--timeout", t)).transpose()?,
            };
            let mut stdout = std::io::stdout().lock();
            watch::watch(&client, &watch.session, watch.after, &stop, printer.is_json(), &mut stdout).await.map(|_| ())
        }
        Command::Exec { timeout, cols, rows, agent, command } => {
            let mut stdout = std::io::stdout().lock();
            let size = Size { cols: cols.max(1), rows: rows.max(1) };
            terminal::exec(&client, &agent, &command.join(" "), size, seconds("--timeout", timeout)?, &mut stdout).await
        }
    }
}

/// The whole of stdin.
pub async fn read_stdin() -> Result<String, Failure> {
    Ok(tokio::task::spawn_blocking(|| std::io::read_to_string(std::io::stdin()))
        .await
        .context("reading stdin")?
        .context("reading stdin")?)
}

async fn agents(client: &Client, printer: Printer, command: AgentsCommand) -> Result<(), Failure> {
    let agent_path = |id: &str, action: &str| format!("/api/v1/agents/{}{action}", segment(id));
    match command {
        AgentsCommand::Create { name, workspace, settings, repo, branch } => {
            if settings.harness.is_none() {
                return Err(Failure::Usage("agents create: --harness is required".to_owned()));
            }
            let mut body = agent_body(&settings)?;
            body.insert("name".into(), json!(name));
            if let Some(workspace) = workspace {
                body.insert("workspace_id".into(), json!(workspace));
            }
            if let Some(url) = repo {
                body.insert("repo".into(), json!({"url": url, "branch": branch}));
            }
            let answer = client.call("POST", "/api/v1/agents", Some(&Value::Object(body))).await?;
            printer.print(answer, output::agent, "")
        }
        AgentsCommand::Patch { id, settings } => {
            let body = agent_body(&settings)?;
            if body.is_empty() {
                return Err(Failure::Usage("agents patch: nothing to change (give a setting)".to_owned()));
            }
            let answer = client.call("PATCH", &agent_path(&id, ""), Some(&Value::Object(body))).await?;
            printer.print(answer, output::agent, "")
        }
        AgentsCommand::List => printer.print(client.call("GET", "/api/v1/agents", None).await?, output::agents, ""),
        AgentsCommand::Show { id } => {
            printer.print(client.call("GET", &agent_path(&id, ""), None).await?, output::agent, "")
        }
        AgentsCommand::Delete { id } => {
            printer.print(client.call("DELETE", &agent_path(&id, ""), None).await?, output::fields, "deleted")
        }
        AgentsCommand::Sleep { id } => {
            printer.print(client.call("POST", &agent_path(&id, "/sleep"), None).await?, output::agent, "")
        }
        AgentsCommand::Wake { id } => {
            printer.print(client.call("POST", &agent_path(&id, "/wake"), None).await?, output::agent, "")
        }
    }
}

/// The JSON body for an agent's settings: `--set` first, then each given flag.
pub fn agent_body(settings: &AgentSettings) -> Result<Map<String, Value>, Failure> {
    let mut body = match &settings.set {
        None => Map::new(),
        Some(raw) => match serde_json::from_str::<Value>(raw) {
            Ok(Value::Object(map)) => map,
            Ok(_) => return Err(Failure::Usage("--set: expected a JSON object".to_owned())),
            Err(e) => return Err(Failure::Usage(format!("--set: not JSON ({e})"))),
        },
    };
    let mut put = |key: &str, value: Value| {
        body.insert(key.to_owned(), value);
    };
    if let Some(harness) = &settings.harness {
        put("harness", json!(harness));
    }
    if !settings.command.is_empty() {
        put("command", json!(settings.command));
    }
    if let Some(posture) = &settings.posture {
        put("posture", json!(posture));
    }
    if let Some(model) = &settings.model {
        put("model", json!(model));
    }
    if let Some(method) = &settings.auth_method {
        put("auth_method", json!(method));
    }
    if !settings.env.is_empty() {
        put("env", json!(parse_env(&settings.env)?));
    }
    if let Some(image) = &settings.image {
        put("image", json!(image));
    }
    let mut limits = match body.remove("limits") {
        Some(Value::Object(limits)) => limits,
        Some(_) => return Err(Failure::Usage("--set: limits must be an object".to_owned())),
        None => Map::new(),
    };
    let given = [
        ("cpus", settings.cpus.map(|v| json!(v))),
        ("memory_mib", settings.memory_mib.map(|v| json!(v))),
        ("pids", settings.pids.map(|v| json!(v))),
        ("turn_seconds", settings.turn_seconds.map(|v| json!(v))),
    ];
    for (key, value) in given {
        if let Some(value) = value {
            limits.insert(key.to_owned(), value);
        }
    }
    if !limits.is_empty() {
        body.insert("limits".to_owned(), Value::Object(limits));
    }
    Ok(body)
}

async fn sessions(client: &Client, printer: Printer, command: SessionsCommand) -> Result<(), Failure> {
    match command {
        SessionsCommand::Create { agent } => {
            let path = format!("/api/v1/agents/{}/sessions", segment(&agent));
            printer.print(client.call("POST", &path, Some(&json!({}))).await?, output::fields, "")
        }
        SessionsCommand::Show { session } => {
            let path = format!("/api/v1/sessions/{}", segment(&session));
            printer.print(client.call("GET", &path, None).await?, output::fields, "")
        }
        SessionsCommand::List { agent } => {
            let path = format!("/api/v1/agents/{}/sessions", segment(&agent));
            printer.print(client.call("GET", &path, None).await?, output::sessions, "")
        }
    }
}

/// A positive number of seconds.
pub fn seconds(flag: &str, secs: f64) -> Result<Duration, Failure> {
    Duration::try_from_secs_f64(secs)
        .ok()
        .filter(|d| !d.is_zero())
        .ok_or_else(|| Failure::Usage(format!("{flag} must be a positive number of seconds, not {secs}")))
}

/// `KEY=VALUE` pairs; the value is everything after the first `=`.
pub fn parse_env(pairs: &[String]) -> Result<BTreeMap<String, String>, Failure> {
    let mut env = BTreeMap::new();
    for pair in pairs {
        let (key, value) =
            pair.split_once('=').ok_or_else(|| Failure::Usage(format!("--env {pair:?}: expected KEY=VALUE")))?;
        env.insert(key.to_owned(), value.to_owned());
    }
    Ok(env)
}

#[cfg(test)]
#[expect(clippy::unwrap_used, reason = "tests fail loudly on unexpected values")]
mod tests {
    use clap::Parser;

    use super::*;

    fn args(list: &[&str]) -> Args {
        Args::try_parse_from(std::iter::once("agentholdctl").chain(list.iter().copied())).unwrap()
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

    #[test]
    fn agent_bodies_merge_set_and_flags() {
        let settings = AgentSettings {
            model: Some(String::new()),
            auth_method: Some("acme-key".into()),
            cpus: Some(1.5),
            env: vec!["A=1".into()],
            set: Some(r#"{"policy": null, "limits": {"pids": 64}, "model": "x"}"#.into()),
            ..AgentSettings::default()
        };
        let body = Value::Object(agent_body(&settings).unwrap());
        assert_eq!(
            body,
            json!({"policy": null, "model": "", "auth_method": "acme-key", "env": {"A": "1"}, "limits": {"pids": 64, "cpus": 1.5}})
        );
        assert!(agent_body(&AgentSettings { set: Some("[1]".into()), ..AgentSettings::default() }).is_err());
        assert!(agent_body(&AgentSettings { set: Some("{".into()), ..AgentSettings::default() }).is_err());
        assert!(agent_body(&AgentSettings::default()).unwrap().is_empty());
    }

    #[test]
    fn the_login_file_serves_only_its_own_server() {
        let stored = Credentials {
            url: "https://agenthold.example".into(),
            token: Token::new("ah_stored"),
            ca_file: Some(PathBuf::from("/ca.pem")),
        };
        // No --url: the stored server, with its token and CA file.
        let t = resolve(&args(&["agents", "list"]), Some(&stored)).unwrap();
        assert_eq!(t.endpoint.to_string(), "https://agenthold.example");
        assert_eq!(t.token, Some(Token::new("ah_stored")));
        assert_eq!(t.options.ca_file, Some(PathBuf::from("/ca.pem")));
        // The same server written differently still matches.
        let t = resolve(&args(&["--url", "https://AGENTHOLD.example:443/", "agents", "list"]), Some(&stored)).unwrap();
        assert_eq!(t.token, Some(Token::new("ah_stored")));
        // Another server never gets the stored token.
        let t = resolve(&args(&["--url", "http://127.0.0.1:7700", "agents", "list"]), Some(&stored)).unwrap();
        assert_eq!((t.token, t.options.ca_file), (None, None));
        // A flag wins over the file.
        let t = resolve(&args(&["--token", "ah_flag", "agents", "list"]), Some(&stored)).unwrap();
        assert_eq!(t.token, Some(Token::new("ah_flag")));
        // Nothing stored: the default server.
        let t = resolve(&args(&["agents", "list"]), None).unwrap();
        assert_eq!(t.endpoint.to_string(), DEFAULT_URL);
        assert!(matches!(resolve(&args(&["--url", "ftp://x", "agents", "list"]), None), Err(Failure::Usage(_))));
        assert!(matches!(resolve(&args(&["--http-timeout", "0", "agents", "list"]), None), Err(Failure::Usage(_))));
    }
}
