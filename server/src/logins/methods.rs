//! Signing in inside one sandbox (seed 003): the login methods a harness advertises in its
//! `initialize` answer (`authMethods`), and for each the terminal command that signs in — a
//! `terminal` method re-runs the harness's own program with its `args`; a method with
//! `_meta["terminal-auth"] {command, args}` (OpenCode) runs that; otherwise the adapter may name
//! one (`HarnessAdapter::terminal_login`, e.g. `claude /login`). Pure and bounded: what the
//! harness sent is read, never trusted to be small.

use serde::Serialize;
use serde_json::Value;

/// The most methods read.
const MAX_METHODS: usize = 32;
/// The most arguments of one command.
const MAX_ARGS: usize = 32;
/// The longest string kept (id, name, description, argument).
const MAX_CHARS: usize = 300;

/// A login method as the agent's view shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct LoginMethod {
    /// Its id (`GET /api/v1/agents/{id}/terminal?login=<id>`).
    pub id: String,
    /// Its name.
    pub name: String,
    /// What it does.
    #[schema(required = true)]
    pub description: Option<String>,
    /// The command the web terminal runs to sign in (`None`: the server cannot run this one).
    #[schema(required = true)]
    pub terminal: Option<Vec<String>>,
}

fn text(value: Option<&Value>) -> Option<String> {
    let text = value?.as_str()?;
    let flat: String = text.chars().filter(|c| !c.is_control()).take(MAX_CHARS).collect();
    Some(flat)
}

fn argv(command: Option<String>, args: Option<&Value>) -> Option<Vec<String>> {
    let mut argv = vec![command.filter(|c| !c.is_empty())?];
    for arg in args.and_then(Value::as_array).into_iter().flatten().take(MAX_ARGS) {
        // An argument that is not text makes the command unsafe to guess at: none.
        argv.push(arg.as_str().map(|a| a.chars().take(MAX_CHARS).collect())?);
    }
    Some(argv)
}

/// The methods in an `initialize` answer; `program` is the harness's own executable (for
/// `terminal` methods), `adapter` names a command for a method that carries none.
pub fn from_initialize(
    init: &Value,
    program: Option<&str>,
    adapter: &dyn Fn(&str) -> Option<Vec<String>>,
) -> Vec<LoginMethod> {
    let methods = init.get("authMethods").and_then(Value::as_array);
    methods
        .into_iter()
        .flatten()
        .take(MAX_METHODS)
        .filter_map(|method| {
            let id = text(method.get("id")).filter(|id| !id.is_empty())?;
            let name = text(method.get("name")).unwrap_or_else(|| id.clone());
            let description = text(method.get("description"));
            let terminal = if method.get("type").and_then(Value::as_str) == Some("terminal") {
                argv(program.map(str::to_owned), method.get("args"))
            } else if let Some(auth) = method.pointer("/_meta/terminal-auth") {
                argv(text(auth.get("command")), auth.get("args"))
            } else {
                adapter(&id)
            };
            Some(LoginMethod { id, name, description, terminal })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn none(_: &str) -> Option<Vec<String>> {
        None
    }

    #[test]
    fn terminal_methods_rerun_the_harness_and_terminal_auth_runs_its_command() {
        let init = json!({"authMethods": [
            {"id": "claude-ai-login", "name": "Log in with Claude", "type": "terminal", "args": ["--cli", "auth", "login", "--claudeai"]},
            {"id": "opencode-login", "name": "Login with opencode", "_meta": {"terminal-auth": {"command": "opencode", "args": ["auth", "login"]}}},
            {"id": "api-key", "name": "API key"},
        ]});
        let methods = from_initialize(&init, Some("claude-agent-acp"), &none);
        let argvs: Vec<Option<Vec<String>>> = methods.iter().map(|m| m.terminal.clone()).collect();
        assert_eq!(
            argvs[0],
            Some(["claude-agent-acp", "--cli", "auth", "login", "--claudeai"].map(String::from).to_vec())
        );
        assert_eq!(argvs[1], Some(["opencode", "auth", "login"].map(String::from).to_vec()));
        assert_eq!(argvs[2], None, "an agent-type method the server cannot run in a terminal");
        let adapter = |id: &str| (id == "api-key").then(|| vec!["login-tool".to_owned()]);
        assert_eq!(from_initialize(&init, None, &adapter)[2].terminal, Some(vec!["login-tool".to_owned()]));
        assert_eq!(from_initialize(&init, None, &none)[0].terminal, None, "no program known");
    }

    #[test]
    fn what_the_harness_sent_is_bounded_and_odd_values_are_dropped() {
        let many: Vec<Value> = (0..100).map(|i| json!({"id": format!("m{i}"), "name": "x".repeat(5000)})).collect();
        let methods = from_initialize(&json!({"authMethods": many}), None, &none);
        assert_eq!(methods.len(), MAX_METHODS);
        assert!(methods[0].name.chars().count() <= MAX_CHARS);
        let odd =
            json!({"authMethods": [{"name": "no id"}, {"id": 5}, {"id": "t", "type": "terminal", "args": [1]}, "x"]});
        let methods = from_initialize(&odd, Some("p"), &none);
        assert_eq!(methods.len(), 1);
        assert_eq!(methods[0].terminal, None, "a non-text argument: no command");
        assert!(from_initialize(&json!(null), None, &none).is_empty());
    }
}
