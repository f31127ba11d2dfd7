-- The Docker engine each agent's sandbox lives on (docs/engines.md): its home volume is there,
-- so the agent stays on that engine for life. `local` is the engine of the server's own host
-- (DOCKER_HOST or the default socket), which every agent made before remote engines existed
-- is on; other names are those of AGENTHOLD_DOCKER_ENGINES. Placement counts agents per engine.
ALTER TABLE agents ADD COLUMN engine text NOT NULL DEFAULT 'local';
CREATE INDEX agents_engine ON agents (engine);
