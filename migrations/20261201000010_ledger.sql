-- The USDC ledger: double-entry, in integer micro-USDC (6 decimals).
--
-- Postgres, not the application, holds the invariants:
--   * every transaction's entries sum to zero (checked at commit);
--   * an account's balance is the sum of its entries and its held amount the sum of its open holds
--     (both maintained by triggers in the same transaction, never written by the application);
--   * no account except the external funding source has balance - held below zero (a CHECK on the
--     account row, which concurrent payers update under its row lock, so no interleaving overspends);
--   * entries are append-only; a payment's idempotency key is unique, so a retry charges once.

CREATE TABLE ledger_accounts (
    id         BIGSERIAL PRIMARY KEY,
    -- A path such as `budget/<run>/<agent>`, `card/<slug>`, `platform/fees`, `external/usdc`.
    name       TEXT NOT NULL UNIQUE,
    kind       TEXT NOT NULL,
    -- The team whose money this is; NULL for the platform's own accounts.
    team_id    BIGINT REFERENCES teams (id) ON DELETE RESTRICT,
    -- On-chain wallet behind the account, when settlement is on chain (0x-prefixed, lowercase).
    wallet     TEXT,
    balance    BIGINT NOT NULL DEFAULT 0,
    held       BIGINT NOT NULL DEFAULT 0,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    CONSTRAINT ledger_accounts_kind_known
        CHECK (kind IN ('budget', 'card_owner', 'platform', 'external')),
    CONSTRAINT ledger_accounts_name_format CHECK (name ~ '^[a-z]+/[A-Za-z0-9_./:-]{1,200}$'),
    CONSTRAINT ledger_accounts_wallet_format CHECK (wallet IS NULL OR wallet ~ '^0x[0-9a-f]{40}$'),
    CONSTRAINT ledger_accounts_held_nonnegative CHECK (held >= 0),
    -- Money enters the ledger from the external account, the only one allowed below zero.
    CONSTRAINT ledger_accounts_available_nonnegative CHECK (kind = 'external' OR balance - held >= 0)
);

CREATE TABLE ledger_transactions (
    id              BIGSERIAL PRIMARY KEY,
    idempotency_key TEXT NOT NULL UNIQUE,
    kind            TEXT NOT NULL,
    memo            TEXT NOT NULL DEFAULT '',
    -- A refund names the transaction it reverses; one refund per transaction.
    refund_of       BIGINT UNIQUE REFERENCES ledger_transactions (id),
    -- Settlement: 'simulated' (ledger only) or 'chain' with the transfer's hash.
    settlement      TEXT NOT NULL DEFAULT 'simulated',
    chain_tx        TEXT,
    created_at      TIMESTAMPTZ NOT NULL DEFAULT now(),
    CONSTRAINT ledger_transactions_kind_known CHECK (kind IN ('fund', 'payment', 'refund')),
    CONSTRAINT ledger_transactions_key_length CHECK (length(idempotency_key) BETWEEN 1 AND 200),
    CONSTRAINT ledger_transactions_settlement_known CHECK (settlement IN ('simulated', 'chain')),
    CONSTRAINT ledger_transactions_chain_tx CHECK ((settlement = 'chain') = (chain_tx IS NOT NULL)),
    CONSTRAINT ledger_transactions_refund_kind CHECK ((kind = 'refund') = (refund_of IS NOT NULL))
);

CREATE TABLE ledger_entries (
    id         BIGSERIAL PRIMARY KEY,
    tx_id      BIGINT NOT NULL REFERENCES ledger_transactions (id),
    account_id BIGINT NOT NULL REFERENCES ledger_accounts (id),
    amount     BIGINT NOT NULL,
    CONSTRAINT ledger_entries_amount_nonzero CHECK (amount <> 0)
);
CREATE INDEX ledger_entries_by_tx ON ledger_entries (tx_id);
CREATE INDEX ledger_entries_by_account ON ledger_entries (account_id, id);

