-- Server replicas on one database (docs/replicas.md): each live replica heartbeats its row; each
-- agent is owned by at most one replica at a time (its lease). A lease holds while its replica's
-- row has not expired; a replica that stops heartbeating loses all of its leases at once.
CREATE TABLE replicas (
    id uuid PRIMARY KEY,
    -- What sandboxes dial to reach this replica itself (a tunnel redirect names it).
    tunnel_url text NOT NULL,
    -- Where other replicas reach this one's API (forwarded commands).
    internal_url text NOT NULL,
    started_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL
);

CREATE TABLE agent_leases (
    agent_id uuid PRIMARY KEY REFERENCES agents (id) ON DELETE CASCADE,
    replica_id uuid NOT NULL,
    acquired_at timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX agent_leases_replica ON agent_leases (replica_id);

-- The replica that made each pooled sandbox (its pool holds the sandbox's connection): a replica
-- starting removes only its own leftovers and those of replicas no longer alive.
ALTER TABLE pooled_sandboxes ADD COLUMN replica_id uuid;
