//! The permission engine: how an agent's posture answers a harness's
//! `session/request_permission`. Pure: a request in, a verdict out — an answer to send at once
//! (with the records to store first), or a question for a person; and, for a question, the
//! answer a person's choice makes. The supervisor records each step before its answer leaves.
//!
//! Postures (seed 001, ARCHITECTURE §7): `autonomous` (alias `auto-approve`) approves with the
//! harness's one-time allow option; `approval` (alias `ask`) asks a person every time;
//! `guarded` answers by a policy (docs/permissions.md). Options are always chosen by kind.
//!
//! agenthold owns every standing decision: the harness only ever receives a once-answer
//! (`allow_once` / `reject_once`, else `cancelled`). Its `allow_always` / `reject_always` options
//! are never chosen, not even when a person picks one by id — later calls must keep reaching the
//! gate, where the server owner's rules are checked first. A person's "approve for this session"
//! is agenthold's own grant (`Choice::AllowForSession`), kept and applied by the supervisor.

pub mod call;
pub mod decision;
pub mod effect;
pub mod elicitation;
pub mod glob;
pub mod paths;
pub mod payloads;
pub mod policy;
pub mod posture;
pub mod raw_input;

use agent_client_protocol::v1::schema::{PermissionOption, PermissionOptionKind, RequestPermissionRequest};

use serde_json::{Value, json};

use crate::acp::messages;
pub use posture::Posture;

/// The only option kind an approval chooses: never `allow_always`, which would make the
/// harness stop asking (a harness offering no one-time allow gets `cancelled`).
const ALLOW_ONCE: PermissionOptionKind = PermissionOptionKind::AllowOnce;
/// The only option kind a refusal chooses (else `cancelled`, which refuses too).
const REJECT_ONCE: PermissionOptionKind = PermissionOptionKind::RejectOnce;

/// What a permission request gets.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// Answered at once.
    Answer(Box<Decision>),
    /// A person decides: the `permission` event's payload (it names the question's id).
    Ask {
        /// The `permission` event's payload.
        asked: Value,
        /// Whether a person's earlier "approve for this session" may answer it instead: not when
        /// a server owner's rule asks (those bind every call, before any grant).
        grantable: bool,
    },
}

/// What to answer and what to record.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    /// The JSON-RPC result to send to the harness.
    pub answer: Value,
    /// The `permission` event's payload.
    pub asked: Value,
    /// The `permission_resolved` event's payload.
    pub resolved: Value,
    /// The `policy_denied` event's payload, when a policy refused the call.
    pub denied: Option<Value>,
}

/// What answers an agent's permission requests: its posture, the server owner's rules, its own
/// policy and its work folder.
#[derive(Debug, Clone)]
pub struct Gate {
    /// The posture in force.
    pub posture: Posture,
    /// The server owner's rules (checked first; binding).
    pub server_rules: std::sync::Arc<Vec<policy::Rule>>,
    /// The agent's policy (guarded agents).
    pub policy: Option<std::sync::Arc<policy::Policy>>,
    /// The agent's work folder (for paths and `outside_workdir`).
    pub workdir: String,
}

impl Gate {
    /// A gate that approves everything (no server rules): what a harness gets when nothing else
    /// is known.
    pub fn autonomous(workdir: &str) -> Self {
        Self {
            posture: Posture::Autonomous,
            server_rules: std::sync::Arc::default(),
            policy: None,
            workdir: workdir.to_owned(),
        }
    }

    /// The `policy_applied` payload before a turn: for guarded agents, or when server rules apply.
    pub fn applied(&self) -> Option<Value> {
        (self.posture == Posture::Guarded || !self.server_rules.is_empty())
            .then(|| payloads::policy_applied(self.posture, &self.server_rules, self.policy.as_deref()))
    }

    /// What this gate decides for `tool_call` (a guarded agent without a policy asks a person).
    fn decide(&self, call: &call::Call) -> decision::Decision {
        decision::decide(self.posture, &self.server_rules, self.policy.as_deref(), call, &self.workdir)
            .unwrap_or(decision::Decision { answer: policy::Answer::Ask, by: decision::DecidedBy::PersonRequired })
    }

