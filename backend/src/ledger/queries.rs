//! What the ledger's routes, the marketplace and settlement read from (and the few things they
//! write to) the ledger's tables, so that no SQL on `ledger_*` tables lives outside this module.
//! Each function runs the statement its caller used to run, on the pool or connection given, and
//! returns plain rows.
//!
//! Most return `sqlx::Error` rather than [`LedgerError`], so callers map database failures exactly
//! as they did when the SQL was theirs.

use lachesis_shared::ledger::{AccountBalance, MicroUsdc, StatementLine};
use lachesis_shared::marketplace::BudgetPoint;
use sqlx::{PgConnection, PgPool};

use super::{AccountId, BalanceRow, HoldState, Ledger, LedgerError};

/// The accounts of `teams` (every account when `None`), by name.
pub async fn team_balances(
    db: &PgPool,
    teams: Option<&[i64]>,
) -> Result<Vec<AccountBalance>, LedgerError> {
    sqlx::query_as!(
        BalanceRow,
        "SELECT name, kind, balance, held FROM ledger_accounts
         WHERE $1::BIGINT[] IS NULL OR team_id = ANY($1) ORDER BY name",
        teams
    )
    .fetch_all(db)
    .await?
    .into_iter()
    .map(AccountBalance::try_from)
    .collect()
}

/// The account named `name` when it belongs to one of `teams` (to any team, or none, when `None`).
pub async fn team_account(
    db: &PgPool,
    name: &str,
    teams: Option<&[i64]>,
) -> Result<Option<AccountId>, sqlx::Error> {
    let id: Option<i64> = sqlx::query_scalar(
        "SELECT id FROM ledger_accounts WHERE name = $1 AND ($2::BIGINT[] IS NULL OR team_id = ANY($2))",
    )
    .bind(name)
    .bind(teams)
    .fetch_optional(db)
    .await?;
    Ok(id.map(AccountId))
}

/// The newest 200 lines of `account`'s statement, before transaction `before`; newest first.
pub async fn statement_lines(
    db: &PgPool,
    account: AccountId,
    before: Option<i64>,
) -> Result<Vec<StatementLine>, sqlx::Error> {
    // `to_char` of a NOT NULL timestamp is never NULL; inference cannot tell.
    let rows = sqlx::query!(
        r#"SELECT t.id, t.kind, t.memo, t.chain_tx, e.amount,
                  to_char(t.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS "at!",
                  (SELECT a.name FROM ledger_entries o JOIN ledger_accounts a ON a.id = o.account_id
                   WHERE o.tx_id = t.id AND o.account_id <> e.account_id LIMIT 1) AS counterparty
           FROM ledger_entries e JOIN ledger_transactions t ON t.id = e.tx_id
           WHERE e.account_id = $1 AND ($2::BIGINT IS NULL OR t.id < $2)
           ORDER BY t.id DESC LIMIT 200"#,
        account.0,
        before
    )
    .fetch_all(db)
    .await?;
    Ok(rows
        .into_iter()
        .map(|row| StatementLine {
            tx_id: row.id,
            kind: row.kind,
            memo: row.memo,
            amount: MicroUsdc(row.amount),
            counterparty: row.counterparty.unwrap_or_default(),
            chain_tx: row.chain_tx,
            at: row.at,
        })
        .collect())
}

/// A ledger account's name and on-chain wallet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccountWallet {
    pub id: AccountId,
    pub name: String,
    /// The wallet as stored (lowercase hex), `None` when the account has none.
    pub wallet: Option<String>,
}

/// The accounts among `ids` with their names and wallets, in no particular order; ids with no
/// account are left out. Settlement needs the wallets to move money on chain, the marketplace to
/// know which cards a chain settler can pay.
pub async fn account_wallets(
    db: &PgPool,
    ids: &[AccountId],
) -> Result<Vec<AccountWallet>, sqlx::Error> {
    let ids: Vec<i64> = ids.iter().map(|id| id.0).collect();
    let rows = sqlx::query!(
        "SELECT id, name, wallet FROM ledger_accounts WHERE id = ANY($1)",
        &ids
    )
    .fetch_all(db)
    .await?;
    Ok(rows
        .into_iter()
        .map(|row| AccountWallet {
            id: AccountId(row.id),
            name: row.name,
            wallet: row.wallet,
        })
        .collect())
}

