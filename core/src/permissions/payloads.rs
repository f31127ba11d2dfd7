//! The payloads of the events a policy leaves in a session's log: `policy_applied` (before each
//! turn of a guarded agent: the rules in force, in evaluation order, and the default) and
//! `policy_denied` (for each call a policy refused: the rule, the effect and what the call
//! touched).

use serde_json::{Map, Value, json};

use super::call::Call;
use super::decision::{DecidedBy, Decision, Origin, deciding_rule, rules_in_force};
use super::policy::{Answer, Policy, Rule};
use super::posture::Posture;

/// `policy_applied`: `{"posture", "rules": [{"origin", "index", <rule fields>}…], "default"}`
/// (`default` is null without an agent policy).
pub fn policy_applied(posture: Posture, server_rules: &[Rule], agent_policy: Option<&Policy>) -> Value {
    let rules: Vec<Value> =
        rules_in_force(server_rules, agent_policy).map(|(origin, index, rule)| located(origin, index, rule)).collect();
    json!({
        "posture": posture.as_str(),
        "rules": rules,
        "default": agent_policy.map(|policy| policy.default.as_str()),
    })
}

/// `policy_denied` for a refusal by a rule or by the default:
/// `{"by", "rule": {"origin", "index", <rule fields>} | null, "effect", "detail": {"paths",
/// "command"?, "url"?}}`. `None` when the decision is not a policy's refusal.
pub fn policy_denied(
    decision: &Decision,
    call: &Call,
    server_rules: &[Rule],
    agent_policy: Option<&Policy>,
) -> Option<Value> {
    if decision.answer != Answer::Deny {
        return None;
    }
    let rule = match decision.by {
        DecidedBy::Policy { origin, index } => {
            Some(located(origin, index, deciding_rule(decision, server_rules, agent_policy)?))
        }
        DecidedBy::Default => None,
        DecidedBy::Auto | DecidedBy::PersonRequired | DecidedBy::Truncated => return None,
    };
    let mut detail = Map::new();
    detail.insert("paths".into(), json!(call.paths));
    if let Some(command) = &call.command {
        detail.insert("command".into(), json!(command));
    }
    if let Some(url) = &call.url {
        detail.insert("url".into(), json!(url));
    }
    Some(json!({
        "by": decision.by.label(),
        "rule": rule,
        "effect": call.effect.map(|effect| effect.as_str()),
        "detail": detail,
    }))
}

fn located(origin: Origin, index: usize, rule: &Rule) -> Value {
    let mut entry = Map::new();
    entry.insert("origin".into(), json!(origin.as_str()));
    entry.insert("index".into(), json!(index));
    if let Value::Object(fields) = rule.to_json() {
        entry.extend(fields);
    }
    Value::Object(entry)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::permissions::decision::decide;
    use crate::permissions::effect::Effect;
    use crate::permissions::policy::parse_rules;

    fn server() -> Vec<Rule> {
        parse_rules(&json!([{"effect": "exec", "command": "rm -rf *", "answer": "deny"}])).expect("valid")
    }

    fn agent() -> Policy {
        Policy::parse(
            &json!({"rules": [{"effect": "write", "outside_workdir": true, "answer": "deny"}], "default": "deny"}),
        )
        .expect("valid")
    }

    #[test]
    fn applied_lists_rules_in_order_with_origin_and_default() {
        let payload = policy_applied(Posture::Guarded, &server(), Some(&agent()));
        assert_eq!(
            payload,
            json!({
                "posture": "guarded",
                "rules": [
                    {"origin": "server", "index": 0, "effect": "exec", "command": "rm -rf *", "answer": "deny"},
                    {"origin": "agent", "index": 0, "effect": "write", "outside_workdir": true, "answer": "deny"},
                ],
                "default": "deny",
            })
        );
        assert_eq!(policy_applied(Posture::Autonomous, &[], None)["default"], Value::Null);
    }

    #[test]
    fn denied_names_the_rule_and_the_call() {
        let call = Call { effect: Some(Effect::Exec), command: Some("rm -rf /".into()), ..Call::default() };
        let decision = decide(Posture::Guarded, &server(), Some(&agent()), &call, "/home/agent").expect("decides");
        let payload = policy_denied(&decision, &call, &server(), Some(&agent())).expect("denied");
        assert_eq!(
            payload,
            json!({
                "by": "policy:server:0",
                "rule": {"origin": "server", "index": 0, "effect": "exec", "command": "rm -rf *", "answer": "deny"},
                "effect": "exec",
                "detail": {"paths": [], "command": "rm -rf /"},
            })
        );
        let call = Call { effect: Some(Effect::Write), paths: vec!["/tmp/x".into()], ..Call::default() };
        let decision = decide(Posture::Guarded, &server(), Some(&agent()), &call, "/home/agent").expect("decides");
        let payload = policy_denied(&decision, &call, &server(), Some(&agent())).expect("denied");
        assert_eq!(payload["rule"]["origin"], json!("agent"));
        assert_eq!(payload["detail"], json!({"paths": ["/tmp/x"]}));
    }

    #[test]
    fn denied_by_default_has_no_rule_and_other_answers_give_nothing() {
        let call = Call { effect: Some(Effect::Network), url: Some("https://x".into()), ..Call::default() };
        let decision = decide(Posture::Guarded, &server(), Some(&agent()), &call, "/home/agent").expect("decides");
        let payload = policy_denied(&decision, &call, &server(), Some(&agent())).expect("denied");
        assert_eq!(payload["by"], json!("default"));
        assert_eq!(payload["rule"], Value::Null);
        assert_eq!(payload["detail"]["url"], json!("https://x"));
        let allowed = decide(Posture::Autonomous, &[], None, &call, "/").expect("decides");
        assert_eq!(policy_denied(&allowed, &call, &[], None), None);
        let asked = decide(Posture::Approval, &[], None, &call, "/").expect("decides");
        assert_eq!(policy_denied(&asked, &call, &[], None), None);
    }
}
