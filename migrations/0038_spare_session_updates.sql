-- What a pooled harness said about the session the warm pool opened ahead (its spare session)
-- before any of the agent's sessions took it — OpenCode announces its commands
-- (`available_commands_update`) right after `session/new`. The supervisor stores each such
-- update here with the stdout line it came on (bounded: docs/design.md, "Pooled harnesses"), and
-- they become the taking session's first events; a server restart between loses none.
ALTER TABLE sandboxes ADD COLUMN harness_spare_updates jsonb NOT NULL DEFAULT '[]'::jsonb;
