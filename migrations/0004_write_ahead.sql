-- Write-ahead for the supervisor (docs/design.md, "Record, then send"):
-- a turn's deadline survives takeovers, and every stdin frame is journaled before it is sent,
-- so a restarted server resends exactly the frames sandboxd has not accepted.

ALTER TABLE turns ADD COLUMN deadline_at timestamptz;

CREATE TABLE stdin_journal (
    agent_id     uuid NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
    generation   bigint NOT NULL,
    start_offset bigint NOT NULL,
    end_offset   bigint NOT NULL CHECK (end_offset > start_offset),
    bytes        bytea NOT NULL,
    PRIMARY KEY (agent_id, generation, start_offset)
);
