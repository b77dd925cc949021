//! The USDC ledger: double-entry accounts in Postgres, payments with idempotency keys, holds that
//! are captured or released, refunds. The invariants live in the schema
//! (`migrations/20261201000010_ledger.sql`); this module calls its functions and turns their
//! refusals into [`LedgerError`]s. `reconcile` re-checks every invariant from the raw rows.

pub mod annotators;
pub mod bench;
pub mod cli;
mod owner;
pub mod queries;
pub mod reconcile;
pub mod routes;

use std::sync::Arc;

use lachesis_shared::ledger::{AccountBalance, AccountKind, MicroUsdc};
use owner::OwnerLock;
use sqlx::PgPool;

/// Why the ledger refused. Nothing was written when one of these comes back.
#[derive(Debug, thiserror::Error)]
pub enum LedgerError {
    #[error("insufficient funds: the payer's available balance does not cover {amount} USDC")]
    InsufficientFunds { amount: MicroUsdc },
    #[error("idempotency key {0:?} was already used for a different payment")]
    IdempotencyConflict(String),
    #[error("amounts must be positive (got {0} micro-USDC)")]
    InvalidAmount(i64),
    #[error("payer and payee are the same account")]
    SameAccount,
    #[error("no such ledger account: {0}")]
    UnknownAccount(String),
    #[error("no such hold: {0}")]
    UnknownHold(i64),
    #[error("hold {0} is already resolved the other way")]
    HoldResolved(i64),
    #[error("invalid account: {0}")]
    InvalidAccount(String),
    #[error("transaction {0} cannot be refunded: {1}")]
    NotRefundable(i64, &'static str),
    #[error(
        "this process lost its ledger owner lock (its database connection dropped); it settles \
         nothing on chain until it holds the lock again"
    )]
    OwnerLost,
    #[error("database: {0}")]
    Db(sqlx::Error),
}

impl From<sqlx::Error> for LedgerError {
    fn from(error: sqlx::Error) -> Self {
        LedgerError::Db(error)
    }
}

/// Maps what Postgres refused to the ledger's vocabulary; anything else stays a database error.
fn classify(error: sqlx::Error, amount: i64, context: &str) -> LedgerError {
    if let sqlx::Error::Database(db) = &error {
        match (db.constraint(), db.code().as_deref()) {
            (Some("ledger_accounts_available_nonnegative"), _) => {
                return LedgerError::InsufficientFunds {
                    amount: MicroUsdc(amount),
                };
            }
            (Some("ledger_idempotency_conflict"), _) => {
                return LedgerError::IdempotencyConflict(context.to_string());
            }
            (Some("ledger_amount_positive" | "ledger_holds_amount_positive"), _) => {
                return LedgerError::InvalidAmount(amount);
            }
            (Some("ledger_distinct_accounts" | "ledger_holds_distinct_accounts"), _) => {
                return LedgerError::SameAccount;
            }
            (
                Some(
                    "ledger_accounts_name_format"
                    | "ledger_accounts_wallet_format"
                    | "ledger_accounts_kind_known",
                ),
                _,
            ) => return LedgerError::InvalidAccount(context.to_string()),
            (_, Some("23503")) => return LedgerError::UnknownAccount(context.to_string()),
            _ => {}
        }
    }
    LedgerError::Db(error)
}

/// A ledger account's id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AccountId(pub i64);

/// A posted transaction; `replayed` when the idempotency key had already posted it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Posted {
    pub tx_id: i64,
    pub replayed: bool,
}

/// An open (or, on a replay, already resolved) hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hold {
    pub id: i64,
    pub state: HoldState,
    pub replayed: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HoldState {
    Held,
    Captured,
    Released,
}

impl HoldState {
    fn parse(text: &str) -> Result<Self, LedgerError> {
        match text {
            "held" => Ok(HoldState::Held),
            "captured" => Ok(HoldState::Captured),
            "released" => Ok(HoldState::Released),
            other => Err(LedgerError::Db(sqlx::Error::Protocol(format!(
                "unknown hold state {other:?}"
            )))),
        }
    }
}

