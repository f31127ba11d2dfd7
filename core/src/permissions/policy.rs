//! Policies: rules plus a default answer, as written in JSON by the server's owner (rules only)
//! and by an agent's operators (rules and default); their validation, with errors naming the
//! offending rule; and whether a rule matches a call.
//!
//! A rule is `{"effect": "read"|"write"|"exec"|"network", "path"?: <glob>, "outside_workdir"?:
//! true, "command"?: <pattern>, "answer": "allow"|"deny"|"ask"}` (no other fields). It matches a
//! call of its effect; `path` and `outside_workdir` narrow it to calls with at least one path
//! that matches the glob and (with `outside_workdir`) is not in the work folder — a call with no
//! paths never matches a narrowed rule; `command` (exec rules only) narrows it to calls whose
//! command line matches the pattern. Globs and patterns are described in [`super::glob`].
//! A policy is `{"rules": [rule…]?, "default": answer}`.

use serde::{Deserialize, Serialize, Serializer};
use serde_json::{Map, Value};

use super::call::Call;
use super::effect::Effect;
use super::glob::{CommandPattern, PathGlob};
use super::paths::is_under;

/// The most rules one list (the server's, or an agent's) may hold.
pub const MAX_RULES: usize = 64;

/// The longest reason an error repeats (serde's messages echo the input).
const MAX_REASON_CHARS: usize = 300;

/// What a rule or a default answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Answer {
    /// Let the call run.
    Allow,
    /// Refuse the call.
    Deny,
    /// Hand the call to a person.
    Ask,
}

impl Answer {
    /// The answer's name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Allow => "allow",
            Self::Deny => "deny",
            Self::Ask => "ask",
        }
    }
}

/// A validated rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    /// The effect the rule is about.
    pub effect: Effect,
    /// Narrows the rule to calls with a path matching this glob.
    pub path: Option<PathGlob>,
    /// Narrows the rule to calls with a path outside the work folder.
    pub outside_workdir: bool,
    /// Narrows an exec rule to command lines matching this pattern.
    pub command: Option<CommandPattern>,
    /// What the rule answers.
    pub answer: Answer,
}

/// A validated policy: rules in evaluation order, and the answer when none matches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    /// The agent's rules, checked after the server's.
    pub rules: Vec<Rule>,
    /// The answer for calls no rule matched (and calls without an effect).
    pub default: Answer,
}

/// Why a policy or rule list was rejected (the API answers 400 with it).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    /// Rule `index` (from 0) is malformed.
    #[error("rule {index}: {reason}")]
    Rule {
        /// The rule's position in its list, from 0.
        index: usize,
        /// What is wrong with it.
        reason: String,
    },
    /// The policy itself is malformed (not a rule).
    #[error("policy: {reason}")]
    Policy {
        /// What is wrong with it.
        reason: String,
    },
}

impl PolicyError {
    /// The stable machine-readable code for API answers.
    pub fn code(&self) -> crate::error_code::ErrorCode {
        crate::error_code::ErrorCode::InvalidPolicy
    }

    fn policy(reason: impl Into<String>) -> Self {
        Self::Policy { reason: reason.into() }
    }
}

/// A rule as written, before validation.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RuleSpec {
    effect: Effect,
    #[serde(default)]
    path: Option<String>,
    #[serde(default)]
    outside_workdir: Option<bool>,
    #[serde(default)]
    command: Option<String>,
    answer: Answer,
}

impl Rule {
    /// Parses and validates one rule; the error is the reason alone (callers add the index).
    pub fn parse(value: &Value) -> Result<Self, String> {
        if !value.is_object() {
            return Err("must be an object".to_owned());
        }
        let spec = RuleSpec::deserialize(value).map_err(|error| short(&error.to_string()))?;
        if spec.command.is_some() && spec.effect != Effect::Exec {
            return Err("`command` applies only to exec rules".to_owned());
        }
        if spec.effect == Effect::Network && (spec.path.is_some() || spec.outside_workdir.is_some()) {
            return Err("`path` and `outside_workdir` do not apply to network rules (a fetch has no paths)".to_owned());
        }
        if spec.outside_workdir == Some(false) {
            return Err("`outside_workdir` is either true or left out".to_owned());
        }
        let path = spec.path.as_deref().map(PathGlob::parse).transpose().map_err(|error| format!("`path` {error}"))?;
        let command = spec
            .command
            .as_deref()
            .map(CommandPattern::parse)
            .transpose()
            .map_err(|error| format!("`command` {error}"))?;
        Ok(Self {
            effect: spec.effect,
            path,
            outside_workdir: spec.outside_workdir == Some(true),
            command,
            answer: spec.answer,
        })
    }

