-- Running totals per run, kept by triggers on `groups`, so that the runs list, `/status`, the
-- status sampler and `/metrics` read a few rows instead of counting a run's groups (a deep queue
-- or a long history made every runs list scan them all).
--
-- A run's totals are spread over shard rows chosen by the writing backend's process id (modulo
-- 1024, so a pool's few dozen connections rarely share one): concurrent ingests on different
-- connections update different rows and do not queue behind one row lock until each other's
-- commit. A run has at most a row per connection that ever wrote to it; readers add them up. A shard's `queued` may go
-- below zero (a batch taken on another connection than the ingest); the sum cannot.
CREATE TABLE run_tallies (
    run_id           TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    shard            SMALLINT NOT NULL,
    -- Groups ever acknowledged (each also has its `group_stats` row); `/reset_data` keeps them.
    received         BIGINT NOT NULL DEFAULT 0,
    last_received_at TIMESTAMPTZ,
    -- `groups` rows in state 'queued' and 'buffered' now.
    queued           BIGINT NOT NULL DEFAULT 0,
    buffered         BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (run_id, shard),
    CONSTRAINT run_tallies_shard_in_range CHECK (shard >= 0 AND shard < 1024),
    CONSTRAINT run_tallies_received_nonnegative CHECK (received >= 0)
);

-- An inserted group, one at a time: ingest inserts one group per statement, and a row trigger
-- costs it less than a statement trigger's transition table (which would copy the payload).
CREATE FUNCTION run_tallies_count_new_group() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO run_tallies AS t (run_id, shard, received, last_received_at, queued, buffered)
    VALUES (NEW.run_id, (pg_backend_pid() % 1024)::smallint, 1, NEW.received_at,
            (NEW.state = 'queued')::int, (NEW.state = 'buffered')::int)
    ON CONFLICT (run_id, shard) DO UPDATE
        SET received = t.received + 1,
            last_received_at = greatest(t.last_received_at, excluded.last_received_at),
            queued = t.queued + excluded.queued,
            buffered = t.buffered + excluded.buffered;
    RETURN NULL;
END $$;

CREATE FUNCTION run_tallies_count_groups() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    my_shard SMALLINT := (pg_backend_pid() % 1024)::smallint;
BEGIN
    -- Batches and resets change many groups in one statement. Each branch names only the
    -- transition tables its event has; runs already gone are skipped (a deleted run's groups go
    -- with it, and so do its tallies).
    IF TG_OP = 'UPDATE' THEN
        INSERT INTO run_tallies AS t (run_id, shard, queued, buffered)
        SELECT d.run_id, my_shard, sum(d.q), sum(d.b)
        FROM (SELECT run_id, (state = 'queued')::int AS q, (state = 'buffered')::int AS b FROM added
              UNION ALL
              SELECT run_id, -(state = 'queued')::int, -(state = 'buffered')::int FROM removed) d
        WHERE EXISTS (SELECT 1 FROM runs WHERE id = d.run_id)
        GROUP BY d.run_id
        HAVING sum(d.q) <> 0 OR sum(d.b) <> 0
        ON CONFLICT (run_id, shard) DO UPDATE
            SET queued = t.queued + excluded.queued, buffered = t.buffered + excluded.buffered;
    ELSE
        INSERT INTO run_tallies AS t (run_id, shard, queued, buffered)
        SELECT run_id, my_shard,
               -count(*) FILTER (WHERE state = 'queued'), -count(*) FILTER (WHERE state = 'buffered')
        FROM removed d
        WHERE EXISTS (SELECT 1 FROM runs WHERE id = d.run_id)
        GROUP BY run_id
        ON CONFLICT (run_id, shard) DO UPDATE
            SET queued = t.queued + excluded.queued, buffered = t.buffered + excluded.buffered;
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER groups_tally_insert AFTER INSERT ON groups
    FOR EACH ROW EXECUTE FUNCTION run_tallies_count_new_group();
CREATE TRIGGER groups_tally_update AFTER UPDATE ON groups
    REFERENCING OLD TABLE AS removed NEW TABLE AS added
    FOR EACH STATEMENT EXECUTE FUNCTION run_tallies_count_groups();
CREATE TRIGGER groups_tally_delete AFTER DELETE ON groups
    REFERENCING OLD TABLE AS removed FOR EACH STATEMENT EXECUTE FUNCTION run_tallies_count_groups();

-- Runs that already hold groups start from their counts.
INSERT INTO run_tallies (run_id, shard, received, last_received_at, queued, buffered)
SELECT r.id, 0,
       (SELECT count(*) FROM group_stats s WHERE s.run_id = r.id),
       (SELECT max(received_at) FROM group_stats s WHERE s.run_id = r.id),
       (SELECT count(*) FROM groups g WHERE g.run_id = r.id AND g.state = 'queued'),
       (SELECT count(*) FROM groups g WHERE g.run_id = r.id AND g.state = 'buffered')
FROM runs r;

-- What readers use: one row per run with tallies.
CREATE VIEW run_totals AS
SELECT run_id, sum(received)::bigint AS received, max(last_received_at) AS last_received_at,
       sum(queued)::bigint AS queued, sum(buffered)::bigint AS buffered
FROM run_tallies GROUP BY run_id;
