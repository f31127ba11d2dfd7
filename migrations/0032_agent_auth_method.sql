-- The login method an agent names for its harness (issue 31): agenthold calls ACP `authenticate`
-- with it when a session call answers auth_required. NULL: none named (the adapter's own, or the
-- only advertised method whose key agenthold delivers).
ALTER TABLE agents ADD COLUMN auth_method text CHECK (char_length(auth_method) BETWEEN 1 AND 128);