/// How a payment settles: in the ledger only, or as a chain transfer whose hash is recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Settlement {
    Simulated,
    Chain { tx_hash: String },
}

/// A transfer between two accounts.
#[derive(Debug, Clone)]
pub struct Transfer<'a> {
    pub key: &'a str,
    pub payer: AccountId,
    pub payee: AccountId,
    pub amount: MicroUsdc,
    pub memo: &'a str,
}

/// The ledger over a pool. Cheap to clone.
#[derive(Clone)]
pub struct Ledger {
    db: PgPool,
    /// This process's owner key and the connection holding its advisory lock (see
    /// [`Ledger::with_owner`]); `None` for short-lived tools that never leave holds open.
    owner: Option<Arc<OwnerLock>>,
}

/// Holds of no known owner (written by a tool without one) count as abandoned after this long.
const UNOWNED_HOLD_GRACE: &str = "5 minutes";

/// The account every deposit comes from (and withdrawal goes to).
pub const EXTERNAL_ACCOUNT: &str = "external/usdc";

impl Ledger {
    pub fn new(db: PgPool) -> Self {
        Self { db, owner: None }
    }

    /// A ledger whose holds are marked as this process's: a session advisory lock on a random key
    /// lives on a connection of its own until the process ends, so [`Ledger::recover`] in another
    /// process leaves this one's holds in flight alone and releases those of dead processes.
    pub async fn with_owner(db: PgPool) -> Result<Self, LedgerError> {
        let mut connection = db.acquire().await?.detach();
        let key = loop {
            let key: i64 = rand::random::<i64>() & i64::MAX;
            let locked: bool = sqlx::query_scalar("SELECT pg_try_advisory_lock($1)")
                .bind(key)
                .fetch_one(&mut connection)
                .await?;
            if locked {
                break key;
            }
        };
        Ok(Self {
            db,
            owner: Some(Arc::new(OwnerLock::new(key, connection))),
        })
    }

    pub fn pool(&self) -> &PgPool {
        &self.db
    }

