//! Deciding a call: what the posture, the server owner's rules and the agent's policy answer,
//! and what decided it.
//!
//! - **autonomous** allows (`auto`) and **approval** asks a person (`person`), except where the
//!   server's rules say otherwise: the first server rule matching the call binds every posture
//!   when it answers `deny` or `ask`; a server `allow` leaves the call to the posture.
//! - **guarded** checks the server's rules, then the agent's, in order; the first match decides
//!   and the agent's default answers the rest. Without an agent policy it is `POLICY_MISSING`.
//!
//! So a server `deny` is never relaxed: it is checked first in every posture and nothing the
//! agent sends comes before it. A call cut short to stay bounded (`Call::truncated`) is never
//! allowed where a narrowed rule of its effect could have seen the part that was cut: it is
//! asked instead (`truncated`).

use serde::{Serialize, Serializer};

use super::call::Call;
use super::paths::normalized_workdir;
use super::policy::{Answer, Policy, Rule};
use super::posture::Posture;

/// Where a rule comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Origin {
    /// The server owner's configuration (checked first).
    Server,
    /// The agent's policy.
    Agent,
}

impl Origin {
    /// The origin's name in events.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Server => "server",
            Self::Agent => "agent",
        }
    }
}

/// What decided a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DecidedBy {
    /// The autonomous posture.
    Auto,
    /// A rule: its origin and position (from 0) in its list.
    Policy {
        /// Whose rule.
        origin: Origin,
        /// Its index in that list.
        index: usize,
    },
    /// The agent policy's default.
    Default,
    /// The approval posture: a person answers.
    PersonRequired,
    /// The call was cut short and a rule might have seen what was cut: a person answers.
    Truncated,
}

impl DecidedBy {
    /// The label recorded in events: `auto`, `policy:server:0`, `policy:agent:2`, `default`,
    /// `person`, `truncated`.
    pub fn label(&self) -> String {
        match self {
            Self::Auto => "auto".to_owned(),
            Self::Policy { origin, index } => format!("policy:{}:{index}", origin.as_str()),
            Self::Default => "default".to_owned(),
            Self::PersonRequired => "person".to_owned(),
            Self::Truncated => "truncated".to_owned(),
        }
    }
}

impl Serialize for DecidedBy {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.label())
    }
}

/// The answer to a call and what decided it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Decision {
    /// Allow, deny, or ask a person.
    pub answer: Answer,
    /// What decided.
    pub by: DecidedBy,
}

/// Why no decision could be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecideError {
    /// A guarded agent without a policy.
    #[error("the agent is guarded but has no policy; set one or choose another posture")]
    PolicyMissing,
}

impl DecideError {
    /// The stable machine-readable code.
    pub fn code(&self) -> crate::error_code::ErrorCode {
        match self {
            Self::PolicyMissing => crate::error_code::ErrorCode::PolicyMissing,
        }
    }
}

/// Checks that `posture` can run with `agent_policy` (call before starting a guarded agent).
pub fn check_ready(posture: Posture, agent_policy: Option<&Policy>) -> Result<(), DecideError> {
    if posture == Posture::Guarded && agent_policy.is_none() {
        return Err(DecideError::PolicyMissing);
    }
    Ok(())
}

