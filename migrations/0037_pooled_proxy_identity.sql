-- A pooled harness's proxy identity and its sandbox's address (docs/design.md, "Pooled
-- harnesses"). The password is sealed exactly as an agent's is (`proxy_identities`), under the id
-- the claiming agent will get, so the claim can move it as it is. The proxy feed writes such a
-- sandbox with agenthold's MCP route only: the session the pool opens ahead connects to the MCP
-- server the agent's sessions are offered, and nothing else is reachable until the claim.
ALTER TABLE pooled_sandboxes
    ADD COLUMN proxy_username   text UNIQUE,
    ADD COLUMN proxy_key_id     text,
    ADD COLUMN proxy_nonce      bytea,
    ADD COLUMN proxy_ciphertext bytea,
    ADD COLUMN source_addr      text,
    ADD CONSTRAINT pooled_sandboxes_proxy_identity_whole CHECK (
        (proxy_username IS NULL) = (proxy_key_id IS NULL)
        AND (proxy_key_id IS NULL) = (proxy_nonce IS NULL)
        AND (proxy_nonce IS NULL) = (proxy_ciphertext IS NULL));

-- The feed rebuilds for pooled sandboxes that have an identity only (the plain warm pool's
-- refills change nothing in the proxy's file).
CREATE TRIGGER pooled_sandboxes_proxy_config_written
    AFTER INSERT OR UPDATE ON pooled_sandboxes
    FOR EACH ROW WHEN (NEW.proxy_username IS NOT NULL) EXECUTE FUNCTION agenthold_proxy_config_row();
CREATE TRIGGER pooled_sandboxes_proxy_config_deleted
    AFTER DELETE ON pooled_sandboxes
    FOR EACH ROW WHEN (OLD.proxy_username IS NOT NULL) EXECUTE FUNCTION agenthold_proxy_config_row();
