-- A per-agent turn time limit (seconds of activity: the time a turn waits in the server's
-- queue or for a person's answer does not count). NULL: the server's AGENTHOLD_TURN_TIMEOUT_SECS.
ALTER TABLE agents ADD COLUMN turn_timeout_secs INTEGER
    CHECK (turn_timeout_secs IS NULL OR turn_timeout_secs BETWEEN 1 AND 2592000);