/// Decides `call` (see the module documentation); `workdir` is the agent's work folder.
pub fn decide(
    posture: Posture,
    server_rules: &[Rule],
    agent_policy: Option<&Policy>,
    call: &Call,
    workdir: &str,
) -> Result<Decision, DecideError> {
    check_ready(posture, agent_policy)?;
    let workdir = normalized_workdir(workdir);
    let server_match = first_match(server_rules, call, &workdir);
    let by_server =
        |index: usize, answer: Answer| Decision { answer, by: DecidedBy::Policy { origin: Origin::Server, index } };
    let decision = match (posture, server_match) {
        (Posture::Guarded, Some((index, answer))) => by_server(index, answer),
        (_, Some((index, answer @ (Answer::Deny | Answer::Ask)))) => by_server(index, answer),
        (Posture::Autonomous, _) => Decision { answer: Answer::Allow, by: DecidedBy::Auto },
        (Posture::Approval, _) => Decision { answer: Answer::Ask, by: DecidedBy::PersonRequired },
        (Posture::Guarded, None) => {
            let policy = agent_policy.ok_or(DecideError::PolicyMissing)?;
            match first_match(&policy.rules, call, &workdir) {
                Some((index, answer)) => Decision { answer, by: DecidedBy::Policy { origin: Origin::Agent, index } },
                None => Decision { answer: policy.default, by: DecidedBy::Default },
            }
        }
    };
    if decision.answer == Answer::Allow && call.truncated {
        let agent_rules = match posture {
            Posture::Guarded => agent_policy.map_or(&[][..], |policy| &policy.rules[..]),
            _ => &[],
        };
        let could_have_seen_the_cut =
            server_rules.iter().chain(agent_rules).any(|rule| Some(rule.effect) == call.effect && rule.is_narrowed());
        if could_have_seen_the_cut {
            return Ok(Decision { answer: Answer::Ask, by: DecidedBy::Truncated });
        }
    }
    Ok(decision)
}

/// The rules a guarded turn runs under, in evaluation order, with their origin and index.
pub fn rules_in_force<'a>(
    server_rules: &'a [Rule],
    agent_policy: Option<&'a Policy>,
) -> impl Iterator<Item = (Origin, usize, &'a Rule)> {
    let server = server_rules.iter().enumerate().map(|(index, rule)| (Origin::Server, index, rule));
    let agent = agent_policy.into_iter().flat_map(|policy| policy.rules.iter().enumerate());
    server.chain(agent.map(|(index, rule)| (Origin::Agent, index, rule)))
}

/// The rule a decision names, if it was decided by one.
pub fn deciding_rule<'a>(
    decision: &Decision,
    server_rules: &'a [Rule],
    agent_policy: Option<&'a Policy>,
) -> Option<&'a Rule> {
    match decision.by {
        DecidedBy::Policy { origin: Origin::Server, index } => server_rules.get(index),
        DecidedBy::Policy { origin: Origin::Agent, index } => agent_policy?.rules.get(index),
        _ => None,
    }
}

