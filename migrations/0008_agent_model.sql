-- An agent's model (`provider/model` for OpenCode), applied by its harness adapter; NULL: the
-- harness's own default.
ALTER TABLE agents ADD COLUMN model text;
