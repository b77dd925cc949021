-- On-chain settlement (backend/src/settlement): what was signed and sent for a ledger hold, written
-- BEFORE it goes to the chain, so a crash or an RPC outage at any point leaves enough to find out
-- what became of it (and to finish it exactly once) instead of guessing.

-- EIP-3009 `transferWithAuthorization`: signed by the payer, submitted by the platform. The nonce
-- is the contract's replay protection; its uniqueness here refuses a replay before it costs gas.
CREATE TABLE chain_authorizations (
    id           BIGSERIAL PRIMARY KEY,
    chain_id     BIGINT NOT NULL,
    token        TEXT NOT NULL,
    nonce        TEXT NOT NULL,
    hold_id      BIGINT NOT NULL UNIQUE REFERENCES ledger_holds (id),
    from_wallet  TEXT NOT NULL,
    to_wallet    TEXT NOT NULL,
    value        NUMERIC(78, 0) NOT NULL,
    valid_after  BIGINT NOT NULL,
    valid_before BIGINT NOT NULL,
    -- 65 bytes r || s || v, hex: the authorization can be resubmitted (the contract runs it once).
    signature    TEXT NOT NULL,
    -- signed -> submitted -> confirmed | failed
    state        TEXT NOT NULL DEFAULT 'signed',
    -- Every platform transaction that carried it, newest last.
    tx_hashes    TEXT[] NOT NULL DEFAULT '{}',
    error        TEXT,
    created_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
    CONSTRAINT chain_authorizations_nonce_unique UNIQUE (chain_id, token, from_wallet, nonce),
    CONSTRAINT chain_authorizations_nonce_format CHECK (nonce ~ '^0x[0-9a-f]{64}$'),
    CONSTRAINT chain_authorizations_wallets CHECK (
        from_wallet ~ '^0x[0-9a-f]{40}$' AND to_wallet ~ '^0x[0-9a-f]{40}$'),
    CONSTRAINT chain_authorizations_value_positive CHECK (value > 0),
    CONSTRAINT chain_authorizations_state_known
        CHECK (state IN ('signed', 'submitted', 'confirmed', 'failed'))
);

-- A plain ERC-20 `transfer` signed by the payer's wallet: the raw transaction is kept, so it can be
-- rebroadcast unchanged (same nonce, same hash: mined at most once) or proven dead (its nonce used
-- by another transaction).
CREATE TABLE chain_transfers (
    hold_id    BIGINT PRIMARY KEY REFERENCES ledger_holds (id),
    chain_id   BIGINT NOT NULL,
    sender     TEXT NOT NULL,
    nonce      BIGINT NOT NULL,
    tx_hash    TEXT NOT NULL UNIQUE,
    raw_tx     TEXT NOT NULL,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    CONSTRAINT chain_transfers_sender_format CHECK (sender ~ '^0x[0-9a-f]{40}$')
);

-- A wallet's token balance at a block, taken before the platform first moved money for it on chain:
-- `lachesis ledger reconcile --rpc-url` checks that the balance's change since that block equals
-- the chain-settled ledger entries whose transfers were mined after it.
CREATE TABLE chain_wallet_baselines (
    chain_id     BIGINT NOT NULL,
    token        TEXT NOT NULL,
    wallet       TEXT NOT NULL,
    block_number BIGINT NOT NULL,
    balance      NUMERIC(78, 0) NOT NULL,
    recorded_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (chain_id, token, wallet)
);
