//! The script language: one command per line of the prompt text. Parsing only; running a
//! command is [`super::turn`]'s job. Every line parses to something, so no input can fail:
//! a line that is not a well-formed command becomes [`Command::Echo`].

/// The largest `big` payload, so a typo cannot make fakeagent allocate without bound.
pub const MAX_BIG_BYTES: usize = 64 * 1024 * 1024;

/// One script line.
#[derive(Debug, Clone, PartialEq)]
pub enum Command {
    /// `text <words>`: an `agent_message_chunk`.
    Text(String),
    /// `think <words>`: an `agent_thought_chunk`.
    Think(String),
    /// `write <path> <content>`: an edit tool call that replaces the file.
    Write { path: String, content: String },
    /// `append <path> <content>`: an edit tool call that appends to the file.
    Append { path: String, content: String },
    /// `run <shell command>`: an execute tool call running `sh -c` in the session cwd.
    Run(String),
    /// `fetch <url> [header:value …]`: a `fetch` tool call doing one HTTPS GET through
    /// `HTTPS_PROXY` (header values may name environment variables as `$NAME`).
    Fetch { url: String, headers: Vec<(String, String)> },
    /// `mcp <tool> [<JSON arguments>]`: a call of a tool of the MCP server the client offered
    /// (`$last.<field>` in the arguments: that field of the previous call's answer).
    Mcp { tool: String, args: String },
    /// `mcp-tools`: what listing the MCP server's tools gave when the session was opened.
    McpTools,
    /// `tool <kind> <title>`: a tool call that completes at once.
    Tool { kind: String, title: String },
    /// `plan <a> | <b> | …`: a `plan` update.
    Plan(Vec<String>),
    /// `ask <kind> <title>`: a tool call gated by `session/request_permission`.
    Ask { kind: String, title: String },
    /// `elicit <question>`: the agent's own question (`elicitation/create`, form mode, one
    /// required text field `answer`), asked only if the client advertised `elicitation.form`.
    Elicit(String),
    /// `sleep <ms>`.
    Sleep(u64),
    /// `flood <count> <rate>`: `count` numbered chunks at `rate` per second (0 = unpaced).
    Flood { count: u64, rate: f64 },
    /// `big <bytes>`: one chunk of that many ASCII bytes.
    Big(usize),
    /// `unknown`: an update of a variant no client knows.
    Unknown,
    /// `garbage`: a line on stdout that is not JSON.
    Garbage,
    /// `unstorable`: three updates in one write, the middle one with text Postgres's `jsonb`
    /// refuses as it is (a lone surrogate escape, `\ud800`).
    Unstorable,
    /// `stderr <words>`: a line on stderr.
    Stderr(String),
    /// `crash [code]`: exit the process at once.
    Crash(i32),
    /// `hang`: never answer the prompt (unless cancelled).
    Hang,
    /// A line starting with `[agenthold]` (the prompt agenthold sends to resume a parked turn):
    /// run the rest of the script that was interrupted while a permission request waited, as a
    /// model continuing its task would — asking again for the call it was waiting on.
    Resume,
    /// `error <message>`: answer the prompt with a JSON-RPC error.
    Error(String),
    /// `stop <reason>`: the stop reason to end the turn with.
    Stop(String),
    /// `usage <input> <output>`: token usage to report in the prompt response.
    Usage { input: u64, output: u64 },
    /// `cost <amount> <currency>`: a `usage_update` saying the session has cost this much so far.
    Cost { amount: f64, currency: String },
    /// Anything else: echoed back as `fakeagent: <line>`.
    Echo(String),
}

/// Splits prompt text into commands, skipping blank lines.
pub fn parse(script: &str) -> Vec<Command> {
    script.lines().filter_map(parse_line).collect()
}

