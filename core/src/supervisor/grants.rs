//! Grants: what lets agenthold answer a call without asking a person again.
//!
//! - A **one-shot grant**: a person approved a parked turn's call; when the resumed turn tries
//!   that call again it is allowed once more (seed 001), then closed.
//! - A **session grant**: a person chose "approve for this session"; agenthold answers the same
//!   call (same session, effect, paths, command or URL — the title when there are none) itself
//!   from then on, each time with a once-answer, until someone revokes it. It never answers a
//!   call that a server owner's rule asks about (those are checked before any grant), nor one cut
//!   short by the engine's bounds (the part cut might differ).
//!
//! Grants live in the question's row (`permission_requests`): made in the transaction of the
//! answer that made them, closed or revoked in the transaction of the step that did it.

use serde_json::{Value, json};

use super::types::{AnswerError, ReplyId};
use super::{Core, Purpose};
use crate::events::side_effects::{GrantScope, SideEffect};
use crate::events::{NewEvent, NoticeCode};
use crate::ids::SessionId;
use crate::permissions;

/// The most session grants one session holds; past it an "approve for this session" approves
/// once only.
pub const MAX_SESSION_GRANTS: usize = 100;

/// A grant held in memory.
#[derive(Debug, Clone, PartialEq)]
pub struct Grant {
    /// The question whose answer made it.
    pub permission_id: uuid::Uuid,
    /// Its session.
    pub session_id: SessionId,
    /// What a later request must match (`permissions::grant_key`).
    pub key: Value,
    /// A session grant (kept after a use) rather than a one-shot one.
    pub standing: bool,
}

impl Core {
    /// The grant that answers a call of `session_id` described by `tool_call`, if any: its id and
    /// the `by` of its `permission_resolved` (a one-shot grant is closed by the use; the caller
    /// records that). `grantable`: whether a session grant may answer (no server rule asked).
    pub(super) fn take_grant(
        &mut self,
        session_id: SessionId,
        tool_call: &Value,
        grantable: bool,
    ) -> Option<(uuid::Uuid, bool)> {
        if self.grants.is_empty() {
            return None;
        }
        let key = permissions::grant_key(tool_call, &self.home_dir);
        let index = self
            .grants
            .iter()
            .position(|g| g.session_id == session_id && g.key == key && (!g.standing || grantable))?;
        let grant = &self.grants[index];
        let found = (grant.permission_id, grant.standing);
        if !grant.standing {
            let grant = self.grants.remove(index);
            self.used_grants.insert(grant.permission_id);
        }
        Some(found)
    }

    /// What an approval of `question`'s call (by `by`) opens: a session grant when the person
    /// chose so (and the call is whole, and the session has room), a one-shot one when the turn
    /// is parked; it is held at once, and stored with the answer.
    pub(super) fn open_grant(
        &mut self,
        permission_id: uuid::Uuid,
        session_id: SessionId,
        tool_call: &Value,
        for_session: bool,
        by: &Value,
    ) -> GrantScope {
        let key = permissions::grant_key(tool_call, &self.home_dir);
        let standing = for_session
            && key["truncated"] != json!(true)
            && self.grants.iter().filter(|g| g.standing && g.session_id == session_id).count() < MAX_SESSION_GRANTS;
        if !standing && for_session {
            return GrantScope::None;
        }
        self.grants.push(Grant { permission_id, session_id, key, standing });
        if standing {
            let user = by.get("user_id").and_then(Value::as_str).and_then(|u| uuid::Uuid::parse_str(u).ok());
            GrantScope::Session { granted_by: user }
        } else {
            GrantScope::Once
        }
    }

    /// Revokes the session grant `permission_id` (by `by`): agenthold stops answering with it at
    /// once; the row records it, a notice tells the session, and `reply` hears back once stored.
    pub(super) fn revoke_grant(
        &mut self,
        permission_id: uuid::Uuid,
        session_id: SessionId,
        by: Value,
        reply: ReplyId,
    ) -> Result<(), AnswerError> {
        self.grants.retain(|g| !(g.permission_id == permission_id && g.standing));
        // A read of the open work from before the revocation must not bring it back.
        self.used_grants.insert(permission_id);
        let revoked_by = by.get("user_id").and_then(Value::as_str).and_then(|u| uuid::Uuid::parse_str(u).ok());
        let mut notice = NewEvent::notice(
            session_id,
            NoticeCode::GrantRevoked,
            "an \"approve for this session\" was revoked: that call asks again",
        );
        notice.payload.value_mut()["grant"] = json!(permission_id);
        notice.payload.value_mut()["by"] = by;
        let side = vec![SideEffect::GrantRevoked { permission_id, revoked_by }];
        let generation = self.harness.as_ref().map_or(0, |h| h.generation);
        self.persist(Purpose::Answer { generation, reply: Some(reply) }, vec![notice], side);
        Ok(())
    }

    /// The grants as stored, added to those held (memory wins: what this core used or revoked
    /// may not have committed yet).
    pub(super) fn merge_grants(&mut self, stored: &[super::StoredGrant]) {
        for grant in stored {
            let known = self.grants.iter().any(|g| g.permission_id == grant.permission_id);
            if !known && !self.used_grants.contains(&grant.permission_id) {
                let key = permissions::grant_key(&grant.tool_call, &self.home_dir);
                self.grants.push(Grant {
                    permission_id: grant.permission_id,
                    session_id: grant.session_id,
                    key,
                    standing: grant.standing,
                });
            }
        }
    }
}