/// Sets the wallet of the account named `name` (a no-op when there is none): how a dev chain gives
/// the platform's cards somewhere to be paid.
pub async fn set_wallet(db: &PgPool, name: &str, wallet: &str) -> Result<(), sqlx::Error> {
    sqlx::query("UPDATE ledger_accounts SET wallet = $1 WHERE name = $2")
        .bind(wallet)
        .bind(name)
        .execute(db)
        .await?;
    Ok(())
}

/// Creates the `card_owner` account `name` on the caller's connection, so it commits or rolls
/// back with the caller's transaction (a card and its account exist together or not at all).
/// Returns `None` when an account of that name exists already: unlike [`Ledger::account`] it never
/// reuses one.
pub async fn create_card_owner_account(
    connection: &mut PgConnection,
    name: &str,
    team: i64,
    wallet: Option<&str>,
) -> Result<Option<AccountId>, sqlx::Error> {
    let id: Option<i64> = sqlx::query_scalar(
        "INSERT INTO ledger_accounts (name, kind, team_id, wallet) VALUES ($1, 'card_owner', $2, $3)
         ON CONFLICT (name) DO NOTHING RETURNING id",
    )
    .bind(name)
    .bind(team)
    .bind(wallet)
    .fetch_optional(connection)
    .await?;
    Ok(id.map(AccountId))
}

/// The budget accounts named `name` (all of them when `None`) that belong to the platform or, when
/// `teams` is given, to one of those teams; `teams: None` means any team. Ordered by id. This is
/// what the marketplace shows of budgets to a viewer.
pub async fn budget_accounts(
    db: &PgPool,
    name: Option<&str>,
    teams: Option<Vec<i64>>,
) -> Result<Vec<(AccountId, String)>, sqlx::Error> {
    let rows = sqlx::query!(
        "SELECT id, name FROM ledger_accounts
         WHERE kind = 'budget' AND ($1::TEXT IS NULL OR name = $1)
           AND (team_id IS NULL OR $2::BIGINT[] IS NULL OR team_id = ANY($2))
         ORDER BY id",
        name,
        teams.as_deref()
    )
    .fetch_all(db)
    .await?;
    Ok(rows
        .into_iter()
        .map(|row| (AccountId(row.id), row.name))
        .collect())
}

/// A budget's totals: its balance and holds, and what was ever paid into it (`funded`) and out of
/// it (`spent`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BudgetTotals {
    pub balance: MicroUsdc,
    pub held: MicroUsdc,
    pub funded: MicroUsdc,
    pub spent: MicroUsdc,
}

/// The totals of `account`; `RowNotFound` when there is no such account.
pub async fn budget_totals(db: &PgPool, account: AccountId) -> Result<BudgetTotals, sqlx::Error> {
    // A coalesce is never NULL; inference cannot tell.
    let row = sqlx::query!(
        r#"SELECT a.balance, a.held,
                  coalesce(sum(e.amount) FILTER (WHERE e.amount > 0), 0)::BIGINT AS "funded!",
                  coalesce(-sum(e.amount) FILTER (WHERE e.amount < 0), 0)::BIGINT AS "spent!"
           FROM ledger_accounts a LEFT JOIN ledger_entries e ON e.account_id = a.id
           WHERE a.id = $1 GROUP BY a.id"#,
        account.0
    )
    .fetch_one(db)
    .await?;
    Ok(BudgetTotals {
        balance: MicroUsdc(row.balance),
        held: MicroUsdc(row.held),
        funded: MicroUsdc(row.funded),
        spent: MicroUsdc(row.spent),
    })
}

/// The running balance of `account` after each of its transactions, the newest `limit` of them,
/// oldest first: the budget's history as the marketplace charts it.
pub async fn budget_history(
    db: &PgPool,
    account: AccountId,
    limit: i64,
) -> Result<Vec<BudgetPoint>, sqlx::Error> {
    // `to_char` of a NOT NULL timestamp is never NULL, nor is a running sum that includes the
    // row's own NOT NULL amount; inference cannot tell.
    let rows = sqlx::query!(
        r#"SELECT at AS "at!", available AS "available!" FROM (
               SELECT e.tx_id,
                      to_char(t.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS at,
                      (sum(e.amount) OVER (ORDER BY e.tx_id))::BIGINT AS available
               FROM ledger_entries e JOIN ledger_transactions t ON t.id = e.tx_id
               WHERE e.account_id = $1) h
           ORDER BY tx_id DESC LIMIT $2"#,
        account.0,
        limit
    )
    .fetch_all(db)
    .await?;
    let mut points: Vec<BudgetPoint> = rows
        .into_iter()
        .map(|row| BudgetPoint {
            at: row.at,
            available: MicroUsdc(row.available),
        })
        .collect();
    points.reverse();
    Ok(points)
}

