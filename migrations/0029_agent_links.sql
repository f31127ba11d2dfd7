-- Agents prompting agents under hostile use (issue 28): which agent prompted each turn (its
-- hourly budget, and a session an agent may read back only if it prompted there).
ALTER TABLE turns ADD COLUMN origin_agent_id uuid;
CREATE INDEX turns_by_origin_agent ON turns (origin_agent_id, created_at) WHERE origin_agent_id IS NOT NULL;
