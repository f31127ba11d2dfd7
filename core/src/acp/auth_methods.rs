//! The login methods a harness advertises in its `initialize` answer (`authMethods`), read once
//! into typed values: the supervisor signs a harness in with one (`supervisor::auth`), the server
//! shows them and runs a `terminal` one in the web terminal (`logins::methods`). Bounded and
//! pure: what the harness sent is read, never trusted to be small or well-formed.
//!
//! Shapes read: `{"id" (or the first draft's "methodId"), "name", "description", "type"}` where
//! `type` is absent or `agent` (the harness signs itself in), `env_var` (`vars: [{"name",
//! "optional"}]`, or the first draft's `varName`) or `terminal` (`args`: re-run the harness's
//! own program); any method may carry `_meta["terminal-auth"] {command, args}` (OpenCode).

use serde_json::Value;

/// The most methods read.
pub const MAX_METHODS: usize = 32;
/// The most variables of one `env_var` method read.
const MAX_VARS: usize = 16;
/// The most arguments of one command read.
const MAX_ARGS: usize = 32;
/// The longest method id or variable name kept (a longer one is skipped: it could not be named
/// back to the harness truncated).
pub const MAX_NAME_CHARS: usize = 128;
/// The longest text kept (a name, a description, an argument), truncated.
pub const MAX_TEXT_CHARS: usize = 300;

/// One advertised login method.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthMethod {
    /// Its id (what `authenticate` is called with).
    pub id: String,
    /// Its name, control characters removed (`None`: none sent).
    pub name: Option<String>,
    /// What it does.
    pub description: Option<String>,
    /// How it signs in.
    pub kind: MethodKind,
    /// `_meta["terminal-auth"]`: the command (and arguments) that sign in from a terminal; `None`
    /// when absent, or when an argument is not text (such a command is not guessed at).
    pub terminal_auth: Option<Vec<String>>,
}

/// How a method signs in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MethodKind {
    /// The harness signs itself in (`agent`, or no type).
    Agent,
    /// With keys in its environment: the variables it needs (optional ones left out).
    EnvVar {
        /// The variables' names.
        needs: Vec<String>,
    },
    /// A person runs the harness's own program with these arguments (`None`: one is not text).
    Terminal {
        /// The arguments.
        args: Option<Vec<String>>,
    },
}

/// The login methods of an `initialize` answer (at most [`MAX_METHODS`]; methods without a
/// usable id are left out).
pub fn read(init: &Value) -> Vec<AuthMethod> {
    let methods = init.get("authMethods").and_then(Value::as_array);
    methods.into_iter().flatten().take(MAX_METHODS).filter_map(method).collect()
}

fn method(method: &Value) -> Option<AuthMethod> {
    let id = name(method.get("id")).or_else(|| name(method.get("methodId")))?;
    let kind = match method.get("type").and_then(Value::as_str) {
        Some("env_var") => {
            let vars = method.get("vars").and_then(Value::as_array).into_iter().flatten().take(MAX_VARS);
            let mut needs: Vec<String> = vars
                .filter(|var| var.get("optional").and_then(Value::as_bool) != Some(true))
                .filter_map(|var| name(var.get("name")))
                .collect();
            needs.extend(name(method.get("varName")));
            MethodKind::EnvVar { needs }
        }
        Some("terminal") => MethodKind::Terminal { args: args(method.get("args")) },
        _ => MethodKind::Agent,
    };
    let terminal_auth = method.pointer("/_meta/terminal-auth").and_then(|auth| {
        let command = text(auth.get("command")).filter(|c| !c.is_empty())?;
        let mut argv = vec![command];
        argv.extend(args(auth.get("args"))?);
        Some(argv)
    });
    Some(AuthMethod {
        id,
        name: text(method.get("name")),
        description: text(method.get("description")),
        kind,
        terminal_auth,
    })
}

/// An id or a variable name: text, not empty, no control characters, at most [`MAX_NAME_CHARS`].
fn name(value: Option<&Value>) -> Option<String> {
    value
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty() && s.chars().count() <= MAX_NAME_CHARS && !s.chars().any(char::is_control))
        .map(str::to_owned)
}

/// Text as shown: control characters removed, at most [`MAX_TEXT_CHARS`].
fn text(value: Option<&Value>) -> Option<String> {
    let text = value?.as_str()?;
    Some(text.chars().filter(|c| !c.is_control()).take(MAX_TEXT_CHARS).collect())
}

/// Arguments (absent: none); `None` when one is not text.
fn args(value: Option<&Value>) -> Option<Vec<String>> {
    let all = value.and_then(Value::as_array).into_iter().flatten().take(MAX_ARGS);
    all.map(|arg| arg.as_str().map(|a| a.chars().take(MAX_TEXT_CHARS).collect())).collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn each_kind_is_read_with_what_it_needs() {
        let init = json!({"authMethods": [
            {"id": "oauth", "name": "Browser", "description": "opens a\nbrowser"},
            {"id": "key", "name": "Key", "type": "env_var", "vars": [{"name": "ACME_API_KEY"}, {"name": "ACME_ORG", "optional": true}]},
            {"methodId": "draft", "type": "env_var", "varName": "DRAFT_KEY"},
            {"id": "login", "type": "terminal", "args": ["--cli", "login"]},
            {"id": "oc", "_meta": {"terminal-auth": {"command": "opencode", "args": ["auth", "login"]}}},
        ]});
        let methods = read(&init);
        assert_eq!(methods.len(), 5);
        assert_eq!(methods[0].kind, MethodKind::Agent);
        assert_eq!(methods[0].description.as_deref(), Some("opens abrowser"), "control characters removed");
        assert_eq!(methods[1].kind, MethodKind::EnvVar { needs: vec!["ACME_API_KEY".into()] });
        assert_eq!(
            (methods[2].id.as_str(), &methods[2].kind),
            ("draft", &MethodKind::EnvVar { needs: vec!["DRAFT_KEY".into()] })
        );
        assert_eq!(methods[3].kind, MethodKind::Terminal { args: Some(vec!["--cli".into(), "login".into()]) });
        assert_eq!(methods[4].terminal_auth, Some(["opencode", "auth", "login"].map(String::from).to_vec()));
    }

    #[test]
    fn what_the_harness_sent_is_bounded_and_odd_values_are_dropped() {
        let many: Vec<Value> = (0..100).map(|i| json!({"id": format!("m{i}"), "name": "x".repeat(5000)})).collect();
        let methods = read(&json!({"authMethods": many}));
        assert_eq!(methods.len(), MAX_METHODS);
        assert_eq!(methods[0].name.as_ref().map(|n| n.chars().count()), Some(MAX_TEXT_CHARS));
        let odd = json!({"authMethods": [
            {"id": "x".repeat(500)}, {"id": 5}, "x", {"name": "no id"}, {"id": "a\u{7}b"},
            {"id": "t", "type": "terminal", "args": [1]},
            {"id": "m", "_meta": {"terminal-auth": {"command": "", "args": []}}},
        ]});
        let methods = read(&odd);
        let ids: Vec<&str> = methods.iter().map(|m| m.id.as_str()).collect();
        assert_eq!(ids, ["t", "m"]);
        assert_eq!(methods[0].kind, MethodKind::Terminal { args: None }, "a non-text argument: no command");
        assert_eq!(methods[1].terminal_auth, None, "no command");
        assert!(read(&json!(null)).is_empty());
    }
}
