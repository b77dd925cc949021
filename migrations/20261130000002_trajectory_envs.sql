-- Environments registered with a run. env_id is dense per run (0, 1, 2, ...) as in atroposlib.
CREATE TABLE envs (
    run_id               TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    env_id               INTEGER NOT NULL CHECK (env_id >= 0),
    desired_name         TEXT NOT NULL,
    real_name            TEXT NOT NULL,
    max_context_len      BIGINT NOT NULL,
    weight               DOUBLE PRECISION NOT NULL,
    group_size           BIGINT NOT NULL,
    min_batch_allocation DOUBLE PRECISION,
    connected            BOOLEAN NOT NULL DEFAULT TRUE,
    registered_at        TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (run_id, env_id)
);