/// Parses one line; `None` if it is blank.
pub fn parse_line(line: &str) -> Option<Command> {
    let line = line.trim();
    if line.is_empty() {
        return None;
    }
    let (word, rest) = split_word(line);
    let echo = || Command::Echo(line.to_owned());
    let command = match word {
        "text" => Command::Text(unescape(rest)),
        "think" => Command::Think(unescape(rest)),
        "write" | "append" => {
            let (path, content) = split_word(rest);
            if path.is_empty() {
                return Some(echo());
            }
            let (path, content) = (path.to_owned(), unescape(content));
            if word == "write" { Command::Write { path, content } } else { Command::Append { path, content } }
        }
        "run" if !rest.is_empty() => Command::Run(rest.to_owned()),
        "fetch" if !rest.is_empty() => {
            let mut words = rest.split_whitespace();
            let url = words.next().unwrap_or_default().to_owned();
            let mut headers = Vec::new();
            for word in words {
                match word.split_once(':') {
                    // `\s` in a value is a space (`authorization:Bearer\s$TOKEN`).
                    Some((name, value)) if !name.is_empty() => {
                        headers.push((name.to_owned(), value.replace("\\s", " ")))
                    }
                    _ => return Some(echo()),
                }
            }
            Command::Fetch { url, headers }
        }
        "mcp" if !rest.is_empty() => {
            let (tool, args) = split_word(rest);
            let args = if args.is_empty() { "{}" } else { args };
            Command::Mcp { tool: tool.to_owned(), args: args.to_owned() }
        }
        "mcp-tools" if rest.is_empty() => Command::McpTools,
        "tool" | "ask" => {
            let (kind, title) = split_word(rest);
            if kind.is_empty() {
                return Some(echo());
            }
            let title = if title.is_empty() { kind } else { title };
            let (kind, title) = (kind.to_owned(), title.to_owned());
            if word == "tool" { Command::Tool { kind, title } } else { Command::Ask { kind, title } }
        }
        "plan" => Command::Plan(rest.split('|').map(str::trim).filter(|e| !e.is_empty()).map(str::to_owned).collect()),
        "sleep" => match rest.parse() {
            Ok(ms) => Command::Sleep(ms),
            Err(_) => echo(),
        },
        "flood" => {
            let (count, rate) = split_word(rest);
            match (count.parse(), rate.parse::<f64>()) {
                (Ok(count), Ok(rate)) if rate.is_finite() && rate >= 0.0 => Command::Flood { count, rate },
                _ => echo(),
            }
        }
        "big" => match rest.parse() {
            Ok(bytes) if bytes <= MAX_BIG_BYTES => Command::Big(bytes),
            _ => echo(),
        },
        "unknown" if rest.is_empty() => Command::Unknown,
        "garbage" if rest.is_empty() => Command::Garbage,
        "unstorable" if rest.is_empty() => Command::Unstorable,
        "stderr" => Command::Stderr(rest.to_owned()),
        "crash" if rest.is_empty() => Command::Crash(1),
        "crash" => match rest.parse() {
            Ok(code) => Command::Crash(code),
            Err(_) => echo(),
        },
        "hang" if rest.is_empty() => Command::Hang,
        "elicit" if !rest.is_empty() => Command::Elicit(rest.to_owned()),
        "[agenthold]" => Command::Resume,
        "error" if rest.is_empty() => Command::Error("fakeagent script error".to_owned()),
        "error" => Command::Error(rest.to_owned()),
        "stop" if !rest.is_empty() && !rest.contains(char::is_whitespace) => Command::Stop(rest.to_owned()),
        "cost" => {
            let (amount, currency) = split_word(rest);
            match amount.parse() {
                Ok(amount) if !currency.is_empty() => Command::Cost { amount, currency: currency.to_owned() },
                _ => echo(),
            }
        }
        "usage" => {
            let (input, output) = split_word(rest);
            match (input.parse(), output.parse()) {
                (Ok(input), Ok(output)) => Command::Usage { input, output },
                _ => echo(),
            }
        }
        _ => echo(),
    };
    Some(command)
}

