//! The permission engine: how an agent's posture answers a harness's
//! `session/request_permission`. Pure: a request in, a decision out (the answer to send and the
//! records to store); the supervisor records the decision before the answer leaves.
//!
//! Today every agent is `auto-approve` (seed 003); the permissions issue grows this into the
//! `autonomous` / `guarded` / `approval` postures with policies.

pub mod call;
pub mod decision;
pub mod effect;
pub mod glob;
pub mod options;
pub mod paths;
pub mod payloads;
pub mod policy;
pub mod posture;
pub mod raw_input;

use agent_client_protocol::v1::schema::RequestPermissionRequest;
use serde_json::{Value, json};

use crate::acp::messages;

/// An agent's permission posture.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Posture {
    /// Approve with the harness's one-time allow option.
    AutoApprove,
}

impl Posture {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::AutoApprove => "auto-approve",
        }
    }
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
}

/// Decides a permission request `request_id` (as the harness sent it) under `posture`.
pub fn decide(posture: Posture, request_id: &Value, params: &Value, request: &RequestPermissionRequest) -> Decision {
    match posture {
        Posture::AutoApprove => {
            let (answer, chosen) = messages::auto_approve(&request.options);
            let asked = json!({
                "request_id": request_id,
                "tool_call": params.get("toolCall"),
                "options": params.get("options"),
                "policy": posture.as_str(),
            });
            let resolved = json!({
                "request_id": request_id,
                "outcome": answer.get("outcome"),
                "option_kind": chosen.map(|option| option.kind),
                "by": "policy",
                "policy": posture.as_str(),
            });
            Decision { answer, asked, resolved }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_approve_picks_the_one_time_allow_by_kind() {
        let params = json!({
            "sessionId": "s",
            "toolCall": {"toolCallId": "t1"},
            "options": [
                {"optionId": "x", "name": "Reject", "kind": "reject_once"},
                {"optionId": "y", "name": "Allow", "kind": "allow_once"},
            ],
        });
        let request = messages::parse_permission_request(&params).expect("parses");
        let decision = decide(Posture::AutoApprove, &json!(7), &params, &request);
        assert_eq!(decision.answer["outcome"]["optionId"], json!("y"));
        assert_eq!(decision.resolved["option_kind"], json!("allow_once"));
        assert_eq!(decision.asked["request_id"], json!(7));
    }
}
