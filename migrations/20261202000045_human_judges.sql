-- People paid for their judgements: an annotator's ledger account belongs to one user, and a
-- feedback item a judging round waited on closes when the round ends, so no verdict arrives that
-- the round did not read (and pay).

ALTER TABLE ledger_accounts DROP CONSTRAINT ledger_accounts_kind_known;
ALTER TABLE ledger_accounts ADD CONSTRAINT ledger_accounts_kind_known
    CHECK (kind IN ('budget', 'card_owner', 'platform', 'external', 'annotator'));
ALTER TABLE ledger_accounts ADD COLUMN user_id BIGINT REFERENCES users (id) ON DELETE RESTRICT;
ALTER TABLE ledger_accounts ADD CONSTRAINT ledger_accounts_annotator_is_a_user
    CHECK ((kind = 'annotator') = (user_id IS NOT NULL));
CREATE UNIQUE INDEX ledger_accounts_one_per_annotator ON ledger_accounts (user_id)
    WHERE user_id IS NOT NULL;

ALTER TABLE feedback_items ADD COLUMN closed BOOLEAN NOT NULL DEFAULT false;

-- A human card is a team's: its verdicts come from that team's queue (`{"kind": "human",
-- "queue": id}`).
ALTER TABLE agent_cards DROP CONSTRAINT agent_cards_judge_kind;
ALTER TABLE agent_cards ADD CONSTRAINT agent_cards_judge_kind
    CHECK (judge ->> 'kind' IN ('rubric', 'embedded', 'openai', 'human'));
ALTER TABLE agent_cards ADD CONSTRAINT agent_cards_human_is_a_teams
    CHECK (judge ->> 'kind' <> 'human' OR owner_team IS NOT NULL);
