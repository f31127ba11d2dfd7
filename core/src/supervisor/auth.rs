//! Signing a harness in when a session call (`session/new`, `session/load`, `session/resume`)
//! answers `auth_required` (-32000): which login method agenthold calls `authenticate` with —
//! the one the agent names (`auth_method`), else one its adapter may call on its own (its key is
//! in the harness's environment), else the only method the harness advertised whose key
//! agenthold delivers (an `env_var` method whose variables are all set) — and how the harness's
//! answers read. Each call is signed in for and retried once (`Pending`'s `retry`).

use serde_json::Value;

use crate::acp::auth_methods::{self, MethodKind};
use crate::acp::wire::code;

/// The longest message of the harness's quoted in an error.
const MAX_MESSAGE_CHARS: usize = 500;

/// What the server knows about signing one harness process in.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Auth {
    /// The method the agent names (`auth_method`): the only one tried when set.
    pub named: Option<String>,
    /// Methods its adapter may call on its own, whose key the harness's environment holds
    /// (`HarnessAdapter::auto_authenticate`).
    pub automatic: Vec<String>,
    /// The names (never the values) of the variables in the harness's environment.
    pub delivered: Vec<String>,
    /// The methods the harness advertised in its `initialize` answer.
    advertised: Vec<Advertised>,
}

/// A login method as the harness advertised it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Advertised {
    id: String,
    /// For an `env_var` method, the variables it needs (optional ones left out).
    needs: Option<Vec<String>>,
}

impl Auth {
    /// Settings for a harness about to start.
    pub fn new(named: Option<String>, automatic: Vec<String>, delivered: Vec<String>) -> Self {
        Self { named, automatic, delivered, advertised: Vec::new() }
    }

    /// Reads the login methods of the harness's `initialize` answer (what it sent is bounded
    /// here, not trusted to be small).
    pub fn read_advertised(&mut self, init: &Value) {
        self.advertised = advertised(init);
    }

    /// The method to sign in with when the harness asks: the named one, else the adapter's
    /// first, else the only advertised method whose key is delivered; `None` when none fits.
    pub fn choose(&self) -> Option<String> {
        if let Some(named) = &self.named {
            return Some(named.clone());
        }
        if let Some(method) = self.automatic.first() {
            return Some(method.clone());
        }
        let delivered = |needs: &Vec<String>| !needs.is_empty() && needs.iter().all(|n| self.delivered.contains(n));
        let mut fitting = self.advertised.iter().filter(|m| m.needs.as_ref().is_some_and(delivered));
        match (fitting.next(), fitting.next()) {
            (Some(only), None) => Some(only.id.clone()),
            _ => None,
        }
    }
}

/// The ids (and an `env_var` method's variables) of the methods in an `initialize` answer;
/// `terminal` methods are left out (a person runs those; `authenticate` must not be called).
fn advertised(init: &Value) -> Vec<Advertised> {
    let methods = auth_methods::read(init).into_iter();
    methods
        .filter_map(|method| {
            let needs = match method.kind {
                MethodKind::Terminal { .. } => return None,
                MethodKind::EnvVar { needs } => Some(needs),
                MethodKind::Agent => None,
            };
            Some(Advertised { id: method.id, needs })
        })
        .collect()
}

/// Whether a JSON-RPC error asks the client to sign in (ACP `auth_required`, -32000).
pub fn asks_to_sign_in(error: &Value) -> bool {
    error.get("code").and_then(Value::as_i64) == Some(code::AUTH_REQUIRED)
}

