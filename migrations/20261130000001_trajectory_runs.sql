-- Runs of the trajectory API. The legacy Atropos paths serve the run named 'default'.
-- A run row holds what atroposlib keeps in `app.state`: the trainer registration, the step counter
-- and whether the trainer has started pulling batches.
CREATE TABLE runs (
    id                       TEXT PRIMARY KEY,
    registered               BOOLEAN NOT NULL DEFAULT FALSE,
    wandb_group              TEXT,
    wandb_project            TEXT,
    batch_size               BIGINT NOT NULL DEFAULT -1,
    max_token_len            BIGINT NOT NULL DEFAULT -1,
    checkpoint_dir           TEXT NOT NULL DEFAULT '',
    save_checkpoint_interval BIGINT NOT NULL DEFAULT -1,
    num_steps                BIGINT NOT NULL DEFAULT -1,
    started                  BOOLEAN NOT NULL DEFAULT FALSE,
    current_step             BIGINT NOT NULL DEFAULT 0,
    requesters               BIGINT NOT NULL DEFAULT 0,
    created_at               TIMESTAMPTZ NOT NULL DEFAULT now(),
    CONSTRAINT runs_id_format CHECK (id ~ '^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$'),
    CONSTRAINT runs_batch_size_valid CHECK (batch_size = -1 OR batch_size > 0)
);

INSERT INTO runs (id) VALUES ('default');