    /// Whether the rule is narrowed (by path, work folder or command) rather than covering its
    /// whole effect.
    pub fn is_narrowed(&self) -> bool {
        self.path.is_some() || self.outside_workdir || self.command.is_some()
    }

    /// Whether the rule matches `call`; `workdir` is normalized (see [`super::paths`]).
    pub fn matches(&self, call: &Call, workdir: &str) -> bool {
        if call.effect != Some(self.effect) {
            return false;
        }
        if let Some(pattern) = &self.command
            && !call.command.as_deref().is_some_and(|command| pattern.matches(command))
        {
            return false;
        }
        if self.path.is_none() && !self.outside_workdir {
            return true;
        }
        call.paths.iter().any(|path| {
            self.path.as_ref().is_none_or(|glob| glob.matches(path))
                && !(self.outside_workdir && is_under(path, workdir))
        })
    }

    /// The rule as written (normalized: only the fields it has).
    pub fn to_json(&self) -> Value {
        let mut rule = Map::new();
        rule.insert("effect".into(), Value::from(self.effect.as_str()));
        if let Some(path) = &self.path {
            rule.insert("path".into(), Value::from(path.as_str()));
        }
        if self.outside_workdir {
            rule.insert("outside_workdir".into(), Value::Bool(true));
        }
        if let Some(command) = &self.command {
            rule.insert("command".into(), Value::from(command.as_str()));
        }
        rule.insert("answer".into(), Value::from(self.answer.as_str()));
        Value::Object(rule)
    }
}

/// Parses and validates a list of rules (the server's `policy.rules`).
pub fn parse_rules(value: &Value) -> Result<Vec<Rule>, PolicyError> {
    let Some(items) = value.as_array() else {
        return Err(PolicyError::policy("`rules` must be an array"));
    };
    if items.len() > MAX_RULES {
        return Err(PolicyError::policy(format!("at most {MAX_RULES} rules, not {}", items.len())));
    }
    items
        .iter()
        .enumerate()
        .map(|(index, item)| Rule::parse(item).map_err(|reason| PolicyError::Rule { index, reason }))
        .collect()
}

impl Policy {
    /// Parses and validates an agent's policy `{"rules": […]?, "default": answer}`.
    pub fn parse(value: &Value) -> Result<Self, PolicyError> {
        let Some(object) = value.as_object() else {
            return Err(PolicyError::policy("must be an object with `default` and optional `rules`"));
        };
        if let Some(unknown) = object.keys().find(|key| !matches!(key.as_str(), "rules" | "default")) {
            let unknown: String = unknown.chars().take(64).collect();
            return Err(PolicyError::policy(format!("unknown field `{unknown}`, expected `rules` or `default`")));
        }
        let rules = match object.get("rules") {
            None | Some(Value::Null) => Vec::new(),
            Some(rules) => parse_rules(rules)?,
        };
        let default = match object.get("default") {
            None | Some(Value::Null) => return Err(PolicyError::policy("`default` is required: allow, deny or ask")),
            Some(default) => Answer::deserialize(default)
                .map_err(|error| PolicyError::policy(format!("`default`: {}", short(&error.to_string()))))?,
        };
        Ok(Self { rules, default })
    }

    /// The policy as stored: `{"rules": […], "default": …}`.
    pub fn to_json(&self) -> Value {
        serde_json::json!({
            "rules": self.rules.iter().map(Rule::to_json).collect::<Vec<_>>(),
            "default": self.default.as_str(),
        })
    }
}

impl Serialize for Rule {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.to_json().serialize(serializer)
    }
}

impl Serialize for Policy {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.to_json().serialize(serializer)
    }
}

impl TryFrom<Value> for Policy {
    type Error = PolicyError;

    fn try_from(value: Value) -> Result<Self, Self::Error> {
        Self::parse(&value)
    }
}

impl<'de> Deserialize<'de> for Policy {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Self::parse(&Value::deserialize(deserializer)?).map_err(serde::de::Error::custom)
    }
}

impl<'de> Deserialize<'de> for Rule {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Self::parse(&Value::deserialize(deserializer)?).map_err(serde::de::Error::custom)
    }
}

