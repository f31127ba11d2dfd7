-- Secrets (docs/secrets.md): values encrypted at rest with the master key, which is never in the
-- database; each secret carries the injection rule its preset fills in. Agents use a secret
-- through an environment variable that holds a random placeholder, never the value.

CREATE TABLE secrets (
    id           uuid PRIMARY KEY,
    workspace_id uuid NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    name         text NOT NULL,
    preset       text NOT NULL CHECK (preset IN ('anthropic', 'openai', 'openrouter', 'custom')),
    -- the injection rule: the proxy puts the value, formatted, into this one header of requests
    -- to https://host:port/path_prefix…
    host         text NOT NULL,
    port         integer NOT NULL CHECK (port BETWEEN 1 AND 65535),
    path_prefix  text NOT NULL,
    header       text NOT NULL,
    format       text NOT NULL,
    -- XChaCha20-Poly1305 under the master key with this id (first 8 bytes of its SHA-256, hex);
    -- associated data: the workspace and secret ids
    key_id       text NOT NULL,
    nonce        bytea NOT NULL,
    ciphertext   bytea NOT NULL,
    created_by   uuid REFERENCES users (id) ON DELETE SET NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    UNIQUE (workspace_id, name)
);

-- A secret attached to an agent under an environment variable. The placeholder is what the
-- sandbox sees; random, one per (agent, secret).
CREATE TABLE agent_secrets (
    agent_id    uuid NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
    env_name    text NOT NULL,
    secret_id   uuid NOT NULL REFERENCES secrets (id) ON DELETE CASCADE,
    placeholder text NOT NULL,
    created_by  uuid REFERENCES users (id) ON DELETE SET NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (agent_id, env_name)
);
CREATE INDEX agent_secrets_secret ON agent_secrets (secret_id);
