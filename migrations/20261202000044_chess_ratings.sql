-- The chess agent's yardstick (`lachesis chess rate --record`): a policy version's Elo from games
-- against a ladder of fixed opponents anchored at Stockfish's UCI_Elo 1350, and its sacrifice rate
-- in those games. The chess page shows the latest row for the current version and for version 0.

CREATE TABLE chess_ratings (
    id                BIGSERIAL PRIMARY KEY,
    policy_version    BIGINT NOT NULL REFERENCES chess_policies (version),
    -- The maximum-likelihood Elo and its 95% interval. NULL where the games leave a side open:
    -- every game lost has no point and no lower end, every game won no point and no upper end.
    elo               DOUBLE PRECISION,
    elo_low           DOUBLE PRECISION,
    elo_high          DOUBLE PRECISION,
    -- The rated version's games against the ladder, and the calibration games between its rungs.
    games             INTEGER NOT NULL,
    calibration_games INTEGER NOT NULL,
    -- Sacrifices per move the version made in its games.
    sacrifice_rate    DOUBLE PRECISION NOT NULL,
    measured_at       TIMESTAMPTZ NOT NULL DEFAULT now(),
    CONSTRAINT chess_ratings_games_positive CHECK (games > 0),
    CONSTRAINT chess_ratings_calibration_nonnegative CHECK (calibration_games >= 0),
    CONSTRAINT chess_ratings_sacrifice_rate_range CHECK (sacrifice_rate BETWEEN 0 AND 1),
    -- Finite and plausible (this also refuses NaN and infinities); NULL passes.
    CONSTRAINT chess_ratings_elo_range CHECK (elo BETWEEN -100000 AND 100000),
    CONSTRAINT chess_ratings_low_range CHECK (elo_low BETWEEN -100000 AND 100000),
    CONSTRAINT chess_ratings_high_range CHECK (elo_high BETWEEN -100000 AND 100000),
    -- A point has both ends around it; without one, at least one end bounds the rating.
    CONSTRAINT chess_ratings_point_bounded
        CHECK (elo IS NULL OR (elo_low IS NOT NULL AND elo_high IS NOT NULL)),
    CONSTRAINT chess_ratings_some_end CHECK (elo_low IS NOT NULL OR elo_high IS NOT NULL),
    CONSTRAINT chess_ratings_ordered
        CHECK (elo_low <= elo AND elo <= elo_high AND elo_low <= elo_high)
);
CREATE INDEX chess_ratings_latest ON chess_ratings (policy_version, measured_at DESC, id DESC);
