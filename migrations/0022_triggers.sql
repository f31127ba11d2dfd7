-- Prompts that nobody types (docs/triggers.md): schedules and webhooks, each per agent, and
-- what each run or delivery did. A trigger appends to `session_id` when set, else opens a new
-- session per run.

CREATE TABLE schedules (
    id            uuid PRIMARY KEY,
    agent_id      uuid NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
    name          text NOT NULL,
    cron          text NOT NULL,
    time_zone     text NOT NULL,
    prompt        text NOT NULL,
    session_id    uuid REFERENCES sessions (id) ON DELETE CASCADE,
    paused        boolean NOT NULL DEFAULT false,
    -- the next time it is due (computed from the cron expression in its time zone)
    next_run_at   timestamptz NOT NULL,
    last_run_at   timestamptz,
    -- the turn its last started run made (a run is skipped while it is unfinished)
    last_turn_id  uuid,
    created_by    uuid REFERENCES users (id) ON DELETE SET NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    UNIQUE (agent_id, name)
);
-- The scheduler's claim: due, not paused, oldest first.
CREATE INDEX schedules_due ON schedules (next_run_at) WHERE NOT paused;

CREATE TABLE schedule_runs (
    id           uuid PRIMARY KEY,
    schedule_id  uuid NOT NULL REFERENCES schedules (id) ON DELETE CASCADE,
    -- the slot it ran for (the schedule's next_run_at when claimed)
    due_at       timestamptz NOT NULL,
    ran_at       timestamptz NOT NULL DEFAULT now(),
    outcome      text NOT NULL CHECK (outcome IN ('started', 'skipped')),
    reason       text,
    session_id   uuid,
    turn_id      uuid
);
CREATE INDEX schedule_runs_by_schedule ON schedule_runs (schedule_id, ran_at DESC);

CREATE TABLE webhooks (
    id             uuid PRIMARY KEY,
    agent_id       uuid NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
    name           text NOT NULL,
    template       text NOT NULL,
    session_id     uuid REFERENCES sessions (id) ON DELETE CASCADE,
    -- the signing secret, sealed under the master key like secret values (never returned)
    secret_key_id  text NOT NULL,
    secret_nonce   bytea NOT NULL,
    secret_sealed  bytea NOT NULL,
    created_by     uuid REFERENCES users (id) ON DELETE SET NULL,
    created_at     timestamptz NOT NULL DEFAULT now(),
    UNIQUE (agent_id, name)
);

CREATE TABLE webhook_deliveries (
    id            uuid PRIMARY KEY,
    webhook_id    uuid NOT NULL REFERENCES webhooks (id) ON DELETE CASCADE,
    -- the sender's delivery id (X-GitHub-Delivery, …), when it gave one
    delivery_id   text,
    received_at   timestamptz NOT NULL DEFAULT now(),
    status        integer NOT NULL,
    outcome       text NOT NULL CHECK (outcome IN ('accepted', 'refused')),
    code          text,
    reason        text,
    session_id    uuid,
    turn_id       uuid
);
-- The replay guard: an accepted delivery id is accepted once.
CREATE UNIQUE INDEX webhook_deliveries_once ON webhook_deliveries (webhook_id, delivery_id)
    WHERE outcome = 'accepted';
CREATE INDEX webhook_deliveries_by_webhook ON webhook_deliveries (webhook_id, received_at DESC);
