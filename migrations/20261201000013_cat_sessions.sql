-- Caretaker sessions a person plays in the browser, as the caretaker or as the cat.
CREATE TABLE cat_sessions (
    id         BIGSERIAL PRIMARY KEY,
    -- Who may see and play it: a user, a team (API tokens), or anyone with full rights.
    owner_user BIGINT REFERENCES users (id) ON DELETE CASCADE,
    owner_team BIGINT REFERENCES teams (id) ON DELETE CASCADE,
    role       TEXT NOT NULL,
    seed       BIGINT NOT NULL,
    -- lachesis_shared::cats::CatTurn values, in order.
    turns      JSONB NOT NULL DEFAULT '[]',
    verdict    JSONB,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    CONSTRAINT cat_sessions_role_known CHECK (role IN ('caretaker', 'cat')),
    CONSTRAINT cat_sessions_turns_array CHECK (jsonb_typeof(turns) = 'array'),
    CONSTRAINT cat_sessions_turn_limit CHECK (jsonb_array_length(turns) <= 40)
);
CREATE INDEX cat_sessions_by_user ON cat_sessions (owner_user, id);
