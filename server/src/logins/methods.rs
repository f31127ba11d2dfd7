//! Signing in inside one sandbox (seed 003): the login methods a harness advertises in its
//! `initialize` answer (`authMethods`), and for each the terminal command that signs in — a
//! `terminal` method re-runs the harness's own program with its `args`; a method with
//! `_meta["terminal-auth"] {command, args}` (OpenCode) runs that; otherwise the adapter may name
//! one (`HarnessAdapter::terminal_login`, e.g. `claude /login`). The advertised methods are read
//! (bounded) by `agenthold_core::acp::auth_methods`, the one reading the supervisor signs in by.

use agenthold_core::acp::auth_methods::{self, MethodKind};
use serde::Serialize;
use serde_json::Value;

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

/// The methods in an `initialize` answer; `program` is the harness's own executable (for
/// `terminal` methods), `adapter` names a command for a method that carries none.
pub fn from_initialize(
    init: &Value,
    program: Option<&str>,
    adapter: &dyn Fn(&str) -> Option<Vec<String>>,
) -> Vec<LoginMethod> {
    auth_methods::read(init)
        .into_iter()
        .map(|method| {
            let terminal = match method.kind {
                MethodKind::Terminal { args } => program.filter(|p| !p.is_empty()).zip(args).map(|(program, args)| {
                    let mut argv = vec![program.to_owned()];
                    argv.extend(args);
                    argv
                }),
                _ => method.terminal_auth.or_else(|| adapter(&method.id)),
            };
            let name = method.name.unwrap_or_else(|| method.id.clone());
            LoginMethod { id: method.id, name, description: method.description, terminal }
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
        assert_eq!(methods.len(), auth_methods::MAX_METHODS);
        assert!(methods[0].name.chars().count() <= auth_methods::MAX_TEXT_CHARS);
        let odd =
            json!({"authMethods": [{"name": "no id"}, {"id": 5}, {"id": "t", "type": "terminal", "args": [1]}, "x"]});
        let methods = from_initialize(&odd, Some("p"), &none);
        assert_eq!(methods.len(), 1);
        assert_eq!(methods[0].terminal, None, "a non-text argument: no command");
        assert!(from_initialize(&json!(null), None, &none).is_empty());
    }
}
