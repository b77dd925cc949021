//! Annotators' accounts: one per person, created the first time a verdict of theirs is paid, and
//! what it has earned. The schema ties the account to its user (`ledger_accounts.user_id`).

use lachesis_shared::ledger::MicroUsdc;
use sqlx::PgPool;

use super::{AccountId, Ledger, LedgerError};

/// What a person has earned for their verdicts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Earnings {
    /// Their account's balance.
    pub balance: MicroUsdc,
    /// Payments received.
    pub payments: i64,
}

impl Ledger {
    /// The annotator account of `user`, created if it is new (`annotator/{user}`).
    pub async fn annotator_account(&self, user: i64) -> Result<AccountId, LedgerError> {
        let existing = || {
            sqlx::query_scalar::<_, i64>(
                "SELECT id FROM ledger_accounts WHERE kind = 'annotator' AND user_id = $1",
            )
            .bind(user)
            .fetch_optional(self.pool())
        };
        // Every payment after a person's first finds the account in one round trip.
        if let Some(id) = existing().await? {
            return Ok(AccountId(id));
        }
        let name = format!("annotator/{user}");
        // Two first payments at once: the loser's INSERT does nothing and the SELECT after it
        // finds the winner's row.
        sqlx::query(
            "INSERT INTO ledger_accounts (name, kind, user_id) VALUES ($1, 'annotator', $2)
             ON CONFLICT DO NOTHING",
        )
        .bind(&name)
        .bind(user)
        .execute(self.pool())
        .await?;
        existing()
            .await?
            .map(AccountId)
            .ok_or_else(|| LedgerError::UnknownAccount(name))
    }
}

/// What `user` has earned; zero before their first paid verdict.
pub async fn earnings(db: &PgPool, user: i64) -> Result<Earnings, sqlx::Error> {
    let row: Option<(i64, i64)> = sqlx::query_as(
        "SELECT a.balance,
                (SELECT count(*) FROM ledger_entries e WHERE e.account_id = a.id AND e.amount > 0)
         FROM ledger_accounts a WHERE a.kind = 'annotator' AND a.user_id = $1",
    )
    .bind(user)
    .fetch_optional(db)
    .await?;
    let (balance, payments) = row.unwrap_or((0, 0));
    Ok(Earnings {
        balance: MicroUsdc(balance),
        payments,
    })
}