    /// The account named `name`, created with `kind` (and owner team, wallet) if it is new.
    pub async fn account(
        &self,
        name: &str,
        kind: AccountKind,
        team: Option<i64>,
        wallet: Option<&str>,
    ) -> Result<AccountId, LedgerError> {
        // When another transaction inserts the same name at the same moment, the INSERT waits for
        // it and does nothing, while the SELECT reads the snapshot from before it committed: no
        // row. A second try's snapshot holds that row. (`DO UPDATE` would return it at once, but
        // would write and lock the row on every call, and the external account is on every
        // deposit.)
        let mut tries = 0;
        let row = loop {
            let found = sqlx::query!(
                r#"WITH new AS (
                     INSERT INTO ledger_accounts (name, kind, team_id, wallet)
                     VALUES ($1, $2, $3, $4)
                     ON CONFLICT (name) DO NOTHING RETURNING id, kind)
                 SELECT id AS "id!", kind AS "kind!" FROM new
                 UNION ALL SELECT id, kind FROM ledger_accounts WHERE name = $1
                 LIMIT 1"#,
                name,
                kind.as_str(),
                team,
                wallet.map(str::to_ascii_lowercase)
            )
            .fetch_optional(&self.db)
            .await
            .map_err(|e| classify(e, 0, name))?;
            tries += 1;
            match found {
                Some(row) => break row,
                // Only a concurrent insert that committed hides the row; a third miss cannot be
                // that, so it is reported rather than looped on.
                None if tries < 3 => continue,
                None => return Err(LedgerError::UnknownAccount(name.to_string())),
            }
        };
        if row.kind != kind.as_str() {
            return Err(LedgerError::InvalidAccount(format!(
                "{name} exists as a {} account",
                row.kind
            )));
        }
        Ok(AccountId(row.id))
    }

    /// The id of an existing account.
    pub async fn find(&self, name: &str) -> Result<AccountId, LedgerError> {
        sqlx::query_scalar::<_, i64>("SELECT id FROM ledger_accounts WHERE name = $1")
            .bind(name)
            .fetch_optional(&self.db)
            .await?
            .map(AccountId)
            .ok_or_else(|| LedgerError::UnknownAccount(name.to_string()))
    }

    /// Deposits into `account` from the external account (a budget's allowance, an on-chain
    /// deposit seen by the platform).
    pub async fn fund(
        &self,
        key: &str,
        account: AccountId,
        amount: MicroUsdc,
    ) -> Result<Posted, LedgerError> {
        let external = self
            .account(EXTERNAL_ACCOUNT, AccountKind::External, None, None)
            .await?;
        self.post(
            "fund",
            None,
            &Settlement::Simulated,
            &Transfer {
                key,
                payer: external,
                payee: account,
                amount,
                memo: "deposit",
            },
        )
        .await
    }

    /// A payment settled at once (simulated, or on chain with a transfer already confirmed).
    pub async fn pay(
        &self,
        transfer: &Transfer<'_>,
        settlement: &Settlement,
    ) -> Result<Posted, LedgerError> {
        self.post("payment", None, settlement, transfer).await
    }

    /// Reverses a payment in full, under its own idempotency key; a payment is refunded once.
    pub async fn refund(&self, key: &str, payment_tx: i64) -> Result<Posted, LedgerError> {
        let legs = sqlx::query!(
            "SELECT t.kind, e.account_id, e.amount FROM ledger_transactions t
             JOIN ledger_entries e ON e.tx_id = t.id WHERE t.id = $1",
            payment_tx
        )
        .fetch_all(&self.db)
        .await?;
        if legs.is_empty() {
            return Err(LedgerError::NotRefundable(
                payment_tx,
                "no such transaction",
            ));
        }
        if legs[0].kind != "payment" || legs.len() != 2 {
            return Err(LedgerError::NotRefundable(
                payment_tx,
                "only payments are refunded",
            ));
        }
        let (mut payer, mut payee, mut amount) = (None, None, 0);
        for leg in &legs {
            let (account, value) = (AccountId(leg.account_id), leg.amount);
            if value < 0 {
                payer = Some(account);
            } else {
                payee = Some(account);
                amount = value;
            }
        }
        let (Some(payer), Some(payee)) = (payer, payee) else {
            return Err(LedgerError::NotRefundable(payment_tx, "unbalanced legs"));
        };
        // The refund runs the other way: the payee gives the amount back.
        let posted = self
            .post(
                "refund",
                Some(payment_tx),
                &Settlement::Simulated,
                &Transfer {
                    key,
                    payer: payee,
                    payee: payer,
                    amount: MicroUsdc(amount),
                    memo: "refund",
                },
            )
            .await;
        match posted {
            Err(LedgerError::Db(sqlx::Error::Database(db)))
                if db.constraint() == Some("ledger_transactions_refund_of_key") =>
            {
                Err(LedgerError::NotRefundable(payment_tx, "already refunded"))
            }
            other => other,
        }
    }

    async fn post(
        &self,
        kind: &str,
        refund_of: Option<i64>,
        settlement: &Settlement,
        transfer: &Transfer<'_>,
    ) -> Result<Posted, LedgerError> {
        let (settlement, chain_tx) = match settlement {
            Settlement::Simulated => ("simulated", None),
            Settlement::Chain { tx_hash } => ("chain", Some(tx_hash.as_str())),
        };
        let row = sqlx::query!(
            r#"SELECT tx_id AS "tx_id!", replayed AS "replayed!"
               FROM ledger_transfer($1, $2, $3, $4, $5, $6, $7, $8, $9)"#,
            transfer.key,
            kind,
            transfer.payer.0,
            transfer.payee.0,
            transfer.amount.0,
            transfer.memo,
            refund_of,
            settlement,
            chain_tx
        )
        .fetch_one(&self.db)
        .await
        .map_err(|e| classify(e, transfer.amount.0, transfer.key))?;
        Ok(Posted {
            tx_id: row.tx_id,
            replayed: row.replayed,
        })
    }

    /// Reserves the payment's amount on the payer until [`Ledger::capture`] or
    /// [`Ledger::release`]. Fails with `InsufficientFunds` when it does not fit.
    pub async fn hold(&self, transfer: &Transfer<'_>, on_chain: bool) -> Result<Hold, LedgerError> {
        if on_chain
            && let Some(owner) = &self.owner
            && !owner.is_held()
            && !self.check_owner().await
        {
            return Err(LedgerError::OwnerLost);
        }
        let row = sqlx::query!(
            r#"SELECT hold_id AS "hold_id!", hold_state AS "hold_state!", replayed AS "replayed!"
               FROM ledger_hold($1, $2, $3, $4, $5, $6, $7)"#,
            transfer.key,
            transfer.payer.0,
            transfer.payee.0,
            transfer.amount.0,
            transfer.memo,
            if on_chain { "chain" } else { "simulated" },
            self.owner.as_ref().map(|owner| owner.key)
        )
        .fetch_one(&self.db)
        .await
        .map_err(|e| classify(e, transfer.amount.0, transfer.key))?;
        Ok(Hold {
            id: row.hold_id,
            state: HoldState::parse(&row.hold_state)?,
            replayed: row.replayed,
        })
    }

    /// Records the chain transfer submitted for a hold, before waiting for its receipt, so a
    /// restart can ask the chain what became of it.
    pub async fn note_submitted(&self, hold: i64, tx_hash: &str) -> Result<(), LedgerError> {
        // Exactly one row: a hold another process released (or captured) meanwhile must not be
        // paid on chain, so the caller sends nothing on this error.
        let updated =
            sqlx::query("UPDATE ledger_holds SET chain_tx = $2 WHERE id = $1 AND state = 'held'")
                .bind(hold)
                .bind(tx_hash)
                .execute(&self.db)
                .await?
                .rows_affected();
        if updated == 1 {
            Ok(())
        } else {
            Err(LedgerError::HoldResolved(hold))
        }
    }

    /// Moves a held amount to the payee; capturing twice returns the same transaction.
    pub async fn capture(&self, hold: i64, chain_tx: Option<&str>) -> Result<i64, LedgerError> {
        sqlx::query_scalar::<_, i64>("SELECT ledger_capture($1, $2)")
            .bind(hold)
            .bind(chain_tx)
            .fetch_one(&self.db)
            .await
            .map_err(|e| hold_error(e, hold))
    }

    /// Gives a held amount back; `false` when it was already released.
    pub async fn release(&self, hold: i64, reason: &str) -> Result<bool, LedgerError> {
        sqlx::query_scalar::<_, bool>("SELECT ledger_release($1, $2)")
            .bind(hold)
            .bind(reason)
            .fetch_one(&self.db)
            .await
            .map_err(|e| hold_error(e, hold))
    }

    /// Open holds whose settling process is gone, oldest first: what a restart must resolve. An
    /// owner is gone when its advisory lock is free (taking it, for a moment, proves so).
    pub async fn abandoned_holds(&self) -> Result<Vec<OpenHold>, LedgerError> {
        let mut connection = self.db.acquire().await?;
        let rows = sqlx::query!(
            r#"SELECT id, settlement, chain_tx, owner,
                      created_at < now() - $1::text::interval AS "past_grace!"
               FROM ledger_holds WHERE state = 'held' ORDER BY id"#,
            UNOWNED_HOLD_GRACE
        )
        .fetch_all(&mut *connection)
        .await?;
        let mut alive = std::collections::HashMap::new();
        let mut abandoned = Vec::new();
        for row in rows {
            let gone = match row.owner {
                None => row.past_grace,
                Some(key) if self.owner.as_ref().is_some_and(|mine| mine.key == key) => false,
                Some(key) => match alive.get(&key) {
                    Some(alive) => !alive,
                    None => {
                        let free: bool = sqlx::query_scalar("SELECT pg_try_advisory_lock($1)")
                            .bind(key)
                            .fetch_one(&mut *connection)
                            .await?;
                        if free {
                            sqlx::query("SELECT pg_advisory_unlock($1)")
                                .bind(key)
                                .execute(&mut *connection)
                                .await?;
                        }
                        alive.insert(key, !free);
                        free
                    }
                },
            };
            if gone {
                abandoned.push(OpenHold {
                    id: row.id,
                    on_chain: row.settlement == "chain",
                    chain_tx: row.chain_tx,
                });
            }
        }
        Ok(abandoned)
    }

    /// Resolves what a crash left between hold and capture (holds of processes that are gone). A
    /// simulated hold never moved money, so it is released; a chain hold without a submitted transfer likewise. Chain holds with a
    /// submitted transfer are returned for the settlement layer to settle from the receipt.
    pub async fn recover(&self) -> Result<Recovery, LedgerError> {
        let mut recovery = Recovery::default();
        for hold in self.abandoned_holds().await? {
            if hold.on_chain && hold.chain_tx.is_some() {
                recovery.awaiting_chain.push(hold);
            } else if self.release(hold.id, "recovered after a restart").await? {
                recovery.released += 1;
            }
        }
        Ok(recovery)
    }

    pub async fn balance(&self, account: AccountId) -> Result<AccountBalance, LedgerError> {
        sqlx::query_as!(
            BalanceRow,
            "SELECT name, kind, balance, held FROM ledger_accounts WHERE id = $1",
            account.0
        )
        .fetch_optional(&self.db)
        .await?
        .ok_or_else(|| LedgerError::UnknownAccount(format!("#{}", account.0)))?
        .try_into()
    }

    /// Every account, by name.
    pub async fn balances(&self) -> Result<Vec<AccountBalance>, LedgerError> {
        sqlx::query_as!(
            BalanceRow,
            "SELECT name, kind, balance, held FROM ledger_accounts ORDER BY name"
        )
        .fetch_all(&self.db)
        .await?
        .into_iter()
        .map(AccountBalance::try_from)
        .collect()
    }
}