-- A hold reserves a payer's money for a payment that is being settled (on chain, a transfer
-- awaiting its receipt). It ends captured (the payment's transaction) or released (nothing moves).
CREATE TABLE ledger_holds (
    id              BIGSERIAL PRIMARY KEY,
    idempotency_key TEXT NOT NULL UNIQUE,
    payer           BIGINT NOT NULL REFERENCES ledger_accounts (id),
    payee           BIGINT NOT NULL REFERENCES ledger_accounts (id),
    amount          BIGINT NOT NULL,
    memo            TEXT NOT NULL DEFAULT '',
    state           TEXT NOT NULL DEFAULT 'held',
    settlement      TEXT NOT NULL DEFAULT 'simulated',
    -- The submitted transfer, once there is one: recovery asks the chain what became of it.
    chain_tx        TEXT,
    -- The process settling it: a session advisory lock on this key is held while that process
    -- lives, so another process can tell a hold in flight from one a crash abandoned.
    owner           BIGINT,
    capture_tx      BIGINT UNIQUE REFERENCES ledger_transactions (id),
    release_reason  TEXT,
    created_at      TIMESTAMPTZ NOT NULL DEFAULT now(),
    resolved_at     TIMESTAMPTZ,
    CONSTRAINT ledger_holds_amount_positive CHECK (amount > 0),
    CONSTRAINT ledger_holds_distinct_accounts CHECK (payer <> payee),
    CONSTRAINT ledger_holds_state_known CHECK (state IN ('held', 'captured', 'released')),
    CONSTRAINT ledger_holds_settlement_known CHECK (settlement IN ('simulated', 'chain')),
    CONSTRAINT ledger_holds_captured_has_tx CHECK ((state = 'captured') = (capture_tx IS NOT NULL)),
    CONSTRAINT ledger_holds_resolved_at CHECK ((state = 'held') = (resolved_at IS NULL))
);
CREATE INDEX ledger_holds_open ON ledger_holds (created_at) WHERE state = 'held';

-- Balances and held amounts are written only by the ledger's own triggers below (at trigger depth
-- 2); an application UPDATE of either is refused, so they cannot drift from entries and holds.
CREATE FUNCTION ledger_accounts_guard() RETURNS trigger AS $$
BEGIN
    IF (NEW.balance <> OLD.balance OR NEW.held <> OLD.held) AND pg_trigger_depth() < 2 THEN
        RAISE EXCEPTION 'ledger balances change only through entries and holds'
            USING ERRCODE = 'restrict_violation', CONSTRAINT = 'ledger_accounts_derived';
    END IF;
    IF NEW.kind <> OLD.kind THEN
        RAISE EXCEPTION 'an account''s kind never changes' USING ERRCODE = 'restrict_violation';
    END IF;
    RETURN NEW;
END;
$$ LANGUAGE plpgsql;

CREATE TRIGGER ledger_accounts_guard BEFORE UPDATE ON ledger_accounts
    FOR EACH ROW EXECUTE FUNCTION ledger_accounts_guard();

CREATE FUNCTION ledger_accounts_start_empty() RETURNS trigger AS $$
BEGIN
    IF NEW.balance <> 0 OR NEW.held <> 0 THEN
        RAISE EXCEPTION 'an account opens empty; money arrives as entries'
            USING ERRCODE = 'restrict_violation', CONSTRAINT = 'ledger_accounts_derived';
    END IF;
    RETURN NEW;
END;
$$ LANGUAGE plpgsql;

CREATE TRIGGER ledger_accounts_start_empty BEFORE INSERT ON ledger_accounts
    FOR EACH ROW EXECUTE FUNCTION ledger_accounts_start_empty();

-- Balances follow entries; entries never change.
CREATE FUNCTION ledger_entry_posted() RETURNS trigger AS $$
BEGIN
    UPDATE ledger_accounts SET balance = balance + NEW.amount WHERE id = NEW.account_id;
    RETURN NULL;
