-- Evaluations started through MCP's `start_evaluation`: one environment's evaluation set, run
-- once against the server's embedded model, its metrics kept for whoever may read them.

CREATE TABLE evaluations (
    id           BIGSERIAL PRIMARY KEY,
    environment  TEXT NOT NULL CHECK (char_length(environment) BETWEEN 1 AND 64),
    -- The team whose token asked (its members' tokens read it); NULL for the admin.
    team_id      BIGINT REFERENCES teams (id) ON DELETE CASCADE,
    -- Who asked, for the one-at-a-time rule: `token:<id>`, or `admin`.
    caller       TEXT NOT NULL CHECK (char_length(caller) BETWEEN 1 AND 64),
    status       TEXT NOT NULL CHECK (status IN ('running', 'done', 'failed')),
    metrics      JSONB,
    samples      JSONB,
    error        TEXT CHECK (char_length(error) <= 2000),
    started_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
    -- Past this a running evaluation is stopped; a row still running after it belonged to a
    -- process that died, and counts as failed.
    deadline_at  TIMESTAMPTZ NOT NULL,
    finished_at  TIMESTAMPTZ,
    CONSTRAINT evaluations_finished_iff_not_running CHECK ((status = 'running') = (finished_at IS NULL)),
    CONSTRAINT evaluations_done_has_metrics CHECK (status <> 'done' OR metrics IS NOT NULL),
    CONSTRAINT evaluations_failed_says_why CHECK (status <> 'failed' OR error IS NOT NULL)
);

-- One running evaluation per caller, whatever the instance it runs on.
CREATE UNIQUE INDEX evaluations_one_running_per_caller ON evaluations (caller)
    WHERE status = 'running';
CREATE INDEX evaluations_by_team ON evaluations (team_id, id);
