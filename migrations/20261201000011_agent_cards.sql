-- The judge marketplace: agent cards (a judge for a price) and every evaluation they gave.

CREATE TABLE agent_cards (
    id           BIGSERIAL PRIMARY KEY,
    slug         TEXT NOT NULL UNIQUE,
    name         TEXT NOT NULL,
    description  TEXT NOT NULL DEFAULT '',
    specialties  TEXT[] NOT NULL,
    -- Price per evaluation in micro-USDC.
    price        BIGINT NOT NULL,
    -- NULL for the platform's own cards.
    owner_team   BIGINT REFERENCES teams (id) ON DELETE RESTRICT,
    owner_wallet TEXT,
    -- Where its payments go: a card_owner account of the ledger.
    account_id   BIGINT NOT NULL UNIQUE REFERENCES ledger_accounts (id),
    -- The judge behind the card: {"kind": "rubric" | "embedded" | "openai", ...}.
    judge        JSONB NOT NULL,
    listed       BOOLEAN NOT NULL DEFAULT true,
    created_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
    CONSTRAINT agent_cards_slug_format CHECK (slug ~ '^[a-z0-9][a-z0-9-]{1,47}$'),
    CONSTRAINT agent_cards_name_length CHECK (length(name) BETWEEN 1 AND 80),
    CONSTRAINT agent_cards_description_length CHECK (length(description) <= 1000),
    CONSTRAINT agent_cards_specialties_count CHECK (cardinality(specialties) BETWEEN 1 AND 8),
    -- At most 100 USDC per evaluation: a typo in a price must not drain a budget.
    CONSTRAINT agent_cards_price_range CHECK (price > 0 AND price <= 100000000),
    CONSTRAINT agent_cards_wallet_format
        CHECK (owner_wallet IS NULL OR owner_wallet ~ '^0x[0-9a-f]{40}$'),
    CONSTRAINT agent_cards_judge_kind CHECK (judge ->> 'kind' IN ('rubric', 'embedded', 'openai'))
);

-- One judge's score of one answer. `consensus` is the panel's mean for that answer once every
-- judge of the panel has scored it; `paid_tx` the payment (NULL in unpaid evaluation mode).
CREATE TABLE card_evaluations (
    id         BIGSERIAL PRIMARY KEY,
    card_id    BIGINT NOT NULL REFERENCES agent_cards (id),
    run        TEXT NOT NULL,
    score      DOUBLE PRECISION NOT NULL,
    consensus  DOUBLE PRECISION,
    price      BIGINT NOT NULL,
    paid_tx    BIGINT REFERENCES ledger_transactions (id),
    created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    CONSTRAINT card_evaluations_score_range CHECK (score >= 0 AND score <= 1),
    CONSTRAINT card_evaluations_consensus_range
        CHECK (consensus IS NULL OR (consensus >= 0 AND consensus <= 1)),
    CONSTRAINT card_evaluations_price_nonnegative CHECK (price >= 0)
);
CREATE INDEX card_evaluations_by_card ON card_evaluations (card_id, id);
