-- The egress proxy's feed (docs/proxy.md, "How the server feeds it"): each agent's proxy
-- identity (a random username and password, the password sealed under the master key like a
-- secret value) and its egress allow-list. Changes that alter the proxy's configuration are
-- announced on the channel agenthold_proxy_config (payload: the agent's id).

CREATE TABLE proxy_identities (
    agent_id   uuid PRIMARY KEY REFERENCES agents (id) ON DELETE CASCADE,
    username   text NOT NULL UNIQUE,
    -- XChaCha20-Poly1305 under the master key with this id; associated data names the agent
    key_id     text NOT NULL,
    nonce      bytea NOT NULL,
    ciphertext bytea NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);

-- What an agent's sandbox may reach besides its secrets' hosts: host[:port] / *.domain[:port]
-- entries and named presets (package_registries).
CREATE TABLE agent_egress (
    agent_id   uuid PRIMARY KEY REFERENCES agents (id) ON DELETE CASCADE,
    allow      text[] NOT NULL DEFAULT '{}',
    presets    text[] NOT NULL DEFAULT '{}',
    updated_at timestamptz NOT NULL DEFAULT now()
);

-- Any change that alters what the proxy must know: an agent created, marked for deletion or
-- deleted; an allow-list or identity written. Sent on commit, so the feed reads committed rows.
CREATE FUNCTION agenthold_proxy_config_agent() RETURNS trigger AS $$
BEGIN
    PERFORM pg_notify('agenthold_proxy_config', coalesce(NEW.id, OLD.id)::text);
    RETURN NULL;
END
$$ LANGUAGE plpgsql;

CREATE TRIGGER agents_proxy_config
    AFTER INSERT OR DELETE OR UPDATE OF deleting_at ON agents
    FOR EACH ROW EXECUTE FUNCTION agenthold_proxy_config_agent();

CREATE FUNCTION agenthold_proxy_config_row() RETURNS trigger AS $$
BEGIN
    PERFORM pg_notify('agenthold_proxy_config', coalesce(NEW.agent_id, OLD.agent_id)::text);
    RETURN NULL;
END
$$ LANGUAGE plpgsql;

CREATE TRIGGER agent_egress_proxy_config
    AFTER INSERT OR UPDATE OR DELETE ON agent_egress
    FOR EACH ROW EXECUTE FUNCTION agenthold_proxy_config_row();

CREATE TRIGGER proxy_identities_proxy_config
    AFTER INSERT OR UPDATE OR DELETE ON proxy_identities
    FOR EACH ROW EXECUTE FUNCTION agenthold_proxy_config_row();