fn short(reason: &str) -> String {
    if reason.chars().count() <= MAX_REASON_CHARS {
        return reason.to_owned();
    }
    let mut cut: String = reason.chars().take(MAX_REASON_CHARS).collect();
    cut.push('…');
    cut
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const WORKDIR: &str = "/home/agent";

    fn rule(value: Value) -> Rule {
        Rule::parse(&value).expect("valid rule")
    }

    fn call(effect: Effect, paths: &[&str], command: Option<&str>) -> Call {
        Call {
            effect: Some(effect),
            paths: paths.iter().map(|p| (*p).to_owned()).collect(),
            command: command.map(str::to_owned),
            ..Call::default()
        }
    }

    #[test]
    fn a_bare_rule_matches_its_whole_effect() {
        let read = rule(json!({"effect": "read", "answer": "allow"}));
        assert!(read.matches(&call(Effect::Read, &[], None), WORKDIR));
        assert!(read.matches(&call(Effect::Read, &["/etc/passwd"], None), WORKDIR));
        assert!(!read.matches(&call(Effect::Write, &["/etc/passwd"], None), WORKDIR));
        assert!(!read.matches(&Call::default(), WORKDIR), "a call without an effect matches no rule");
        assert!(!read.is_narrowed());
    }

    #[test]
    fn path_rules_match_any_path_and_never_a_pathless_call() {
        let env = rule(json!({"effect": "write", "path": "**/.env", "answer": "deny"}));
        assert!(env.matches(&call(Effect::Write, &["/home/agent/a.rs", "/home/agent/.env"], None), WORKDIR));
        assert!(!env.matches(&call(Effect::Write, &["/home/agent/a.rs"], None), WORKDIR));
        assert!(!env.matches(&call(Effect::Write, &[], None), WORKDIR));
        let rust = rule(json!({"effect": "write", "path": "/home/agent/**/*.rs", "answer": "allow"}));
        assert!(rust.matches(&call(Effect::Write, &["/home/agent/src/lib.rs"], None), WORKDIR));
        let etc = rule(json!({"effect": "read", "path": "/etc/*", "answer": "ask"}));
        assert!(etc.matches(&call(Effect::Read, &["/etc/shadow"], None), WORKDIR));
        assert!(!etc.matches(&call(Effect::Read, &["/etc/ssl/x"], None), WORKDIR));
    }

    #[test]
    fn outside_workdir_matches_a_path_outside_the_work_folder() {
        let outside = rule(json!({"effect": "write", "outside_workdir": true, "answer": "ask"}));
        assert!(outside.matches(&call(Effect::Write, &["/home/agent/a", "/tmp/b"], None), WORKDIR));
        assert!(!outside.matches(&call(Effect::Write, &["/home/agent", "/home/agent/x/y"], None), WORKDIR));
        assert!(outside.matches(&call(Effect::Write, &["/home/agentx/y"], None), WORKDIR));
        assert!(!outside.matches(&call(Effect::Write, &[], None), WORKDIR));
        let outside_env = rule(json!({"effect": "read", "path": "**/.env", "outside_workdir": true, "answer": "deny"}));
        assert!(
            !outside_env.matches(&call(Effect::Read, &["/home/agent/.env", "/tmp/x"], None), WORKDIR),
            "per path: both must hold"
        );
        assert!(outside_env.matches(&call(Effect::Read, &["/srv/.env"], None), WORKDIR));
    }

    #[test]
    fn command_rules_match_the_command_line() {
        let git = rule(json!({"effect": "exec", "command": "git *", "answer": "allow"}));
        assert!(git.matches(&call(Effect::Exec, &[], Some("git status")), WORKDIR));
        assert!(!git.matches(&call(Effect::Exec, &[], Some("rm -rf /")), WORKDIR));
        assert!(!git.matches(&call(Effect::Exec, &[], None), WORKDIR), "no command, no match");
        let rm = rule(json!({"effect": "exec", "command": "rm -rf *", "answer": "deny"}));
        assert!(rm.matches(&call(Effect::Exec, &[], Some("rm -rf /home/agent")), WORKDIR));
    }

    #[test]
    fn validation_names_the_rule_and_why() {
        let cases = [
            (
                json!([{"effect": "read", "answer": "allow"}, {"effect": "exec", "answer": "maybe"}]),
                1,
                "unknown variant `maybe`",
            ),
            (json!([{"effect": "delete", "answer": "allow"}]), 0, "unknown variant `delete`"),
            (json!([{"effect": "read", "answer": "allow", "paht": "/x"}]), 0, "unknown field `paht`"),
            (json!([{"effect": "read"}]), 0, "missing field `answer`"),
            (
                json!([{"effect": "read", "answer": "allow"}, {"effect": "read", "answer": "allow"}, "x"]),
                2,
                "must be an object",
            ),
            (json!([{"effect": "write", "command": "x", "answer": "deny"}]), 0, "`command` applies only to exec"),
            (json!([{"effect": "network", "path": "/x", "answer": "deny"}]), 0, "do not apply to network"),
            (json!([{"effect": "write", "outside_workdir": false, "answer": "deny"}]), 0, "either true or left out"),
            (json!([{"effect": "write", "outside_workdir": "yes", "answer": "deny"}]), 0, "invalid type"),
            (json!([{"effect": "write", "path": "src/*.rs", "answer": "deny"}]), 0, "`path` must be absolute"),
            (
                json!([{"effect": "write", "path": "/a/b**", "answer": "deny"}]),
                0,
                "`path` `**` must be a whole segment",
            ),
            (json!([{"effect": "exec", "command": "  ", "answer": "deny"}]), 0, "`command` is empty"),
        ];
        for (rules, index, reason) in cases {
            let error = parse_rules(&rules).expect_err("invalid");
            let PolicyError::Rule { index: got, reason: why } = &error else { panic!("{error}") };
            assert_eq!(*got, index, "{error}");
            assert!(why.contains(reason), "{error} lacks {reason}");
            assert!(error.to_string().starts_with(&format!("rule {index}: ")), "{error}");
            assert_eq!(error.code().as_str(), "INVALID_POLICY");
        }
    }

    #[test]
    fn too_many_rules_are_refused() {
        let rules: Vec<Value> = (0..=MAX_RULES).map(|_| json!({"effect": "read", "answer": "allow"})).collect();
        assert!(matches!(parse_rules(&json!(rules)), Err(PolicyError::Policy { .. })));
        assert!(parse_rules(&json!(rules[..MAX_RULES])).is_ok());
        assert!(parse_rules(&json!({"effect": "read"})).is_err());
    }

    #[test]
    fn policy_parses_and_round_trips() {
        let value = json!({
            "rules": [
                {"effect": "exec", "command": "git *", "answer": "allow"},
                {"effect": "write", "outside_workdir": true, "path": "/tmp/**", "answer": "ask"},
            ],
            "default": "deny",
        });
        let policy = Policy::parse(&value).expect("valid");
        assert_eq!(policy.default, Answer::Deny);
        assert_eq!(policy.rules.len(), 2);
        assert_eq!(
            policy.to_json()["rules"][1],
            json!({"effect": "write", "path": "/tmp/**", "outside_workdir": true, "answer": "ask"})
        );
        let again: Policy = serde_json::from_value(serde_json::to_value(&policy).expect("serializes")).expect("parses");
        assert_eq!(again, policy);
        assert_eq!(Policy::parse(&json!({"default": "ask"})).expect("rules optional").rules, vec![]);
    }

    #[test]
    fn malformed_policies_say_why() {
        for (value, reason) in [
            (json!([]), "must be an object"),
            (json!({"rules": []}), "`default` is required"),
            (json!({"default": "sometimes"}), "`default`: unknown variant"),
            (json!({"default": "ask", "posture": "guarded"}), "unknown field `posture`"),
            (json!({"default": "ask", "rules": {}}), "must be an array"),
        ] {
            let error = Policy::parse(&value).expect_err("invalid");
            assert!(error.to_string().contains(reason), "{error} lacks {reason}");
        }
        let error = Policy::parse(&json!({"default": "ask", "rules": [{"effect": "read", "answer": "allow"}, {}]}))
            .expect_err("invalid");
        assert!(matches!(error, PolicyError::Rule { index: 1, .. }), "{error}");
    }

    #[test]
    fn huge_values_give_short_errors() {
        let huge = "z".repeat(1_000_000);
        let error = parse_rules(&json!([{"effect": huge, "answer": "allow"}])).expect_err("invalid");
        assert!(error.to_string().len() < 400, "{}", error.to_string().len());
        let error = Policy::parse(&json!({huge.clone(): 1, "default": "ask"})).expect_err("invalid");
        assert!(error.to_string().len() < 400);
    }
}
