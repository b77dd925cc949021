-- The arena: contenders answer the same prompt side by side, a person votes without knowing who is
-- who, and the votes feed a Bradley–Terry leaderboard.
--
-- Nothing here is ever deleted: a contender that received a vote stays on the leaderboard (no
-- private testing and quiet withdrawal), and an excluded vote is flagged, not removed. The foreign
-- keys are RESTRICT for that reason.

CREATE TABLE arena_contenders (
    id         BIGSERIAL PRIMARY KEY,
    name       TEXT NOT NULL,
    -- How it answers (ContenderPolicy as JSON): the embedded model with its settings, or an
    -- admin-chosen endpoint.
    policy     JSONB NOT NULL,
    -- Lower-case words that give the contender away when an answer contains one.
    reveals    TEXT[] NOT NULL DEFAULT '{}',
    created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    CONSTRAINT arena_contenders_name_unique UNIQUE (name),
    CONSTRAINT arena_contenders_name_length CHECK (char_length(name) BETWEEN 1 AND 80),
    CONSTRAINT arena_contenders_policy_kind CHECK (policy ->> 'kind' IN ('embedded', 'endpoint'))
);

-- Anonymous voters (when the host allows them): only the token's SHA-256 is stored.
CREATE TABLE arena_visitors (
    id         BIGSERIAL PRIMARY KEY,
    token_hash BYTEA NOT NULL,
    address    TEXT NOT NULL,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    CONSTRAINT arena_visitors_token_hash_unique UNIQUE (token_hash),
    CONSTRAINT arena_visitors_token_hash_length CHECK (octet_length(token_hash) = 32)
);

CREATE TABLE arena_battles (
    id           BIGSERIAL PRIMARY KEY,
    arena        TEXT NOT NULL CHECK (arena IN ('catbot', 'arithmetic')),
    seed         BIGINT NOT NULL,
    prompt       TEXT NOT NULL,
    contender_a  BIGINT NOT NULL REFERENCES arena_contenders (id) ON DELETE RESTRICT,
    contender_b  BIGINT NOT NULL REFERENCES arena_contenders (id) ON DELETE RESTRICT,
    answer_a     TEXT,
    answer_b     TEXT,
    state        TEXT NOT NULL DEFAULT 'answering'
        CHECK (state IN ('answering', 'ready', 'voted', 'void')),
    void_reason  TEXT,
    -- Who the battle was dealt to ('user:ID', 'visitor:ID', 'open:ADDRESS'): only they vote on it.
    voter        TEXT NOT NULL,
    address      TEXT NOT NULL,
    created_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
    ready_at     TIMESTAMPTZ,
    CONSTRAINT arena_battles_two_contenders CHECK (contender_a <> contender_b),
    -- A battle open to a vote has both answers and knows when they were complete.
    CONSTRAINT arena_battles_answers_before_vote CHECK (
        state NOT IN ('ready', 'voted')
        OR (answer_a IS NOT NULL AND answer_b IS NOT NULL AND ready_at IS NOT NULL)
    ),
    CONSTRAINT arena_battles_void_has_reason CHECK ((state = 'void') = (void_reason IS NOT NULL))
);
CREATE INDEX arena_battles_by_arena ON arena_battles (arena, id);
CREATE INDEX arena_battles_open_by_voter ON arena_battles (voter) WHERE state = 'answering';

CREATE TABLE arena_votes (
    id            BIGSERIAL PRIMARY KEY,
    -- One vote per battle: a battle is dealt to one voter, who votes once.
    battle_id     BIGINT NOT NULL REFERENCES arena_battles (id) ON DELETE RESTRICT,
    voter         TEXT NOT NULL,
    address       TEXT NOT NULL,
    choice        TEXT NOT NULL CHECK (choice IN ('a', 'b', 'tie', 'both_bad')),
    reason        TEXT CHECK (char_length(reason) <= 1000),
    -- Why the anomaly filters keep this vote out of the ratings; NULL when it counts.
    excluded      TEXT,
    -- Seconds between the answers being complete and the vote.
    seconds_taken DOUBLE PRECISION NOT NULL CHECK (seconds_taken >= 0),
    cast_at       TIMESTAMPTZ NOT NULL DEFAULT now(),
    CONSTRAINT arena_votes_one_per_battle UNIQUE (battle_id)
);
CREATE INDEX arena_votes_by_voter ON arena_votes (voter, id);

-- A vote goes only to a battle whose answers were complete and which its voter has just closed
-- (the same transaction moves it from 'ready' to 'voted').
CREATE FUNCTION arena_vote_needs_a_voted_battle() RETURNS trigger AS $$
BEGIN
    IF NOT EXISTS (
        SELECT 1 FROM arena_battles
        WHERE id = NEW.battle_id AND state = 'voted' AND voter = NEW.voter
    ) THEN
        RAISE EXCEPTION 'arena vote on battle % that is not closed by its voter', NEW.battle_id
            USING ERRCODE = 'check_violation';
    END IF;
    RETURN NEW;
END
$$ LANGUAGE plpgsql;

CREATE TRIGGER arena_votes_need_a_voted_battle
    BEFORE INSERT OR UPDATE ON arena_votes
    FOR EACH ROW EXECUTE FUNCTION arena_vote_needs_a_voted_battle();
