-- An agent's disk space (MiB): its sandbox's home and writable layer may each hold this much,
-- where the engine can enforce it (docs/security.md, "Disk"). NULL (agents made before): the
-- server's AGENTHOLD_SANDBOX_DISK_MIB. Applies when the container is made again; a home keeps the
-- size it was made with.
ALTER TABLE agents ADD COLUMN disk_mib integer CHECK (disk_mib IS NULL OR disk_mib >= 64);
