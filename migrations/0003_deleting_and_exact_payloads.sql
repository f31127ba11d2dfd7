-- Deleting an agent is recorded before anything is torn down: an agent with `deleting_at` set is
-- gone for the API and the supervisor, and a delete that stopped halfway is finished (by a retry
-- or at the next server start).
ALTER TABLE agents ADD COLUMN deleting_at timestamptz;
CREATE INDEX agents_deleting ON agents (deleting_at) WHERE deleting_at IS NOT NULL;

-- The side table holds the exact payload as JSON text: `jsonb` refuses U+0000 (`\u0000`), which
-- a harness may send; the event itself holds a copy with U+2400 in its place.
ALTER TABLE event_payloads ALTER COLUMN payload TYPE text USING payload::text;
