-- The names (never the values) of the variables a harness process was started with. A server
-- that takes a running harness over — after a restart, or an agent claiming a harness the warm
-- pool started (docs/design.md, "Pooled harnesses") — signs it in as its start would have: the
-- adapter's own login methods need to know which keys the harness holds.
ALTER TABLE sandboxes ADD COLUMN harness_env_names text[] NOT NULL DEFAULT '{}';
-- A session the warm pool opened on a harness before any agent claimed it, with the claiming
-- agent's folder and MCP servers: the agent's first session takes it instead of `session/new`.
-- Cleared when a session takes it (and with the harness).
ALTER TABLE sandboxes ADD COLUMN harness_spare_session text;