    /// The answer, the `permission_resolved` payload and any `policy_denied` payload of a call
    /// this gate settles (`None`: it asks a person).
    fn settle(
        &self,
        decided: &decision::Decision,
        call: &call::Call,
        options: &[PermissionOption],
        request_id: &Value,
        permission_id: uuid::Uuid,
    ) -> Option<(Value, Value, Option<Value>)> {
        let wanted = match decided.answer {
            policy::Answer::Ask => return None,
            policy::Answer::Allow => ALLOW_ONCE,
            policy::Answer::Deny => REJECT_ONCE,
        };
        let (answer, chosen) = messages::choose_by_kind(options, &[wanted]);
        let resolved = json!({
            "request_id": request_id,
            "permission_id": permission_id,
            "outcome": answer.get("outcome"),
            "option_kind": chosen.map(|option| option.kind),
            "by": decided.by.label(),
            "posture": self.posture.as_str(),
        });
        let denied = payloads::policy_denied(decided, call, &self.server_rules, self.policy.as_deref());
        Some((answer, resolved, denied))
    }
}

/// Judges a permission request `request_id` (as the harness sent it) at `gate`; `permission_id`
/// names the question a person would answer. The call's effect, paths and command, as derived,
/// go into the `permission` event.
pub fn judge(
    gate: &Gate,
    request_id: &Value,
    params: &Value,
    request: &RequestPermissionRequest,
    permission_id: uuid::Uuid,
) -> Verdict {
    let tool_call = params.get("toolCall").cloned().unwrap_or(Value::Null);
    let call = call::Call::derive(&tool_call, &gate.workdir);
    let decided = gate.decide(&call);
    let asked = json!({
        "request_id": request_id,
        "permission_id": permission_id,
        "tool_call": params.get("toolCall"),
        "options": params.get("options"),
        "posture": gate.posture.as_str(),
        "call": call,
    });
    match gate.settle(&decided, &call, &request.options, request_id, permission_id) {
        Some((answer, resolved, denied)) => Verdict::Answer(Box::new(Decision { answer, asked, resolved, denied })),
        None => {
            let by_server = matches!(decided.by, decision::DecidedBy::Policy { origin: decision::Origin::Server, .. });
            Verdict::Ask { asked, grantable: !by_server }
        }
    }
}

/// A waiting question decided again at a changed `gate` (a posture or policy change): the answer,
/// the `permission_resolved` payload (`"redecided": true`) and any `policy_denied` payload, or
/// `None` when the new gate asks a person too (the question keeps waiting).
pub fn redecide(
    gate: &Gate,
    request_id: &Value,
    tool_call: &Value,
    options: &[PermissionOption],
    permission_id: uuid::Uuid,
) -> Option<(Value, Value, Option<Value>)> {
    let call = call::Call::derive(tool_call, &gate.workdir);
    let decided = gate.decide(&call);
    let (answer, mut resolved, denied) = gate.settle(&decided, &call, options, request_id, permission_id)?;
    resolved["redecided"] = json!(true);
    Some((answer, resolved, denied))
}

/// A person's (or a cancel's) answer to a question. (Serialized only between replicas: a
/// forwarded answer, `crate::replicas::forward`.)
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "kind", content = "value", rename_all = "snake_case")]
pub enum Choice {
    /// Allow once (the harness's one-time allow option).
    Allow,
    /// Allow once, and let agenthold allow the same call again in this session without asking
    /// (a session grant; the harness still gets a once-answer).
    AllowForSession,
    /// Deny once (its one-time reject option).
    Deny,
    /// This option of the harness's (it must be one it offered): its kind says allow or deny,
    /// answered once whatever its kind.
    Option(String),
    /// No answer: the turn was cancelled.
    Cancelled,
    /// Decline (an elicitation; for a permission question the same as [`Self::Deny`]).
    Decline,
    /// Answer an elicitation with this content (checked against its schema).
    Content(serde_json::Map<String, Value>),
    /// A reply posted to the session while the question waits: for a permission question a
    /// clear yes allows and anything else denies; for an elicitation with one field it is the
    /// answer.
    Reply(String),
}