END;
$$ LANGUAGE plpgsql;

CREATE TRIGGER ledger_entries_post AFTER INSERT ON ledger_entries
    FOR EACH ROW EXECUTE FUNCTION ledger_entry_posted();

CREATE FUNCTION ledger_append_only() RETURNS trigger AS $$
BEGIN
    RAISE EXCEPTION '% rows are append-only', TG_TABLE_NAME USING ERRCODE = 'restrict_violation';
END;
$$ LANGUAGE plpgsql;

CREATE TRIGGER ledger_entries_append_only BEFORE UPDATE OR DELETE ON ledger_entries
    FOR EACH ROW EXECUTE FUNCTION ledger_append_only();
CREATE TRIGGER ledger_transactions_append_only BEFORE UPDATE OR DELETE ON ledger_transactions
    FOR EACH ROW EXECUTE FUNCTION ledger_append_only();

-- A transaction's entries balance, checked once it commits (so its entries may be inserted in any
-- order within it).
CREATE FUNCTION ledger_transaction_balanced() RETURNS trigger AS $$
DECLARE
    total NUMERIC;
BEGIN
    SELECT sum(amount) INTO total FROM ledger_entries WHERE tx_id = NEW.tx_id;
    IF total <> 0 THEN
        RAISE EXCEPTION 'ledger transaction % does not balance (sum %)', NEW.tx_id, total
            USING ERRCODE = 'check_violation', CONSTRAINT = 'ledger_transaction_balanced';
    END IF;
    RETURN NULL;
END;
$$ LANGUAGE plpgsql;

CREATE CONSTRAINT TRIGGER ledger_transaction_balanced AFTER INSERT ON ledger_entries
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW EXECUTE FUNCTION ledger_transaction_balanced();

-- Held amounts follow holds: a new hold reserves, leaving 'held' gives back. A resolved hold is final.
CREATE FUNCTION ledger_hold_changed() RETURNS trigger AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        IF NEW.state <> 'held' THEN
            RAISE EXCEPTION 'a hold starts held' USING ERRCODE = 'check_violation';
        END IF;
        UPDATE ledger_accounts SET held = held + NEW.amount WHERE id = NEW.payer;
    ELSIF TG_OP = 'UPDATE' THEN
        IF OLD.state <> 'held' THEN
            RAISE EXCEPTION 'hold % is already %', OLD.id, OLD.state
                USING ERRCODE = 'check_violation', CONSTRAINT = 'ledger_holds_final';
        END IF;
        IF NEW.amount <> OLD.amount OR NEW.payer <> OLD.payer OR NEW.payee <> OLD.payee THEN
            RAISE EXCEPTION 'a hold''s parties and amount never change' USING ERRCODE = 'check_violation';
        END IF;
        IF NEW.state <> 'held' THEN
            UPDATE ledger_accounts SET held = held - OLD.amount WHERE id = OLD.payer;
        END IF;
    ELSE
        RAISE EXCEPTION 'holds are never deleted' USING ERRCODE = 'restrict_violation';
    END IF;
    RETURN NULL;
END;
$$ LANGUAGE plpgsql;

CREATE TRIGGER ledger_holds_track AFTER INSERT OR UPDATE OR DELETE ON ledger_holds
    FOR EACH ROW EXECUTE FUNCTION ledger_hold_changed();

