-- Padres spatial reasoning: the latest state of each live scene (what a viewer loads before
-- applying deltas) and people's solutions, kept as demonstrations.

CREATE TABLE spatial_scenes (
    scene      TEXT PRIMARY KEY,
    -- The sequence number of the last event published on the scene's topic.
    seq        BIGINT NOT NULL,
    -- A lachesis_shared::spatial::SceneSnapshot at `seq`.
    snapshot   JSONB NOT NULL,
    updated_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    CONSTRAINT spatial_scenes_name_format CHECK (scene ~ '^[a-z0-9][a-z0-9_-]{0,63}$'),
    CONSTRAINT spatial_scenes_seq_positive CHECK (seq >= 0)
);

CREATE TABLE spatial_demonstrations (
    id          BIGSERIAL PRIMARY KEY,
    task_id     TEXT NOT NULL,
    seed        BIGINT NOT NULL,
    difficulty  SMALLINT NOT NULL,
    -- The person's actions (lachesis_shared::spatial::Action[]): replaying them on the task
    -- gives the same final poses, the world being deterministic.
    actions     JSONB NOT NULL,
    final_poses JSONB NOT NULL,
    score       REAL NOT NULL,
    verdict     JSONB NOT NULL,
    rested      BOOLEAN NOT NULL,
    -- Who: a signed-in user (NULL when accounts are off or a token made it).
    user_id     BIGINT REFERENCES users (id) ON DELETE SET NULL,
    created_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
    CONSTRAINT spatial_demonstrations_difficulty_range CHECK (difficulty BETWEEN 1 AND 4),
    CONSTRAINT spatial_demonstrations_seed_positive CHECK (seed >= 0),
    CONSTRAINT spatial_demonstrations_score_range CHECK (score >= 0 AND score <= 1)
);
CREATE INDEX spatial_demonstrations_user ON spatial_demonstrations (user_id, id);
