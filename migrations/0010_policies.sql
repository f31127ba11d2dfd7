-- Guarded agents' policies (docs/permissions.md): rules over effects and a default, as JSON
-- validated by the server; NULL: none. Two more event types record them: `policy_applied` before
-- each turn of a guarded agent, `policy_denied` for each refusal.
ALTER TABLE agents ADD COLUMN policy jsonb;
ALTER TABLE events DROP CONSTRAINT events_type_check;
ALTER TABLE events ADD CONSTRAINT events_type_check CHECK (type IN
    ('prompt', 'update', 'permission', 'permission_resolved', 'turn_end', 'error', 'notice',
     'policy_applied', 'policy_denied'));
