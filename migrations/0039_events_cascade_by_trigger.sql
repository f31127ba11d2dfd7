-- The event log takes thousands of rows a second, and its foreign key to `sessions` checked each
-- one: a lookup and a row lock per event, half of a batched insert's time (20,000 rows: 100–135
-- ms with it, 50–59 without, on this project's CI machine). Every writer of `events`
-- (`store::events::append` and `append_streamed`) locks its sessions' rows in the same statement
-- before inserting and inserts only for the sessions it found, so no row can name a missing
-- session; a session deleted meanwhile waits for that commit, and its delete still takes its
-- events, by this trigger, as the cascade did.
ALTER TABLE events DROP CONSTRAINT events_session_id_fkey;

CREATE FUNCTION delete_session_events() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM events WHERE session_id = OLD.id;
    RETURN NULL;
END;
$$;

CREATE TRIGGER sessions_delete_events AFTER DELETE ON sessions
    FOR EACH ROW EXECUTE FUNCTION delete_session_events();
