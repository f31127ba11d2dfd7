-- Git for agents (issue 32, items 3 and 4).

-- An agent's repository (issue 32): cloned into its home at the first wake, before the harness
-- starts, through the egress proxy (with a git_token secret for its host, if attached). One row
-- per agent that has one; state says how the clone went (pending until the first wake).
CREATE TABLE agent_repos (
    agent_id uuid PRIMARY KEY REFERENCES agents(id) ON DELETE CASCADE,
    url text NOT NULL CHECK (char_length(url) BETWEEN 9 AND 2048),
    branch text CHECK (char_length(branch) BETWEEN 1 AND 255),
    dir text NOT NULL CHECK (char_length(dir) BETWEEN 1 AND 100),
    state text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'cloning', 'cloned', 'failed')),
    error text CHECK (char_length(error) <= 2048),
    updated_at timestamptz NOT NULL DEFAULT now()
);

-- The git_token secret preset (issue 32): HTTP Basic on a git host, the value as password.
ALTER TABLE secrets DROP CONSTRAINT secrets_preset_check;
ALTER TABLE secrets ADD CONSTRAINT secrets_preset_check
    CHECK (preset IN ('anthropic', 'openai', 'openrouter', 'git_token', 'custom'));
