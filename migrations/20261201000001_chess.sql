-- DeepSacrifice chess: the agent's policy versions, games against people, and every move with
-- its reward-model verdict and the person's rating.

CREATE TABLE chess_policies (
    version       BIGINT PRIMARY KEY,
    -- agent::PolicyParams as JSON (weights, temperature, depth).
    params        JSONB NOT NULL,
    -- Games whose moves this version was learned from.
    learned_games BIGINT NOT NULL DEFAULT 0,
    created_at    TIMESTAMPTZ NOT NULL DEFAULT now(),
    CONSTRAINT chess_policies_version_nonnegative CHECK (version >= 0),
    CONSTRAINT chess_policies_learned_nonnegative CHECK (learned_games >= 0)
);

CREATE TABLE chess_games (
    id             BIGSERIAL PRIMARY KEY,
    -- Who may see and play the game: a user, a team (API tokens), or nobody in particular when
    -- accounts are off.
    owner_user     BIGINT REFERENCES users (id) ON DELETE CASCADE,
    owner_team     BIGINT REFERENCES teams (id) ON DELETE CASCADE,
    agent_side     TEXT NOT NULL,
    start_fen      TEXT NOT NULL,
    fen            TEXT NOT NULL,
    policy_version BIGINT NOT NULL REFERENCES chess_policies (version),
    result         TEXT,
    end_reason     TEXT,
    game_return    DOUBLE PRECISION,
    -- Set once the policy has been updated from this game's moves.
    learned        BOOLEAN NOT NULL DEFAULT false,
    created_at     TIMESTAMPTZ NOT NULL DEFAULT now(),
    ended_at       TIMESTAMPTZ,
    CONSTRAINT chess_games_side_known CHECK (agent_side IN ('white', 'black')),
    CONSTRAINT chess_games_result_known CHECK (result IN ('1-0', '0-1', '1/2-1/2')),
    CONSTRAINT chess_games_end_consistent
        CHECK ((result IS NULL) = (end_reason IS NULL) AND (result IS NULL) = (ended_at IS NULL)),
    CONSTRAINT chess_games_reviewed_after_end CHECK (game_return IS NULL OR result IS NOT NULL),
    CONSTRAINT chess_games_learned_after_review CHECK (NOT learned OR game_return IS NOT NULL)
);
CREATE INDEX chess_games_by_user ON chess_games (owner_user, id DESC);
CREATE INDEX chess_games_to_learn ON chess_games (id) WHERE game_return IS NOT NULL AND NOT learned;

CREATE TABLE chess_moves (
    game_id    BIGINT NOT NULL REFERENCES chess_games (id) ON DELETE CASCADE,
    ply        INTEGER NOT NULL,
    uci        TEXT NOT NULL,
    san        TEXT NOT NULL,
    fen_after  TEXT NOT NULL,
    by_agent   BOOLEAN NOT NULL,
    -- The agent's d log pi / d weights when it chose the move: what learning credits.
    gradient   DOUBLE PRECISION[],
    -- The reward model's verdict (MoveReward as JSON), after the game.
    reward     JSONB,
    rating     SMALLINT,
    PRIMARY KEY (game_id, ply),
    CONSTRAINT chess_moves_ply_nonnegative CHECK (ply >= 0),
    CONSTRAINT chess_moves_rating_range CHECK (rating BETWEEN 1 AND 5),
    CONSTRAINT chess_moves_agent_only_judged
        CHECK (by_agent OR (reward IS NULL AND rating IS NULL AND gradient IS NULL))
);