-- Locks the accounts a movement will update, in id order, before anything else touches them. Two
-- reasons: payments in opposite directions cannot deadlock, and the foreign-key checks of the
-- entries find the row already locked by this transaction. Without it, a key-share lock taken by
-- the foreign-key check and the balance update that follows can meet another payer's update of
-- the same row in one multixact, which Postgres refuses ("new multixact has more than one
-- updating member", seen with 200 payers on one budget).
CREATE FUNCTION ledger_lock_accounts(a BIGINT, b BIGINT) RETURNS VOID AS $$
BEGIN
    PERFORM 1 FROM ledger_accounts WHERE id IN (a, b) ORDER BY id FOR NO KEY UPDATE;
END;
$$ LANGUAGE plpgsql;

-- Posts a two-legged transaction (payer -> payee) under an idempotency key, in one round trip.
-- A retry with the same key and the same parties and amount returns the first transaction and posts
-- nothing; the same key with anything else different is an error. The legs are written in account
-- order, so two payments in opposite directions lock the same rows in the same order.
CREATE FUNCTION ledger_transfer(
    p_key TEXT, p_kind TEXT, p_payer BIGINT, p_payee BIGINT, p_amount BIGINT, p_memo TEXT,
    p_refund_of BIGINT, p_settlement TEXT, p_chain_tx TEXT
) RETURNS TABLE (tx_id BIGINT, replayed BOOLEAN) AS $$
DECLARE
    new_id BIGINT;
    old_payer BIGINT;
    old_payee BIGINT;
    old_amount BIGINT;
BEGIN
    IF p_amount IS NULL OR p_amount <= 0 THEN
        RAISE EXCEPTION 'amount must be positive' USING ERRCODE = 'check_violation',
            CONSTRAINT = 'ledger_amount_positive';
    END IF;
    IF p_payer = p_payee THEN
        RAISE EXCEPTION 'payer and payee are the same account' USING ERRCODE = 'check_violation',
            CONSTRAINT = 'ledger_distinct_accounts';
    END IF;
    PERFORM ledger_lock_accounts(p_payer, p_payee);
    INSERT INTO ledger_transactions (idempotency_key, kind, memo, refund_of, settlement, chain_tx)
        VALUES (p_key, p_kind, p_memo, p_refund_of, p_settlement, p_chain_tx)
        ON CONFLICT (idempotency_key) DO NOTHING
        RETURNING id INTO new_id;
    IF new_id IS NULL THEN
        SELECT t.id INTO new_id FROM ledger_transactions t WHERE t.idempotency_key = p_key;
        SELECT max(e.account_id) FILTER (WHERE e.amount < 0),
               max(e.account_id) FILTER (WHERE e.amount > 0),
               max(e.amount) FILTER (WHERE e.amount > 0)
            INTO old_payer, old_payee, old_amount
            FROM ledger_entries e WHERE e.tx_id = new_id;
        IF old_payer IS DISTINCT FROM p_payer OR old_payee IS DISTINCT FROM p_payee
           OR old_amount IS DISTINCT FROM p_amount THEN
            RAISE EXCEPTION 'idempotency key % was used for a different transfer', p_key
                USING ERRCODE = 'unique_violation', CONSTRAINT = 'ledger_idempotency_conflict';
        END IF;
        RETURN QUERY SELECT new_id, true;
        RETURN;
    END IF;
    INSERT INTO ledger_entries (tx_id, account_id, amount)
        SELECT new_id, leg.account, leg.amount
        FROM (VALUES (p_payer, -p_amount), (p_payee, p_amount)) AS leg (account, amount)
        ORDER BY leg.account;
    RETURN QUERY SELECT new_id, false;
END;
$$ LANGUAGE plpgsql;

-- Captures an open hold: its money moves from payer to payee in a 'payment' transaction. Capturing
-- a captured hold again returns the same transaction; a released hold cannot be captured.
CREATE FUNCTION ledger_capture(p_hold BIGINT, p_chain_tx TEXT) RETURNS BIGINT AS $$
DECLARE
    h ledger_holds%ROWTYPE;
    new_id BIGINT;
BEGIN
    SELECT * INTO h FROM ledger_holds WHERE id = p_hold FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'no hold %', p_hold USING ERRCODE = 'no_data_found';
    END IF;
    IF h.state = 'captured' THEN
        RETURN h.capture_tx;
    END IF;
    IF h.state = 'released' THEN
        RAISE EXCEPTION 'hold % was released', p_hold
            USING ERRCODE = 'check_violation', CONSTRAINT = 'ledger_holds_final';
    END IF;
    PERFORM ledger_lock_accounts(h.payer, h.payee);
    INSERT INTO ledger_transactions (idempotency_key, kind, memo, settlement, chain_tx)
        VALUES ('capture/' || h.idempotency_key, 'payment', h.memo,
                CASE WHEN p_chain_tx IS NULL THEN 'simulated' ELSE 'chain' END, p_chain_tx)
        RETURNING id INTO new_id;
    -- The reservation goes first, so the balance never dips below what is still held.
    UPDATE ledger_holds
        SET state = 'captured', capture_tx = new_id, resolved_at = now(),
            chain_tx = coalesce(p_chain_tx, chain_tx)
        WHERE id = p_hold;
    INSERT INTO ledger_entries (tx_id, account_id, amount)
        SELECT new_id, leg.account, leg.amount
        FROM (VALUES (h.payer, -h.amount), (h.payee, h.amount)) AS leg (account, amount)
        ORDER BY leg.account;
    RETURN new_id;
END;
$$ LANGUAGE plpgsql;

-- Releases an open hold: nothing moves. Releasing a released hold is a no-op (false); a captured
-- hold cannot be released (refund its payment instead).
CREATE FUNCTION ledger_release(p_hold BIGINT, p_reason TEXT) RETURNS BOOLEAN AS $$
DECLARE
    h ledger_holds%ROWTYPE;
BEGIN
    SELECT * INTO h FROM ledger_holds WHERE id = p_hold FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'no hold %', p_hold USING ERRCODE = 'no_data_found';
    END IF;
    IF h.state = 'released' THEN
        RETURN false;
    END IF;
    IF h.state = 'captured' THEN
        RAISE EXCEPTION 'hold % was captured', p_hold
            USING ERRCODE = 'check_violation', CONSTRAINT = 'ledger_holds_final';
    END IF;
    PERFORM ledger_lock_accounts(h.payer, h.payer);
    UPDATE ledger_holds SET state = 'released', release_reason = p_reason, resolved_at = now()
        WHERE id = p_hold;
    RETURN true;
END;
$$ LANGUAGE plpgsql;

-- Opens a hold under an idempotency key, in one round trip. A retry returns the first hold (whatever
-- its state now); the same key for different parties or amount is an error.
CREATE FUNCTION ledger_hold(
    p_key TEXT, p_payer BIGINT, p_payee BIGINT, p_amount BIGINT, p_memo TEXT, p_settlement TEXT,
    p_owner BIGINT
) RETURNS TABLE (hold_id BIGINT, hold_state TEXT, replayed BOOLEAN) AS $$
DECLARE
    h ledger_holds%ROWTYPE;
BEGIN
    PERFORM ledger_lock_accounts(p_payer, p_payer);
    INSERT INTO ledger_holds (idempotency_key, payer, payee, amount, memo, settlement, owner)
        VALUES (p_key, p_payer, p_payee, p_amount, p_memo, p_settlement, p_owner)
        ON CONFLICT (idempotency_key) DO NOTHING
        RETURNING * INTO h;
    IF h.id IS NOT NULL THEN
        RETURN QUERY SELECT h.id, h.state, false;
        RETURN;
    END IF;
    SELECT * INTO h FROM ledger_holds WHERE idempotency_key = p_key;
    IF h.payer <> p_payer OR h.payee <> p_payee OR h.amount <> p_amount THEN
        RAISE EXCEPTION 'idempotency key % was used for a different hold', p_key
            USING ERRCODE = 'unique_violation', CONSTRAINT = 'ledger_idempotency_conflict';
    END IF;
    RETURN QUERY SELECT h.id, h.state, true;
END;
$$ LANGUAGE plpgsql;
