-- A workspace's egress default (issue 32): the allow-list and presets its admins choose once.
-- An agent without a row in agent_egress follows it (live: a change reaches those agents'
-- proxy rules within seconds); an agent with a row has its own list. A change is announced on
-- agenthold_proxy_config like an agent's own list (payload: the workspace's id; the feed
-- rebuilds on any notification).
CREATE TABLE workspace_egress (
    workspace_id uuid PRIMARY KEY REFERENCES workspaces (id) ON DELETE CASCADE,
    allow        text[] NOT NULL DEFAULT '{}',
    presets      text[] NOT NULL DEFAULT '{}',
    updated_by   uuid REFERENCES users (id) ON DELETE SET NULL,
    updated_at   timestamptz NOT NULL DEFAULT now()
);

CREATE FUNCTION agenthold_proxy_config_workspace() RETURNS trigger AS $$
BEGIN
    PERFORM pg_notify('agenthold_proxy_config', coalesce(NEW.workspace_id, OLD.workspace_id)::text);
    RETURN NULL;
END
$$ LANGUAGE plpgsql;

CREATE TRIGGER workspace_egress_proxy_config
    AFTER INSERT OR UPDATE OR DELETE ON workspace_egress
    FOR EACH ROW EXECUTE FUNCTION agenthold_proxy_config_workspace();
