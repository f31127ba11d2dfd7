-- Sandboxes started ahead for agents not created yet (the warm pool, docs/design.md "Warm
-- pool"): the id the agent will get, its sandbox token (hashed; the tunnel accepts it and the
-- server holds the connection until an agent claims the sandbox) and its image. Claiming moves
-- the token to the agent's `sandboxes` row and deletes this one.
CREATE TABLE pooled_sandboxes (
    agent_id    uuid PRIMARY KEY,
    token_hash  bytea NOT NULL UNIQUE,
    image       text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);