/// Splits off the first whitespace-separated word; the rest has leading whitespace removed.
fn split_word(s: &str) -> (&str, &str) {
    match s.split_once(char::is_whitespace) {
        Some((word, rest)) => (word, rest.trim_start()),
        None => (s, ""),
    }
}

/// Turns `\n` into a newline, `\t` into a tab and `\\` into a backslash; any other backslash
/// is kept as it is.
pub fn unescape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some('\\') => out.push('\\'),
            Some(other) => {
                out.push('\\');
                out.push(other);
            }
            None => out.push('\\'),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_command() {
        let script = "  text hello\\nworld  \n\nthink hmm\nwrite a/b.txt x\\ny\nappend c\n\
            run echo hi && ls\ntool read Read file\nplan a | b |c\nask execute rm -rf\n\
            sleep 5\nflood 10 2.5\nbig 3\nunknown\ngarbage\nunstorable\nstderr oops\ncrash\ncrash 3\nhang\n\
            error boom\nstop refusal\nusage 1 2\nhello there\n\
            fetch https://h/p x-api-key:$KEY a:b:c\nmcp list_agents\nmcp wait_turn {\"turn_id\": \"$last.turn_id\"}\nmcp-tools";
        let got = parse(script);
        let want = vec![
            Command::Text("hello\nworld".into()),
            Command::Think("hmm".into()),
            Command::Write { path: "a/b.txt".into(), content: "x\ny".into() },
            Command::Append { path: "c".into(), content: String::new() },
            Command::Run("echo hi && ls".into()),
            Command::Tool { kind: "read".into(), title: "Read file".into() },
            Command::Plan(vec!["a".into(), "b".into(), "c".into()]),
            Command::Ask { kind: "execute".into(), title: "rm -rf".into() },
            Command::Sleep(5),
            Command::Flood { count: 10, rate: 2.5 },
            Command::Big(3),
            Command::Unknown,
            Command::Garbage,
            Command::Unstorable,
            Command::Stderr("oops".into()),
            Command::Crash(1),
            Command::Crash(3),
            Command::Hang,
            Command::Error("boom".into()),
            Command::Stop("refusal".into()),
            Command::Usage { input: 1, output: 2 },
            Command::Echo("hello there".into()),
            Command::Fetch {
                url: "https://h/p".into(),
                headers: vec![("x-api-key".into(), "$KEY".into()), ("a".into(), "b:c".into())],
            },
            Command::Mcp { tool: "list_agents".into(), args: "{}".into() },
            Command::Mcp { tool: "wait_turn".into(), args: r#"{"turn_id": "$last.turn_id"}"#.into() },
            Command::McpTools,
        ];
        assert_eq!(got, want);
    }

    #[test]
    fn agenthold_s_resuming_prompt_resumes_and_elicit_asks() {
        let got = parse("[agenthold] The sandbox stopped …\nelicit Which release?\nelicit");
        assert_eq!(
            got,
            vec![Command::Resume, Command::Elicit("Which release?".into()), Command::Echo("elicit".into())]
        );
    }

    #[test]
    fn malformed_commands_echo() {
        for line in [
            "sleep soon",
            "flood 1",
            "flood 1 -2",
            "big 99999999999",
            "write",
            "tool",
            "usage 1",
            "crash x",
            "stop",
            "run",
            "hang now",
            "plan",
            "fetch",
            "fetch https://h/ novalue",
            "fetch https://h/ :v",
            "mcp",
        ] {
            let got = parse_line(line);
            let ok = matches!(&got, Some(Command::Echo(l)) if l == line)
                || (line == "plan" && got == Some(Command::Plan(vec![])));
            assert!(ok, "{line:?} parsed as {got:?}");
        }
    }

    #[test]
    fn unescape_keeps_unknown_escapes() {
        assert_eq!(unescape(r"a\nb\tc\\n\x\"), "a\nb\tc\\n\\x\\");
    }
}
