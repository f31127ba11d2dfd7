-- The address a sandbox's traffic comes from on its own network, as the egress proxy sees it:
-- the proxy admits a sandbox's credentials only from this address (docs/proxy.md, "Who is
-- asking"). Recorded by the server when the sandbox starts; NULL until then (credentials alone).
ALTER TABLE sandboxes ADD COLUMN source_addr text;

CREATE TRIGGER sandboxes_source_addr_proxy_config
    AFTER UPDATE OF source_addr ON sandboxes
    FOR EACH ROW WHEN (OLD.source_addr IS DISTINCT FROM NEW.source_addr)
    EXECUTE FUNCTION agenthold_proxy_config_row();