/// An account's balance as stored.
pub(crate) struct BalanceRow {
    pub name: String,
    pub kind: String,
    pub balance: i64,
    pub held: i64,
}

impl TryFrom<BalanceRow> for AccountBalance {
    type Error = LedgerError;

    fn try_from(row: BalanceRow) -> Result<Self, LedgerError> {
        Ok(AccountBalance {
            kind: AccountKind::parse(&row.kind)
                .ok_or_else(|| LedgerError::InvalidAccount(format!("unknown kind {}", row.kind)))?,
            name: row.name,
            balance: MicroUsdc(row.balance),
            held: MicroUsdc(row.held),
            available: MicroUsdc(row.balance - row.held),
        })
    }
}

fn hold_error(error: sqlx::Error, hold: i64) -> LedgerError {
    if let sqlx::Error::Database(db) = &error {
        if db.constraint() == Some("ledger_holds_final") {
            return LedgerError::HoldResolved(hold);
        }
        if db.code().as_deref() == Some("P0002") {
            return LedgerError::UnknownHold(hold);
        }
    }
    LedgerError::Db(error)
}

/// A hold still open.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenHold {
    pub id: i64,
    pub on_chain: bool,
    pub chain_tx: Option<String>,
}

/// What [`Ledger::recover`] did.
#[derive(Debug, Default)]
pub struct Recovery {
    pub released: usize,
    pub awaiting_chain: Vec<OpenHold>,
}