/// A choice the question cannot take.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ChoiceError(pub String);

/// The answer to send and the `permission_resolved` payload for `choice` to a question whose
/// harness offered `options`; `by` says who or what decided.
pub fn resolve(
    request_id: &Value,
    permission_id: uuid::Uuid,
    options: &[PermissionOption],
    choice: &Choice,
    by: Value,
) -> Result<(Value, Value), ChoiceError> {
    let choice = match choice {
        Choice::Reply(text) if is_clear_yes(text) => &Choice::Allow,
        Choice::Reply(_) | Choice::Decline => &Choice::Deny,
        Choice::Content(_) => {
            return Err(ChoiceError("a permission question takes allow, deny or one of its options".to_owned()));
        }
        other => other,
    };
    let allow = |picked: Option<&PermissionOption>| {
        let (answer, chosen) = messages::choose_by_kind(options, &[ALLOW_ONCE]);
        (answer, chosen.map(|o| o.kind), picked.cloned())
    };
    let deny = |picked: Option<&PermissionOption>| {
        let (answer, chosen) = messages::choose_by_kind(options, &[REJECT_ONCE]);
        (answer, chosen.map(|o| o.kind), picked.cloned())
    };
    let (answer, kind, picked) = match choice {
        Choice::Allow | Choice::AllowForSession => allow(None),
        Choice::Deny => deny(None),
        Choice::Option(id) => {
            let Some(option) = options.iter().find(|o| o.option_id.0.as_ref() == id.as_str()) else {
                let offered: Vec<String> = options.iter().map(|o| o.option_id.0.to_string()).collect();
                return Err(ChoiceError(format!(
                    "option {id:?} is not one the harness offered: {}",
                    offered.join(", ")
                )));
            };
            // Whatever the option, the harness gets a once-answer: "always" stays agenthold's.
            match option.kind {
                PermissionOptionKind::AllowOnce | PermissionOptionKind::AllowAlways => allow(Some(option)),
                _ => deny(Some(option)),
            }
        }
        Choice::Cancelled | Choice::Decline | Choice::Reply(_) | Choice::Content(_) => {
            (messages::cancelled(), None, None)
        }
    };
    let mut resolved = json!({
        "request_id": request_id,
        "permission_id": permission_id,
        "outcome": answer.get("outcome"),
        "option_kind": kind,
        "by": by,
    });
    if let Some(picked) = picked {
        // What the person picked, beside the once-answer the harness got.
        resolved["picked"] = json!({"option_id": picked.option_id.0.as_ref(), "kind": picked.kind});
    }
    if matches!(choice, Choice::AllowForSession) && kind.is_some() {
        resolved["scope"] = json!("session");
    }
    Ok((answer, resolved))
}

/// Whether a reply posted while a question waits is a clear yes (seed 001: anything else
/// denies): one of a few plain words of assent, ignoring case, spaces and closing punctuation.
pub fn is_clear_yes(reply: &str) -> bool {
    let word = reply.trim().trim_end_matches(['.', '!']).trim().to_lowercase();
    matches!(
        word.as_str(),
        "yes"
            | "y"
            | "yes please"
            | "yep"
            | "yeah"
            | "ok"
            | "okay"
            | "sure"
            | "approve"
            | "approved"
            | "allow"
            | "go ahead"
            | "lgtm"
    )
}

