-- Batches handed to (or waiting for) the trainer. A batch is formed once, served at most once.
CREATE TABLE batches (
    id         BIGSERIAL PRIMARY KEY,
    run_id     TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    seq_count  INTEGER NOT NULL CHECK (seq_count > 0),
    formed_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
    served_at  TIMESTAMPTZ
);
CREATE INDEX batches_unserved ON batches (run_id, id) WHERE served_at IS NULL;

-- Every acknowledged scored group, committed before the HTTP answer.
--   buffered: its size differs from the env's group_size; waits for partners that sum to it
--   queued:   waits in the run's queue, in queue_pos order
--   batched:  belongs to a batch, at batch_pos
CREATE SEQUENCE groups_queue_pos;
CREATE TABLE groups (
    id             BIGSERIAL PRIMARY KEY,
    run_id         TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    env_id         BIGINT,
    n_seqs         INTEGER NOT NULL CHECK (n_seqs >= 0),
    weight_version BIGINT,
    state          TEXT NOT NULL,
    queue_pos      BIGINT,
    batch_id       BIGINT REFERENCES batches (id) ON DELETE CASCADE,
    batch_pos      INTEGER,
    received_at    TIMESTAMPTZ NOT NULL DEFAULT now(),
    -- The group exactly as served (canonical JSON with every Atropos field), zstd-compressed: a
    -- third of the bytes to write-ahead log and fsync per acknowledged group.
    payload        BYTEA NOT NULL,
    CONSTRAINT groups_state_known CHECK (state IN ('buffered', 'queued', 'batched')),
    CONSTRAINT groups_queued_has_pos CHECK ((state = 'buffered') = (queue_pos IS NULL)),
    CONSTRAINT groups_batched_has_batch CHECK ((state = 'batched') = (batch_id IS NOT NULL AND batch_pos IS NOT NULL))
);
-- Payloads arrive compressed; TOAST must not try again.
ALTER TABLE groups ALTER COLUMN payload SET STORAGE EXTERNAL;
CREATE INDEX groups_queue ON groups (run_id, queue_pos) WHERE state = 'queued';
CREATE INDEX groups_buffer ON groups (run_id, env_id, id) WHERE state = 'buffered';
CREATE INDEX groups_latest ON groups (run_id, queue_pos DESC) WHERE queue_pos IS NOT NULL;
CREATE UNIQUE INDEX groups_one_slot_per_batch_pos ON groups (batch_id, batch_pos) WHERE batch_id IS NOT NULL;
