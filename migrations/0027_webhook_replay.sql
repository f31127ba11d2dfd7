-- Webhooks that cannot be replayed (issue 28): what each accepted delivery is remembered by —
-- its delivery id and, for GitHub's body-only signatures, the signature — kept for a window
-- apart from the delivery history (which keeps only the newest entries, and where a flood of
-- refused deliveries must never push an accepted one out). Keys are SHA-256 hashes.
CREATE TABLE webhook_seen (
    webhook_id  uuid NOT NULL REFERENCES webhooks (id) ON DELETE CASCADE,
    key         bytea NOT NULL,
    seen_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (webhook_id, key)
);
CREATE INDEX webhook_seen_age ON webhook_seen (webhook_id, seen_at);

-- The ids accepted so far stay refused.
INSERT INTO webhook_seen (webhook_id, key, seen_at)
SELECT webhook_id, sha256(convert_to('id:' || delivery_id, 'UTF8')), received_at
FROM webhook_deliveries WHERE outcome = 'accepted' AND delivery_id IS NOT NULL
ON CONFLICT DO NOTHING;
