-- An agent's own permission posture (docs/permissions.md): NULL follows the server's default
-- (AGENTHOLD_DEFAULT_POSTURE, else autonomous). Questions waiting for a person are
-- permission_requests rows whose outcome is NULL.
ALTER TABLE agents ADD COLUMN posture text CHECK (posture IN ('autonomous', 'guarded', 'approval'));
CREATE INDEX permission_requests_waiting ON permission_requests (session_id) WHERE outcome IS NULL;
