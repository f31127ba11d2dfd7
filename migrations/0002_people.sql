-- People and boundaries: users, workspaces, memberships with roles; tokens and agents belong to
-- them; an append-only audit log per workspace.

CREATE TABLE users (
    id            uuid PRIMARY KEY,
    -- lower-case login name
    username      text NOT NULL UNIQUE,
    -- argon2id PHC string
    password_hash text NOT NULL,
    -- may create users (the bootstrap admin)
    server_admin  boolean NOT NULL DEFAULT false,
    created_at    timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE workspaces (
    id               uuid PRIMARY KEY,
    name             text NOT NULL,
    -- set for a user's personal workspace (one each)
    personal_user_id uuid UNIQUE REFERENCES users (id) ON DELETE CASCADE,
    created_at       timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE memberships (
    workspace_id uuid NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    user_id      uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    role         text NOT NULL CHECK (role IN ('viewer', 'operator', 'admin')),
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (workspace_id, user_id)
);
CREATE INDEX memberships_user ON memberships (user_id);

-- Tokens belong to a user and can be revoked (a revoked token stops working at once).
ALTER TABLE api_tokens ADD COLUMN user_id uuid REFERENCES users (id) ON DELETE CASCADE;
ALTER TABLE api_tokens ADD COLUMN revoked_at timestamptz;
CREATE INDEX api_tokens_user ON api_tokens (user_id);

-- Agents belong to a workspace; names are unique within it.
ALTER TABLE agents ADD COLUMN workspace_id uuid REFERENCES workspaces (id) ON DELETE CASCADE;
ALTER TABLE agents ADD COLUMN created_by uuid REFERENCES users (id) ON DELETE SET NULL;
ALTER TABLE agents DROP CONSTRAINT agents_name_key;
CREATE UNIQUE INDEX agents_workspace_name ON agents (workspace_id, name);

-- Who did what to which resource, and when. Append-only.
CREATE TABLE audit_log (
    id            bigserial PRIMARY KEY,
    workspace_id  uuid NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    actor_user_id uuid REFERENCES users (id) ON DELETE SET NULL,
    action        text NOT NULL,
    resource_type text NOT NULL,
    resource_id   text NOT NULL,
    detail        jsonb NOT NULL DEFAULT '{}',
    created_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX audit_log_workspace ON audit_log (workspace_id, id);
CREATE TRIGGER audit_log_no_update BEFORE UPDATE ON audit_log
    FOR EACH ROW EXECUTE FUNCTION events_are_append_only();

-- Browser sessions: an HttpOnly cookie holds the token (stored hashed); state-changing requests
-- must echo the session's CSRF token in a header.
CREATE TABLE browser_sessions (
    id          uuid PRIMARY KEY,
    token_hash  bytea NOT NULL UNIQUE,
    user_id     uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    csrf_token  text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    expires_at  timestamptz NOT NULL
);

-- Failed logins, for throttling per account and per address.
CREATE TABLE login_failures (
    id          bigserial PRIMARY KEY,
    username    text NOT NULL,
    address     text NOT NULL,
    at          timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX login_failures_username ON login_failures (username, at);
CREATE INDEX login_failures_address ON login_failures (address, at);
