-- Quotas (issue 29): the bytes of events each session stores, kept by the statements that append
-- them, so an agent's total is a sum over its sessions rather than over its events.
ALTER TABLE sessions ADD COLUMN stored_bytes bigint NOT NULL DEFAULT 0;

UPDATE sessions s SET stored_bytes = t.bytes
FROM (SELECT session_id, sum(octet_length(payload::text))::bigint AS bytes FROM events GROUP BY session_id) t
WHERE t.session_id = s.id;
