-- agenthold's core tables: agents, their sandboxes, sessions, turns, the event log.

-- Bootstrap API tokens (until users and roles land): stored as SHA-256 of the token.
CREATE TABLE api_tokens (
    id          uuid PRIMARY KEY,
    name        text NOT NULL,
    token_hash  bytea NOT NULL UNIQUE,
    created_at  timestamptz NOT NULL DEFAULT now(),
    last_used_at timestamptz
);

CREATE TABLE agents (
    id          uuid PRIMARY KEY,
    name        text NOT NULL UNIQUE,
    harness     text NOT NULL,
    -- argv for the `command` harness; NULL for the others
    command     jsonb,
    -- non-secret environment variables given at creation: {"NAME": "value"}
    env         jsonb NOT NULL DEFAULT '{}',
    image       text NOT NULL,
    driver      text NOT NULL,
    permission_policy text NOT NULL DEFAULT 'auto-approve'
        CHECK (permission_policy IN ('auto-approve')),
    cpus        double precision NOT NULL,
    memory_mib  integer NOT NULL,
    pids_limit  integer NOT NULL,
    -- what the user asked for: 'awake' or 'asleep'
    desired_state text NOT NULL DEFAULT 'awake' CHECK (desired_state IN ('awake', 'asleep')),
    created_at  timestamptz NOT NULL DEFAULT now()
);

-- One sandbox per agent, and the harness process running in it.
CREATE TABLE sandboxes (
    agent_id    uuid PRIMARY KEY REFERENCES agents (id) ON DELETE CASCADE,
    -- SHA-256 of the token sandboxd presents on the tunnel; replaced whenever a container is made
    token_hash  bytea NOT NULL UNIQUE,
    -- the driver's handle (a container id, a pid file path)
    handle      text,
    -- bumped every time the server starts a harness process; events carry no generation, but
    -- stdout offsets belong to one process
    harness_generation bigint NOT NULL DEFAULT 0,
    -- the tunnel channel of the current harness process, NULL when none runs
    harness_channel integer,
    -- stdout bytes of the current harness process whose effects are stored
    harness_stdout_offset bigint NOT NULL DEFAULT 0,
    -- the harness's `initialize` answer, once it gave one
    harness_init jsonb,
    -- agenthold session ids the current harness process knows (created, loaded or resumed)
    harness_sessions uuid[] NOT NULL DEFAULT '{}',
    -- channel numbers are never reused within a sandbox
    next_channel integer NOT NULL DEFAULT 1,
    updated_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE sessions (
    id          uuid PRIMARY KEY,
    agent_id    uuid NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
    -- the harness's own id for this session (from session/new)
    acp_session_id text,
    -- highest seq stored; the next event gets last_seq + 1 (assigned in the storing transaction)
    last_seq    bigint NOT NULL DEFAULT 0,
    created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX sessions_agent ON sessions (agent_id, created_at);

-- A prompt and its answer. At most one unfinished turn per session.
CREATE TABLE turns (
    id          uuid PRIMARY KEY,
    session_id  uuid NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    agent_id    uuid NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
    prompt      jsonb NOT NULL,
    state       text NOT NULL CHECK (state IN ('pending', 'running', 'ended')),
    -- JSON-RPC id of the session/prompt request once sent (unique across server incarnations)
    request_id  text,
    -- harness generation the prompt was sent to
    harness_generation bigint,
    -- stdin offset just past the prompt request, and whether sandboxd confirmed writing it
    request_stdin_end bigint,
    request_delivered boolean NOT NULL DEFAULT false,
    stop_reason text,
    created_at  timestamptz NOT NULL DEFAULT now(),
    ended_at    timestamptz
);
CREATE UNIQUE INDEX turns_one_open_per_session ON turns (session_id) WHERE state <> 'ended';
CREATE INDEX turns_open_by_agent ON turns (agent_id) WHERE state <> 'ended';

-- The append-only event log.
CREATE TABLE events (
    session_id  uuid NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    seq         bigint NOT NULL CHECK (seq > 0),
    type        text NOT NULL CHECK (type IN
        ('prompt', 'update', 'permission', 'permission_resolved', 'turn_end', 'error', 'notice')),
    payload     jsonb NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (session_id, seq)
);

-- Payloads over the event budget, stored whole; the event holds an excerpt and a marker.
CREATE TABLE event_payloads (
    session_id  uuid NOT NULL,
    seq         bigint NOT NULL,
    payload     jsonb NOT NULL,
    PRIMARY KEY (session_id, seq),
    FOREIGN KEY (session_id, seq) REFERENCES events (session_id, seq) ON DELETE CASCADE
);

-- Events are never changed. (Deleting an agent deletes its sessions and their logs.)
CREATE FUNCTION events_are_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'events are append-only';
END;
$$;
CREATE TRIGGER events_no_update BEFORE UPDATE ON events
    FOR EACH ROW EXECUTE FUNCTION events_are_append_only();
CREATE TRIGGER event_payloads_no_update BEFORE UPDATE ON event_payloads
    FOR EACH ROW EXECUTE FUNCTION events_are_append_only();

-- Permission requests from harnesses, so that a restarted server can still answer them.
CREATE TABLE permission_requests (
    id          uuid PRIMARY KEY,
    session_id  uuid NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    turn_id     uuid REFERENCES turns (id) ON DELETE CASCADE,
    -- the JSON-RPC id of the harness's request, as it sent it
    request_id  jsonb NOT NULL,
    harness_generation bigint NOT NULL,
    tool_call   jsonb NOT NULL,
    options     jsonb NOT NULL,
    outcome     jsonb,
    -- whether sandboxd confirmed writing the answer to the harness's stdin
    answer_delivered boolean NOT NULL DEFAULT false,
    answer_stdin_end bigint,
    created_at  timestamptz NOT NULL DEFAULT now(),
    resolved_at timestamptz
);