fn first_match(rules: &[Rule], call: &Call, workdir: &str) -> Option<(usize, Answer)> {
    rules.iter().enumerate().find(|(_, rule)| rule.matches(call, workdir)).map(|(index, rule)| (index, rule.answer))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::permissions::effect::Effect;
    use crate::permissions::policy::parse_rules;
    use serde_json::{Value, json};

    const WORKDIR: &str = "/home/agent";

    fn rules(value: Value) -> Vec<Rule> {
        parse_rules(&value).expect("valid rules")
    }

    fn policy(value: Value) -> Policy {
        Policy::parse(&value).expect("valid policy")
    }

    fn exec(command: &str) -> Call {
        Call { effect: Some(Effect::Exec), command: Some(command.to_owned()), ..Call::default() }
    }

    fn write(paths: &[&str]) -> Call {
        Call { effect: Some(Effect::Write), paths: paths.iter().map(|p| (*p).to_owned()).collect(), ..Call::default() }
    }

    fn guarded(server: &[Rule], agent: &Policy, call: &Call) -> Decision {
        decide(Posture::Guarded, server, Some(agent), call, WORKDIR).expect("decides")
    }

    fn by_server(index: usize) -> DecidedBy {
        DecidedBy::Policy { origin: Origin::Server, index }
    }

    fn by_agent(index: usize) -> DecidedBy {
        DecidedBy::Policy { origin: Origin::Agent, index }
    }

    #[test]
    fn autonomous_allows_and_approval_asks() {
        let call = exec("ls");
        let auto = decide(Posture::Autonomous, &[], None, &call, WORKDIR).expect("decides");
        assert_eq!(auto, Decision { answer: Answer::Allow, by: DecidedBy::Auto });
        let ask = decide(Posture::Approval, &[], None, &call, WORKDIR).expect("decides");
        assert_eq!(ask, Decision { answer: Answer::Ask, by: DecidedBy::PersonRequired });
        let agent = policy(json!({"rules": [{"effect": "exec", "answer": "deny"}], "default": "deny"}));
        let auto = decide(Posture::Autonomous, &[], Some(&agent), &call, WORKDIR).expect("decides");
        assert_eq!(auto.answer, Answer::Allow, "an agent policy only applies when guarded");
    }

    #[test]
    fn guarded_without_policy_is_policy_missing() {
        let error = decide(Posture::Guarded, &[], None, &exec("ls"), WORKDIR).expect_err("missing");
        assert_eq!(error, DecideError::PolicyMissing);
        assert_eq!(error.code().as_str(), "POLICY_MISSING");
        assert_eq!(check_ready(Posture::Guarded, None), Err(DecideError::PolicyMissing));
        assert_eq!(check_ready(Posture::Approval, None), Ok(()));
    }

    #[test]
    fn first_match_across_server_then_agent_rules() {
        let server = rules(json!([
            {"effect": "exec", "command": "rm -rf *", "answer": "deny"},
            {"effect": "exec", "command": "git push*", "answer": "ask"},
        ]));
        let agent = policy(json!({
            "rules": [
                {"effect": "exec", "command": "git *", "answer": "allow"},
                {"effect": "exec", "answer": "deny"},
            ],
            "default": "ask",
        }));
        assert_eq!(guarded(&server, &agent, &exec("rm -rf /")), Decision { answer: Answer::Deny, by: by_server(0) });
        assert_eq!(
            guarded(&server, &agent, &exec("git push origin")),
            Decision { answer: Answer::Ask, by: by_server(1) }
        );
        assert_eq!(guarded(&server, &agent, &exec("git status")), Decision { answer: Answer::Allow, by: by_agent(0) });
        assert_eq!(guarded(&server, &agent, &exec("make")), Decision { answer: Answer::Deny, by: by_agent(1) });
    }

    #[test]
    fn default_answers_what_no_rule_matched() {
        let agent = policy(json!({"rules": [{"effect": "exec", "answer": "allow"}], "default": "deny"}));
        assert_eq!(
            guarded(&[], &agent, &write(&["/home/agent/a"])),
            Decision { answer: Answer::Deny, by: DecidedBy::Default }
        );
        let no_effect = Call { paths: vec!["/x".into()], ..Call::default() };
        assert_eq!(guarded(&[], &agent, &no_effect).by, DecidedBy::Default, "think/other/unknown fall to the default");
    }

    #[test]
    fn server_deny_is_never_relaxed() {
        let server = rules(json!([{"effect": "write", "path": "**/.env", "answer": "deny"}]));
        let lenient = policy(json!({
            "rules": [{"effect": "write", "path": "/home/agent/**", "answer": "allow"}, {"effect": "write", "answer": "allow"}],
            "default": "allow",
        }));
        let call = write(&["/home/agent/src/a.rs", "/home/agent/.env"]);
        for posture in [Posture::Guarded, Posture::Autonomous, Posture::Approval] {
            let decision = decide(posture, &server, Some(&lenient), &call, WORKDIR).expect("decides");
            assert_eq!(decision, Decision { answer: Answer::Deny, by: by_server(0) }, "{posture}");
        }
        let decision = decide(Posture::Autonomous, &server, None, &call, WORKDIR).expect("decides");
        assert_eq!(decision.answer, Answer::Deny);
        let fine = write(&["/home/agent/src/a.rs"]);
        assert_eq!(guarded(&server, &lenient, &fine), Decision { answer: Answer::Allow, by: by_agent(0) });
    }

    #[test]
    fn agent_can_be_stricter_than_the_server() {
        let server = rules(json!([{"effect": "read", "path": "/etc/*", "answer": "ask"}]));
        let strict = policy(
            json!({"rules": [{"effect": "write", "outside_workdir": true, "answer": "deny"}], "default": "ask"}),
        );
        assert_eq!(guarded(&server, &strict, &write(&["/tmp/x"])), Decision { answer: Answer::Deny, by: by_agent(0) });
    }

    #[test]
    fn server_ask_binds_and_server_allow_defers_to_the_posture() {
        let server = rules(json!([
            {"effect": "exec", "command": "git push*", "answer": "ask"},
            {"effect": "exec", "command": "ls*", "answer": "allow"},
        ]));
        let auto = decide(Posture::Autonomous, &server, None, &exec("git push"), WORKDIR).expect("decides");
        assert_eq!(auto, Decision { answer: Answer::Ask, by: by_server(0) });
        let approval = decide(Posture::Approval, &server, None, &exec("ls"), WORKDIR).expect("decides");
        assert_eq!(approval, Decision { answer: Answer::Ask, by: DecidedBy::PersonRequired });
        let auto = decide(Posture::Autonomous, &server, None, &exec("ls"), WORKDIR).expect("decides");
        assert_eq!(auto, Decision { answer: Answer::Allow, by: DecidedBy::Auto });
        let agent = policy(json!({"rules": [{"effect": "exec", "answer": "deny"}], "default": "deny"}));
        assert_eq!(guarded(&server, &agent, &exec("ls -la")), Decision { answer: Answer::Allow, by: by_server(1) });
    }

    #[test]
    fn truncated_calls_are_asked_not_allowed_where_a_rule_could_have_seen_the_cut() {
        let server = rules(json!([{"effect": "exec", "command": "*rm -rf*", "answer": "deny"}]));
        let agent = policy(json!({"rules": [], "default": "allow"}));
        let mut long = exec("echo aaaa");
        long.truncated = true;
        assert_eq!(guarded(&server, &agent, &long), Decision { answer: Answer::Ask, by: DecidedBy::Truncated });
        let auto = decide(Posture::Autonomous, &server, None, &long, WORKDIR).expect("decides");
        assert_eq!(auto.by, DecidedBy::Truncated);
        let auto = decide(Posture::Autonomous, &[], None, &long, WORKDIR).expect("decides");
        assert_eq!(auto, Decision { answer: Answer::Allow, by: DecidedBy::Auto }, "no rules, nothing missed");
        let mut many = write(&["/home/agent/a"]);
        many.truncated = true;
        assert_eq!(guarded(&server, &agent, &many).answer, Answer::Allow, "no narrowed write rule");
        let mut cut_rm = exec("rm -rf /");
        cut_rm.truncated = true;
        assert_eq!(guarded(&server, &agent, &cut_rm).answer, Answer::Deny, "a deny still stands");
    }

    #[test]
    fn workdir_is_normalized_for_outside_workdir() {
        let agent = policy(
            json!({"rules": [{"effect": "write", "outside_workdir": true, "answer": "deny"}], "default": "allow"}),
        );
        let call = write(&["/home/agent/a"]);
        let decision = decide(Posture::Guarded, &[], Some(&agent), &call, "/home/agent/./").expect("decides");
        assert_eq!(decision.answer, Answer::Allow);
    }

    #[test]
    fn random_policies_and_calls_never_panic() {
        use crate::permissions::call::random_json::{Rng, value};
        let mut rng = Rng::new(0xDEC1DE);
        let fixed_server = rules(json!([
            {"effect": "exec", "command": "rm -rf *", "answer": "deny"},
            {"effect": "write", "path": "**/.env", "answer": "deny"},
            {"effect": "read", "outside_workdir": true, "answer": "ask"},
        ]));
        let fixed_agent = policy(
            json!({"rules": [{"effect": "write", "path": "/home/agent/**", "answer": "allow"}], "default": "ask"}),
        );
        let mut valid_policies = 0;
        for _ in 0..2_000 {
            let random_rules = parse_rules(&rule_shaped(&mut rng)).unwrap_or_default();
            let random_policy = if rng.below(4) == 0 {
                Policy::parse(&value(&mut rng, 4)).ok()
            } else {
                Policy::parse(&json!({"rules": rule_shaped(&mut rng), "default": pick(&mut rng, ANSWERS)})).ok()
            };
            valid_policies += usize::from(random_policy.is_some());
            let call = Call::derive(&value(&mut rng, 5), "/home/agent");
            for posture in [Posture::Autonomous, Posture::Guarded, Posture::Approval] {
                for (server, agent) in [(&fixed_server, Some(&fixed_agent)), (&random_rules, random_policy.as_ref())] {
                    if let Ok(decision) = decide(posture, server, agent, &call, "/home/agent") {
                        let _ = crate::permissions::payloads::policy_denied(&decision, &call, server, agent);
                    }
                }
            }
        }
        assert!(valid_policies > 200, "the generator makes valid policies too ({valid_policies})");
    }

    const ANSWERS: &[&str] = &["allow", "deny", "ask", "maybe"];

    fn pick<'a>(rng: &mut crate::permissions::call::random_json::Rng, items: &[&'a str]) -> &'a str {
        items[rng.below(items.len())]
    }

    /// An array of rule-like objects, mostly valid.
    fn rule_shaped(rng: &mut crate::permissions::call::random_json::Rng) -> Value {
        const EFFECTS: &[&str] = &["read", "write", "exec", "network", "edit"];
        const GLOBS: &[&str] = &["/home/agent/**", "**/.env", "/etc/*", "/**/*.rs", "/tmp/?", "x"];
        const COMMANDS: &[&str] = &["git *", "rm -rf *", "*", "make ?", "ls"];
        let rules: Vec<Value> = (0..rng.below(6))
            .map(|_| {
                let mut rule = serde_json::Map::new();
                rule.insert("effect".into(), json!(pick(rng, EFFECTS)));
                rule.insert("answer".into(), json!(pick(rng, &ANSWERS[..3])));
                if rng.below(2) == 0 {
                    rule.insert("path".into(), json!(pick(rng, GLOBS)));
                }
                if rng.below(3) == 0 {
                    rule.insert("outside_workdir".into(), json!(true));
                }
                if rng.below(3) == 0 {
                    rule.insert("command".into(), json!(pick(rng, COMMANDS)));
                }
                Value::Object(rule)
            })
            .collect();
        Value::Array(rules)
    }

    #[test]
    fn labels_and_serialization() {
        assert_eq!(DecidedBy::Auto.label(), "auto");
        assert_eq!(by_server(0).label(), "policy:server:0");
        assert_eq!(by_agent(3).label(), "policy:agent:3");
        assert_eq!(DecidedBy::Default.label(), "default");
        assert_eq!(DecidedBy::PersonRequired.label(), "person");
        let decision = Decision { answer: Answer::Deny, by: by_agent(1) };
        assert_eq!(
            serde_json::to_value(decision).expect("serializes"),
            json!({"answer": "deny", "by": "policy:agent:1"})
        );
    }

    #[test]
    fn rules_in_force_and_deciding_rule() {
        let server = rules(json!([{"effect": "read", "answer": "allow"}]));
        let agent = policy(
            json!({"rules": [{"effect": "exec", "answer": "ask"}, {"effect": "write", "answer": "deny"}], "default": "ask"}),
        );
        let listed: Vec<(Origin, usize)> = rules_in_force(&server, Some(&agent)).map(|(o, i, _)| (o, i)).collect();
        assert_eq!(listed, [(Origin::Server, 0), (Origin::Agent, 0), (Origin::Agent, 1)]);
        let decision = guarded(&server, &agent, &write(&["/a"]));
        assert_eq!(deciding_rule(&decision, &server, Some(&agent)), agent.rules.get(1));
        assert_eq!(deciding_rule(&Decision { answer: Answer::Deny, by: by_agent(9) }, &server, Some(&agent)), None);
    }
}
