-- "Approve for this session" (issue 27): agenthold's own standing grant, kept in the row of the
-- question whose answer made it. agenthold answers the same call in that session itself (always
-- with a once-answer to the harness) until it is revoked; the harness's own "always" options are
-- never chosen.
ALTER TABLE permission_requests
    ADD COLUMN session_grant boolean NOT NULL DEFAULT false,
    ADD COLUMN granted_by uuid REFERENCES users (id) ON DELETE SET NULL,
    ADD COLUMN grant_revoked_at timestamptz,
    ADD COLUMN grant_revoked_by uuid REFERENCES users (id) ON DELETE SET NULL;
CREATE INDEX permission_requests_session_grants ON permission_requests (session_id) WHERE session_grant;
