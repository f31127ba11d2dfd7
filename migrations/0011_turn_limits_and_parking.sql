-- A per-agent turn time limit (seconds of activity: the time a turn waits in the server's
-- queue or for a person's answer does not count). NULL: the server's AGENTHOLD_TURN_TIMEOUT_SECS.
ALTER TABLE agents ADD COLUMN turn_timeout_secs INTEGER
    CHECK (turn_timeout_secs IS NULL OR turn_timeout_secs BETWEEN 1 AND 2592000);

-- A turn whose sandbox was lost while a question of its waited for a person is `parked`: open,
-- not running; the answer resumes it (docs/permissions.md). Its questions stay pending.
ALTER TABLE turns DROP CONSTRAINT turns_state_check;
ALTER TABLE turns ADD CONSTRAINT turns_state_check CHECK (state IN ('pending', 'running', 'parked', 'ended'));

-- An approval given to a parked turn's question allows the same call once more, when the
-- resumed harness tries it again (a one-shot grant): true until used.
ALTER TABLE permission_requests ADD COLUMN grant_open boolean NOT NULL DEFAULT false;
CREATE INDEX permission_requests_open_grants ON permission_requests (session_id) WHERE grant_open;

-- The harness's own questions (ACP `elicitation/create`, form mode) wait for a person like
-- permission requests: `tool_call` holds the request (message, requested schema), `options` [].
ALTER TABLE permission_requests ADD COLUMN kind text NOT NULL DEFAULT 'permission'
    CHECK (kind IN ('permission', 'elicitation'));