/// What a one-shot grant matches (seed 001: an approved call of a parked turn is allowed once
/// more when tried again): the call's effect and what the server derived of it — paths, command,
/// URL — or, when it derived none of those, its title. Tool call ids never match across
/// harnesses, so they are not part of it.
pub fn grant_key(tool_call: &Value, workdir: &str) -> Value {
    let call = call::Call::derive(tool_call, workdir);
    let described = !call.paths.is_empty() || call.command.is_some() || call.url.is_some();
    let title = if described { Value::Null } else { tool_call.get("title").cloned().unwrap_or(Value::Null) };
    json!({
        "effect": call.effect,
        "paths": call.paths,
        "command": call.command,
        "url": call.url,
        "truncated": call.truncated,
        "title": title,
    })
}

/// The question id of a harness's request: derived from the agent, the harness generation and
/// the request's JSON-RPC id, so the same question always has the same id (also after a
/// takeover) and the core needs no randomness.
pub fn question_id(agent_id: uuid::Uuid, generation: i64, request_id: &Value) -> uuid::Uuid {
    use sha2::Digest;
    let mut hash = sha2::Sha256::new();
    hash.update(agent_id.as_bytes());
    hash.update(generation.to_be_bytes());
    hash.update(request_id.to_string().as_bytes());
    let digest = hash.finalize();
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&digest[..16]);
    uuid::Builder::from_random_bytes(bytes).into_uuid()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params() -> Value {
        json!({
            "sessionId": "s",
            "toolCall": {"toolCallId": "t1"},
            "options": [
                {"optionId": "allow", "name": "Looks like allow", "kind": "reject_once"},
                {"optionId": "y", "name": "Allow", "kind": "allow_once"},
                {"optionId": "z", "name": "Always", "kind": "allow_always"},
            ],
        })
    }

    fn options() -> Vec<PermissionOption> {
        messages::parse_permission_request(&params()).expect("parses").options
    }

    #[test]
    fn autonomous_picks_the_one_time_allow_by_kind() {
        let params = params();
        let request = messages::parse_permission_request(&params).expect("parses");
        let id = uuid::Uuid::nil();
        let gate = Gate::autonomous("/home/agent");
        let Verdict::Answer(decision) = judge(&gate, &json!(7), &params, &request, id) else {
            panic!("autonomous answers")
        };
        assert_eq!(decision.answer["outcome"]["optionId"], json!("y"));
        assert_eq!(decision.resolved["option_kind"], json!("allow_once"));
        assert_eq!(decision.resolved["by"], json!("auto"));
        assert_eq!(decision.asked["request_id"], json!(7));
    }

    #[test]
    fn approval_and_guarded_ask_a_person() {
        let params = params();
        let request = messages::parse_permission_request(&params).expect("parses");
        for posture in [Posture::Approval, Posture::Guarded] {
            // Guarded without a policy cannot decide: a person does.
            let gate = Gate { posture, ..Gate::autonomous("/home/agent") };
            let verdict = judge(&gate, &json!("r1"), &params, &request, uuid::Uuid::nil());
            let Verdict::Ask { asked, grantable } = verdict else { panic!("{posture:?} asks") };
            assert!(grantable, "no server rule asked");
            assert_eq!(asked["posture"], json!(posture.as_str()));
            assert_eq!(asked["options"], params["options"]);
        }
    }

    #[test]
    fn a_person_s_choice_is_taken_by_kind_never_by_id() {
        let options = options();
        let (answer, resolved) =
            resolve(&json!(1), uuid::Uuid::nil(), &options, &Choice::Allow, json!({"user": "u"})).expect("allow");
        assert_eq!(answer["outcome"]["optionId"], json!("y"));
        assert_eq!(resolved["by"], json!({"user": "u"}));
        // Deny picks the reject option, even though its id reads "allow".
        let (answer, _) = resolve(&json!(1), uuid::Uuid::nil(), &options, &Choice::Deny, json!("x")).expect("deny");
        assert_eq!(answer["outcome"]["optionId"], json!("allow"));
        // The harness's "always" picked by id: the harness gets its one-time allow.
        let (answer, resolved) =
            resolve(&json!(1), uuid::Uuid::nil(), &options, &Choice::Option("z".into()), json!("x")).expect("z");
        assert_eq!(answer["outcome"]["optionId"], json!("y"));
        assert_eq!(resolved["option_kind"], json!("allow_once"));
        assert_eq!(resolved["picked"], json!({"option_id": "z", "kind": "allow_always"}));
        let refused = resolve(&json!(1), uuid::Uuid::nil(), &options, &Choice::Option("nope".into()), json!("x"));
        assert!(refused.expect_err("not offered").0.contains("not one the harness offered"));
        let (answer, _) = resolve(&json!(1), uuid::Uuid::nil(), &options, &Choice::Cancelled, json!("x")).expect("c");
        assert_eq!(answer["outcome"]["outcome"], json!("cancelled"));
        // Nothing to deny with: cancelled.
        let (answer, _) = resolve(&json!(1), uuid::Uuid::nil(), &options[1..], &Choice::Deny, json!("x")).expect("d");
        assert_eq!(answer["outcome"]["outcome"], json!("cancelled"));
    }

    #[test]
    fn the_harness_never_gets_an_always_answer() {
        let always_only = json!({
            "sessionId": "s",
            "toolCall": {"toolCallId": "t1"},
            "options": [
                {"optionId": "aa", "name": "Always allow", "kind": "allow_always"},
                {"optionId": "ra", "name": "Always reject", "kind": "reject_always"},
            ],
        });
        let request = messages::parse_permission_request(&always_only).expect("parses");
        let options = request.options.clone();
        // Autonomous and a policy's deny: no once option, so cancelled (the call does not run).
        let gate = Gate::autonomous("/home/agent");
        let Verdict::Answer(decision) = judge(&gate, &json!(1), &always_only, &request, uuid::Uuid::nil()) else {
            panic!("autonomous answers")
        };
        assert_eq!(decision.answer["outcome"]["outcome"], json!("cancelled"));
        assert_eq!(decision.resolved["option_kind"], Value::Null);
        // A person's every choice, including each "always" option by id.
        for choice in [
            Choice::Allow,
            Choice::AllowForSession,
            Choice::Deny,
            Choice::Option("aa".into()),
            Choice::Option("ra".into()),
            Choice::Reply("yes".into()),
        ] {
            let (answer, resolved) = resolve(&json!(1), uuid::Uuid::nil(), &options, &choice, json!("u")).expect("ok");
            assert_eq!(answer["outcome"]["outcome"], json!("cancelled"), "{choice:?}");
            assert_eq!(resolved["option_kind"], Value::Null, "{choice:?}");
            assert_eq!(resolved.get("scope"), None, "{choice:?}: no grant without an approval");
        }
        // With every kind offered, each choice maps to a once-kind.
        let all = options_of_every_kind();
        for (choice, kind) in [
            (Choice::Allow, "allow_once"),
            (Choice::AllowForSession, "allow_once"),
            (Choice::Deny, "reject_once"),
            (Choice::Option("aa".into()), "allow_once"),
            (Choice::Option("ao".into()), "allow_once"),
            (Choice::Option("ra".into()), "reject_once"),
            (Choice::Option("ro".into()), "reject_once"),
        ] {
            let (_, resolved) = resolve(&json!(1), uuid::Uuid::nil(), &all, &choice, json!("u")).expect("ok");
            assert_eq!(resolved["option_kind"], json!(kind), "{choice:?}");
        }
        let (_, resolved) =
            resolve(&json!(1), uuid::Uuid::nil(), &all, &Choice::AllowForSession, json!("u")).expect("ok");
        assert_eq!(resolved["scope"], json!("session"));
        let refused = resolve(&json!(1), uuid::Uuid::nil(), &all, &Choice::Content(serde_json::Map::new()), json!("u"));
        assert!(refused.is_err(), "content is for the agent's own questions");
    }

    fn write_request(path: &str) -> Value {
        json!({
            "sessionId": "s",
            "toolCall": {"toolCallId": "t1", "kind": "edit", "title": "Write", "locations": [{"path": path}]},
            "options": [
                {"optionId": "a", "name": "Allow", "kind": "allow_once"},
                {"optionId": "r", "name": "Reject", "kind": "reject_once"},
            ],
        })
    }

    #[test]
    fn a_server_rule_that_asks_cannot_be_answered_by_a_grant() {
        let server =
            policy::parse_rules(&json!([{"effect": "write", "path": "/etc/**", "answer": "ask"}])).expect("rules");
        let gate = Gate { posture: Posture::Approval, server_rules: server.into(), ..Gate::autonomous("/home/agent") };
        for (path, grantable) in [("/etc/passwd", false), ("/home/agent/a.txt", true)] {
            let params = write_request(path);
            let request = messages::parse_permission_request(&params).expect("parses");
            let Verdict::Ask { grantable: got, .. } = judge(&gate, &json!(1), &params, &request, uuid::Uuid::nil())
            else {
                panic!("approval asks")
            };
            assert_eq!(got, grantable, "{path}");
        }
    }

    #[test]
    fn a_changed_gate_settles_a_waiting_question_or_leaves_it() {
        let params = write_request("/home/agent/secret/key");
        let options = messages::parse_permission_request(&params).expect("parses").options;
        let tool_call = &params["toolCall"];
        let approval = Gate { posture: Posture::Approval, ..Gate::autonomous("/home/agent") };
        assert_eq!(redecide(&approval, &json!(1), tool_call, &options, uuid::Uuid::nil()), None);
        let (answer, resolved, denied) =
            redecide(&Gate::autonomous("/home/agent"), &json!(1), tool_call, &options, uuid::Uuid::nil())
                .expect("settled");
        assert_eq!(answer["outcome"]["optionId"], json!("a"));
        assert_eq!((resolved["by"].clone(), resolved["redecided"].clone()), (json!("auto"), json!(true)));
        assert_eq!(denied, None);
        let policy = policy::Policy::parse(&json!({
            "rules": [{"effect": "write", "path": "/home/agent/secret/**", "answer": "deny"}],
            "default": "ask",
        }))
        .expect("policy");
        let guarded =
            Gate { posture: Posture::Guarded, policy: Some(policy.into()), ..Gate::autonomous("/home/agent") };
        let (answer, resolved, denied) =
            redecide(&guarded, &json!(1), tool_call, &options, uuid::Uuid::nil()).expect("settled");
        assert_eq!(answer["outcome"]["optionId"], json!("r"));
        assert_eq!(resolved["by"], json!("policy:agent:0"));
        assert_eq!(denied.expect("policy_denied")["by"], json!("policy:agent:0"));
    }

    fn options_of_every_kind() -> Vec<PermissionOption> {
        let params = json!({
            "sessionId": "s",
            "toolCall": {"toolCallId": "t1"},
            "options": [
                {"optionId": "aa", "name": "Always allow", "kind": "allow_always"},
                {"optionId": "ao", "name": "Allow", "kind": "allow_once"},
                {"optionId": "ra", "name": "Never", "kind": "reject_always"},
                {"optionId": "ro", "name": "Reject", "kind": "reject_once"},
            ],
        });
        messages::parse_permission_request(&params).expect("parses").options
    }

    #[test]
    fn only_a_clear_yes_approves() {
        for yes in ["yes", "Yes!", "  OK. ", "approve", "go ahead", "LGTM"] {
            assert!(is_clear_yes(yes), "{yes}");
        }
        for no in ["no", "yes, but not in /etc", "maybe", "", "yess", "don't", "y?"] {
            assert!(!is_clear_yes(no), "{no}");
        }
    }

    #[test]
    fn a_question_s_id_is_stable_and_distinct() {
        let agent = uuid::Uuid::new_v4();
        assert_eq!(question_id(agent, 1, &json!(3)), question_id(agent, 1, &json!(3)));
        assert_ne!(question_id(agent, 1, &json!(3)), question_id(agent, 2, &json!(3)));
        assert_ne!(question_id(agent, 1, &json!(3)), question_id(agent, 1, &json!("3")));
    }
}
