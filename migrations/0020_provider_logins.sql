-- Provider logins on the account (docs/logins.md): a user's Claude Code and Codex sign-ins,
-- connected once and used by the agents that use that user's logins. The value is sealed with
-- the master key (like secrets) and never leaves the server but through the egress proxy.
CREATE TABLE provider_logins (
    id              uuid PRIMARY KEY,
    user_id         uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    kind            text NOT NULL CHECK (kind IN
        ('claude_subscription', 'anthropic_api_key', 'chatgpt_login', 'chatgpt_access_token', 'openai_api_key')),
    provider        text NOT NULL CHECK (provider IN ('anthropic', 'openai')),
    -- XChaCha20-Poly1305 under the master key with this id, like secrets; associated data: the
    -- user and login ids
    key_id          text NOT NULL,
    nonce           bytea NOT NULL,
    ciphertext      bytea NOT NULL,
    -- Placeholders are derived from it per agent (they are not secret: sandboxes hold them).
    placeholder_seed text NOT NULL,
    state           text NOT NULL DEFAULT 'ok' CHECK (state IN ('ok', 'connect_again')),
    connected_at    timestamptz NOT NULL DEFAULT now(),
    refreshed_at    timestamptz,
    -- When its access token expires (ChatGPT logins: the server refreshes an hour before).
    expires_at      timestamptz,
    -- Why it needs connecting again (the provider's reason; never a value).
    failure         text,
    -- What may be kept in clear (ChatGPT logins: the account id and the identity token's claims).
    public          jsonb NOT NULL DEFAULT '{}',
    UNIQUE (user_id, kind)
);

-- Whose account logins the agent uses (NULL: nobody's). New agents: their creator's. Agents made
-- before account logins existed use nobody's until an admin chooses "use my logins".
ALTER TABLE agents ADD COLUMN login_user_id uuid REFERENCES users (id) ON DELETE SET NULL;

-- When someone last ran a login method in the agent's terminal ("sign in inside this sandbox"):
-- the agent holds its own login (marked "credentials inside sandbox").
ALTER TABLE agents ADD COLUMN sandbox_login_at timestamptz;

-- The proxy's file follows logins being connected, replaced or removed, and agents changing
-- whose logins they use.
CREATE FUNCTION agenthold_proxy_config_login() RETURNS trigger AS $$
BEGIN
    PERFORM pg_notify('agenthold_proxy_config', 'login');
    RETURN NULL;
END
$$ LANGUAGE plpgsql;

CREATE TRIGGER provider_logins_proxy_config
    AFTER INSERT OR UPDATE OR DELETE ON provider_logins
    FOR EACH ROW EXECUTE FUNCTION agenthold_proxy_config_login();

CREATE TRIGGER agents_login_user_proxy_config
    AFTER UPDATE OF login_user_id ON agents
    FOR EACH ROW EXECUTE FUNCTION agenthold_proxy_config_agent();