/// The accounts credited by transactions whose idempotency key is `key/...`: the cards a round
/// paid under `key`, which a replay of the round must hear again. One id per credit.
pub async fn paid_under_key(db: &PgPool, key: &str) -> Result<Vec<AccountId>, sqlx::Error> {
    let accounts: Vec<i64> = sqlx::query_scalar(
        "SELECT e.account_id FROM ledger_transactions t JOIN ledger_entries e ON e.tx_id = t.id
         WHERE left(t.idempotency_key, length($1) + 1) = $1 || '/' AND e.amount > 0",
    )
    .bind(key)
    .fetch_all(db)
    .await?;
    Ok(accounts.into_iter().map(AccountId).collect())
}

/// One entry of a chain-settled transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChainLeg {
    pub tx_id: i64,
    /// The transfer's hash, as recorded.
    pub chain_tx: Option<String>,
    /// Signed: negative for the payer's entry.
    pub amount: i64,
    /// The account's wallet.
    pub wallet: Option<String>,
}

/// Every entry of every chain-settled transaction, by transaction then amount (the debit first):
/// what the chain reconciliation checks against the receipts.
pub async fn chain_legs(db: &PgPool) -> Result<Vec<ChainLeg>, sqlx::Error> {
    sqlx::query_as!(
        ChainLeg,
        "SELECT t.id AS tx_id, t.chain_tx, e.amount, a.wallet FROM ledger_transactions t
         JOIN ledger_entries e ON e.tx_id = t.id JOIN ledger_accounts a ON a.id = e.account_id
         WHERE t.settlement = 'chain' ORDER BY t.id, e.amount"
    )
    .fetch_all(db)
    .await
}

/// A chain hold whose transfer was submitted but that was never captured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubmittedChainHold {
    pub id: i64,
    /// `held` or `released`.
    pub state: String,
    /// The submitted transfer's hash.
    pub chain_tx: Option<String>,
    pub amount: i64,
    pub payer_wallet: Option<String>,
    pub payee_wallet: Option<String>,
}

/// The chain holds, held or released, that have a submitted transfer, by id: the chain
/// reconciliation looks up what became of each transfer.
pub async fn submitted_chain_holds(db: &PgPool) -> Result<Vec<SubmittedChainHold>, sqlx::Error> {
    sqlx::query_as!(
        SubmittedChainHold,
        "SELECT h.id, h.state, h.chain_tx, h.amount, pa.wallet AS payer_wallet,
                pe.wallet AS payee_wallet
         FROM ledger_holds h
         JOIN ledger_accounts pa ON pa.id = h.payer JOIN ledger_accounts pe ON pe.id = h.payee
         WHERE h.settlement = 'chain' AND h.state IN ('held', 'released') AND h.chain_tx IS NOT NULL
         ORDER BY h.id"
    )
    .fetch_all(db)
    .await
}

/// A hold's row, as settlement reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HoldRecord {
    pub state: HoldState,
    pub chain_tx: Option<String>,
    pub capture_tx: Option<i64>,
    pub release_reason: Option<String>,
    pub on_chain: bool,
    pub amount: i64,
}

impl Ledger {
    /// Hold `hold` as it stands now (state, submitted transfer, capture, amount): what settlement
    /// reads to finish or replay a payment. `UnknownHold` when there is no such hold.
    pub async fn hold_record(&self, hold: i64) -> Result<HoldRecord, LedgerError> {
        let row = sqlx::query!(
            "SELECT state, chain_tx, capture_tx, release_reason, settlement, amount
             FROM ledger_holds WHERE id = $1",
            hold
        )
        .fetch_optional(self.pool())
        .await?
        .ok_or(LedgerError::UnknownHold(hold))?;
        let state = match row.state.as_str() {
            "captured" => HoldState::Captured,
            "released" => HoldState::Released,
            _ => HoldState::Held,
        };
        Ok(HoldRecord {
            state,
            chain_tx: row.chain_tx,
            capture_tx: row.capture_tx,
            release_reason: row.release_reason,
            on_chain: row.settlement == "chain",
            amount: row.amount,
        })
    }
}
