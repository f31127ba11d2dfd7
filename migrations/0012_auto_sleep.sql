-- An agent's own auto-sleep time (seconds idle before it is put to sleep; 0: never). NULL: the
-- server's AGENTHOLD_AUTO_SLEEP_SECS.
ALTER TABLE agents ADD COLUMN auto_sleep_secs integer CHECK (auto_sleep_secs >= 0);
