-- Agents prompting agents (docs/triggers.md): which agents an agent may prompt through
-- agenthold's MCP server, set by someone who operates both, and how deep in a chain of agents
-- prompting agents each turn is (0: a person, a script, a schedule or a webhook prompted it).

CREATE TABLE agent_prompt_targets (
    agent_id        uuid NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
    target_agent_id uuid NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
    created_by      uuid REFERENCES users (id) ON DELETE SET NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (agent_id, target_agent_id),
    CHECK (agent_id <> target_agent_id)
);
CREATE INDEX agent_prompt_targets_by_target ON agent_prompt_targets (target_agent_id);

ALTER TABLE turns ADD COLUMN chain_depth integer NOT NULL DEFAULT 0 CHECK (chain_depth >= 0);