/// A harness's JSON-RPC error as people read it: its message (bounded), else the error itself.
pub fn message(error: &Value) -> String {
    let text = match error.get("message").and_then(Value::as_str) {
        Some(message) if !message.trim().is_empty() => message.to_owned(),
        _ => error.to_string(),
    };
    let mut kept: String = text.chars().take(MAX_MESSAGE_CHARS).collect();
    if kept.len() < text.len() {
        kept.push('…');
    }
    kept
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn auth(named: Option<&str>, automatic: &[&str], delivered: &[&str], init: Value) -> Auth {
        let mut auth = Auth::new(
            named.map(str::to_owned),
            automatic.iter().map(|m| (*m).to_owned()).collect(),
            delivered.iter().map(|v| (*v).to_owned()).collect(),
        );
        auth.read_advertised(&init);
        auth
    }

    #[test]
    fn the_named_method_comes_first_then_the_adapter_s_then_the_only_one_whose_key_is_delivered() {
        let init = json!({"authMethods": [
            {"id": "oauth", "name": "Browser"},
            {"id": "key", "name": "Key", "type": "env_var", "vars": [{"name": "ACME_API_KEY"}, {"name": "ACME_ORG", "optional": true}]},
            {"id": "login", "name": "Login", "type": "terminal", "args": ["login"]},
        ]});
        assert_eq!(
            auth(Some("oauth"), &["api-key"], &["ACME_API_KEY"], init.clone()).choose().as_deref(),
            Some("oauth")
        );
        assert_eq!(auth(None, &["api-key"], &["ACME_API_KEY"], init.clone()).choose().as_deref(), Some("api-key"));
        assert_eq!(auth(None, &[], &["ACME_API_KEY"], init.clone()).choose().as_deref(), Some("key"));
        assert_eq!(auth(None, &[], &["OTHER"], init.clone()).choose(), None, "its key is not delivered");
        assert_eq!(auth(None, &[], &[], json!({})).choose(), None, "nothing advertised");
        // An agent-type method's key cannot be known: never guessed.
        assert_eq!(
            auth(None, &[], &["ACME_API_KEY"], json!({"authMethods": [{"id": "a", "name": "A"}]})).choose(),
            None
        );
    }

    #[test]
    fn two_methods_whose_keys_are_delivered_are_not_guessed_between() {
        let init = json!({"authMethods": [
            {"id": "a", "name": "A", "type": "env_var", "vars": [{"name": "A_KEY"}]},
            {"id": "b", "name": "B", "type": "env_var", "varName": "B_KEY"},
        ]});
        assert_eq!(auth(None, &[], &["A_KEY"], init.clone()).choose().as_deref(), Some("a"));
        assert_eq!(auth(None, &[], &["B_KEY"], init.clone()).choose().as_deref(), Some("b"), "the draft's varName");
        assert_eq!(auth(None, &[], &["A_KEY", "B_KEY"], init).choose(), None);
    }

    #[test]
    fn what_the_harness_advertised_is_bounded() {
        let many: Vec<Value> = (0..100)
            .map(|i| json!({"id": format!("m{i}"), "type": "env_var", "vars": [{"name": format!("K{i}")}]}))
            .collect();
        let auth = auth(None, &[], &["K50"], json!({"authMethods": many}));
        assert_eq!(auth.advertised.len(), auth_methods::MAX_METHODS);
        assert_eq!(auth.choose(), None, "the 51st method is not read");
        let odd = json!({"authMethods": [{"id": "x".repeat(500)}, {"id": 5}, "x", {"name": "no id"}, {"id": "ok"}]});
        assert_eq!(advertised(&odd), vec![Advertised { id: "ok".to_owned(), needs: None }]);
    }

    #[test]
    fn auth_required_is_code_minus_32000_and_messages_are_bounded() {
        assert!(asks_to_sign_in(&json!({"code": -32000, "message": "Authentication required"})));
        assert!(!asks_to_sign_in(&json!({"code": -32603, "message": "Authentication required"})));
        assert_eq!(message(&json!({"code": 1, "message": "no"})), "no");
        assert_eq!(message(&json!({"code": 1})), r#"{"code":1}"#);
        assert!(message(&json!({"message": "y".repeat(2000)})).chars().count() <= MAX_MESSAGE_CHARS + 1);
    }
}
