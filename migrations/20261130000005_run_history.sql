-- What the run dashboards draw. Kept apart from `groups` so that history survives `/reset_data`
-- (which empties the queue, as Atropos's does) and so charts never decompress payloads.

-- One row per acknowledged group: its numbers, not its tokens.
CREATE TABLE group_stats (
    group_id       BIGINT PRIMARY KEY,
    run_id         TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    env_id         BIGINT,
    received_at    TIMESTAMPTZ NOT NULL,
    weight_version BIGINT,
    scores         DOUBLE PRECISION[] NOT NULL,
    -- Per sequence: the mean of its per-token advantages, when the environment sent them.
    advantages     DOUBLE PRECISION[],
    tokens         BIGINT NOT NULL,
    CONSTRAINT group_stats_tokens_nonnegative CHECK (tokens >= 0)
);
CREATE INDEX group_stats_by_run ON group_stats (run_id, group_id DESC);

-- The run's step and queue depth, sampled while the run is active.
CREATE TABLE run_status_samples (
    run_id     TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    at         TIMESTAMPTZ NOT NULL DEFAULT now(),
    step       BIGINT NOT NULL,
    queue_size BIGINT NOT NULL,
    CONSTRAINT run_status_samples_nonnegative CHECK (queue_size >= 0)
);
CREATE INDEX run_status_samples_by_run ON run_status_samples (run_id, at DESC);

-- Numbers a trainer reports per step (loss, kl, clip_fraction, ...).
CREATE TABLE trainer_metrics (
    id      BIGSERIAL PRIMARY KEY,
    run_id  TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    step    BIGINT NOT NULL,
    at      TIMESTAMPTZ NOT NULL DEFAULT now(),
    metrics JSONB NOT NULL,
    CONSTRAINT trainer_metrics_is_object CHECK (jsonb_typeof(metrics) = 'object')
);
CREATE INDEX trainer_metrics_by_run ON trainer_metrics (run_id, id DESC);
