-- What a people's round owes for each verdict on its item: who pays, how much, under which
-- payment keys. With them the server settles an item whose round died and that no run replays;
-- `settled_at` marks an item whose verdicts were all paid (by its round, a replay or the server).
ALTER TABLE feedback_items
    ADD COLUMN pay_from BIGINT REFERENCES ledger_accounts (id),
    ADD COLUMN pay_each BIGINT CHECK (pay_each > 0),
    ADD COLUMN pay_key TEXT CHECK (char_length(pay_key) BETWEEN 1 AND 170),
    ADD COLUMN settled_at TIMESTAMPTZ,
    -- All three terms or none, and only on an item that closes at a deadline.
    ADD CONSTRAINT feedback_items_pay_terms CHECK (
        (pay_from IS NULL) = (pay_each IS NULL)
        AND (pay_from IS NULL) = (pay_key IS NULL)
        AND (pay_from IS NULL OR closes_at IS NOT NULL)
    );
CREATE INDEX feedback_items_unsettled ON feedback_items (closes_at)
    WHERE pay_from IS NOT NULL AND settled_at IS NULL;
