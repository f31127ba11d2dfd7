-- A turn's usage, the same for every harness (core/src/events/usage.rs): its tokens as the
-- harness counted them, what its session had cost so far when it ended (the harness's last
-- `usage_update`), and what the turn itself cost — the difference from the session's previous
-- turn that reported a cost in the same currency (or all of it: the first such turn, or after
-- the harness's count started again).
ALTER TABLE turns
    ADD COLUMN input_tokens bigint,
    ADD COLUMN output_tokens bigint,
    ADD COLUMN cached_read_tokens bigint,
    ADD COLUMN cached_write_tokens bigint,
    ADD COLUMN thought_tokens bigint,
    ADD COLUMN cost_currency text,
    ADD COLUMN session_cost double precision,
    ADD COLUMN turn_cost double precision;

-- The previous turn with a cost, per session.
CREATE INDEX turns_cost_by_session ON turns (session_id, ended_at) WHERE session_cost IS NOT NULL;
-- An agent's ended turns over time (its usage).
CREATE INDEX turns_ended_by_agent ON turns (agent_id, ended_at) WHERE state = 'ended';
