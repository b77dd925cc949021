//! Payments during the drills. The only HTTP path that pays (Pay-to-Play's judge rounds) needs the
//! embedded model and judge endpoints, so the payers drive `lachesis::ledger::Ledger` from this
//! process against the drill's database, on a pool of their own, while the servers run on the
//! same tables (their ledger recovery included). Each payment has an idempotency key and is
//! retried under that key until the ledger confirms it, as a payer that lost an answer would.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use lachesis::ledger::{AccountId, Ledger, Settlement, Transfer};
use lachesis_shared::ledger::{AccountKind, MicroUsdc};
use sqlx::PgPool;

use super::journal::{Activity, Failure, Journal};
use super::workload::{STOP_GRACE, Stop};

/// One payment's amount.
pub const PAYMENT_MICROS: i64 = 1_000;
/// The budget: far more than any drill spends, so no payment is refused for want of funds.
pub const FUNDED_MICROS: i64 = 1_000_000_000;
pub const KEY_PREFIX: &str = "drill/";
const BUDGET: &str = "budget/drill/agent";
const CARDS: [&str; 2] = ["card/drill-judge-a", "card/drill-judge-b"];
/// A payer's pause between payments.
const PAY_PACE: Duration = Duration::from_millis(20);

#[derive(Clone)]
pub struct Payments {
    pub ledger: Ledger,
    pub db: PgPool,
    pub budget: AccountId,
    cards: [AccountId; 2],
}

impl Payments {
    /// A pool with a short acquire timeout (an outage shows as failed payments, not as payers
    /// parked for 30 s), the budget funded once, two judge cards to pay.
    pub async fn setup(database_url: &str) -> anyhow::Result<Self> {
        let db = sqlx::postgres::PgPoolOptions::new()
            .max_connections(4)
            .acquire_timeout(Duration::from_secs(3))
            .connect(database_url)
            .await?;
        let ledger = Ledger::new(db.clone());
        let budget = ledger
            .account(BUDGET, AccountKind::Budget, None, None)
            .await?;
        ledger
            .fund("drill-fund/budget", budget, MicroUsdc(FUNDED_MICROS))
            .await?;
        let mut cards = [AccountId(0); 2];
        for (slot, name) in cards.iter_mut().zip(CARDS) {
            *slot = ledger
                .account(name, AccountKind::CardOwner, None, None)
                .await?;
        }
        Ok(Self {
            ledger,
            db,
            budget,
            cards,
        })
    }

    /// Payments the database holds under the drills' keys, and keys it holds more than once
    /// (which its unique index should make impossible).
    pub async fn settled(&self) -> anyhow::Result<(i64, i64)> {
        let settled: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM ledger_transactions WHERE kind = 'payment' AND starts_with(idempotency_key, $1)",
        )
        .bind(KEY_PREFIX)
        .fetch_one(&self.db)
        .await?;
        let doubled: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM (SELECT idempotency_key FROM ledger_transactions
             WHERE starts_with(idempotency_key, $1) GROUP BY 1 HAVING count(*) > 1) d",
        )
        .bind(KEY_PREFIX)
        .fetch_one(&self.db)
        .await?;
        Ok((settled, doubled))
    }

    /// The budget's available balance.
    pub async fn budget_available(&self) -> anyhow::Result<i64> {
        Ok(self.ledger.balance(self.budget).await?.available.0)
    }
}

/// Pays until stopped, each payment retried under its key until confirmed.
pub async fn payer(
    id: usize,
    payments: Payments,
    journal: Arc<Journal>,
    stop: Stop,
    given_up: Arc<AtomicU64>,
) {
    for i in 0.. {
        if stop.requested() {
            break;
        }
        let key = format!("{KEY_PREFIX}payer-{id}/{i}");
        let transfer = Transfer {
            key: &key,
            payer: payments.budget,
            payee: payments.cards[i % 2],
            amount: MicroUsdc(PAYMENT_MICROS),
            memo: "drill",
        };
        journal.payment_begun(&key);
        let mut backoff = Duration::from_millis(20);
        loop {
            match payments.ledger.pay(&transfer, &Settlement::Simulated).await {
                Ok(posted) => {
                    journal.payment_confirmed(&key, posted.replayed);
                    break;
                }
                Err(_) => {
                    journal.failed(Activity::Payment, Failure::Ledger);
                    if stop.overdue(STOP_GRACE) {
                        given_up.fetch_add(1, Ordering::Relaxed);
                        return;
                    }
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(Duration::from_millis(500));
                }
            }
        }
        tokio::time::sleep(PAY_PACE).await;
    }
}
