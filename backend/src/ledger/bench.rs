//! `lachesis bench ledger`: payments per second with many concurrent payers, then a reconcile.
//!
//! Each payer is an agent budget paying judge cards (a handful of card-owner accounts that every
//! payer shares, so the payees' rows are contended as they are in a real marketplace). With
//! `--shared-budget` every payer draws on one budget instead, the overspending race.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use lachesis_shared::ledger::{AccountKind, MicroUsdc};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::{AccountId, Ledger, LedgerError, Settlement, Transfer};

#[derive(Debug, clap::Args)]
pub struct LedgerBenchArgs {
    #[arg(long, env = "DATABASE_URL")]
    pub database_url: String,
    /// Concurrent payers.
    #[arg(long, default_value_t = 200)]
    pub payers: usize,
    /// Payments each payer makes.
    #[arg(long, default_value_t = 50)]
    pub payments: usize,
    /// Card-owner accounts the payers pay.
    #[arg(long, default_value_t = 8)]
    pub cards: usize,
    /// Database connections in the pool.
    #[arg(long, default_value_t = 32)]
    pub connections: u32,
    /// Every payer draws on one budget (funded for about half of what they try to spend).
    #[arg(long)]
    pub shared_budget: bool,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

/// What one run measured.
#[derive(Debug)]
pub struct LedgerBenchResult {
    pub attempted: u64,
    pub paid: u64,
    pub refused: u64,
    pub seconds: f64,
    pub spent: MicroUsdc,
    pub funded: MicroUsdc,
    pub violations: usize,
}

impl LedgerBenchResult {
    pub fn payments_per_second(&self) -> f64 {
        self.paid as f64 / self.seconds
    }
}

pub async fn run(args: &LedgerBenchArgs) -> anyhow::Result<LedgerBenchResult> {
    let db = crate::db::connect(&args.database_url, args.connections).await?;
    crate::db::migrate(&db).await?;
    let ledger = Ledger::new(db.clone());
    // Fresh accounts per run, so runs against one database never interfere.
    let tag = format!(
        "bench-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)?
            .as_millis()
    );
    let mut cards = Vec::new();
    for card in 0..args.cards.max(1) {
        let name = format!("card/{tag}/{card}");
        cards.push(
            ledger
                .account(&name, AccountKind::CardOwner, None, None)
                .await?,
        );
    }
    // Payments cost 0.001 to 0.05 USDC; a private budget covers all of a payer's payments.
    let per_payer = MicroUsdc(50_000 * args.payments as i64);
    let mut budgets = Vec::new();
    let mut funded = 0;
    if args.shared_budget {
        let budget = ledger
            .account(
                &format!("budget/{tag}/shared"),
                AccountKind::Budget,
                None,
                None,
            )
            .await?;
        let amount = MicroUsdc(per_payer.0 * args.payers as i64 / 4);
        ledger.fund(&format!("{tag}/fund"), budget, amount).await?;
        funded += amount.0;
        budgets = vec![budget; args.payers];
    } else {
        for payer in 0..args.payers {
            let budget = ledger
                .account(
                    &format!("budget/{tag}/{payer}"),
                    AccountKind::Budget,
                    None,
                    None,
                )
                .await?;
            ledger
                .fund(&format!("{tag}/fund/{payer}"), budget, per_payer)
                .await?;
            funded += per_payer.0;
            budgets.push(budget);
        }
    }

    let paid = Arc::new(AtomicU64::new(0));
    let refused = Arc::new(AtomicU64::new(0));
    let spent = Arc::new(AtomicU64::new(0));
    let cards = Arc::new(cards);
    let started = Instant::now();
    let mut tasks = Vec::new();
    for (payer, budget) in budgets.into_iter().enumerate() {
        let (ledger, cards, tag) = (ledger.clone(), cards.clone(), tag.clone());
        let (paid, refused, spent) = (paid.clone(), refused.clone(), spent.clone());
        let payments = args.payments;
        let seed = args.seed.wrapping_mul(1_000_003).wrapping_add(payer as u64);
        tasks.push(tokio::spawn(async move {
            let mut rng = StdRng::seed_from_u64(seed);
            for i in 0..payments {
                let card: AccountId = cards[rng.random_range(0..cards.len())];
                let amount = MicroUsdc(rng.random_range(1_000..=50_000));
                let key = format!("{tag}/{payer}/{i}");
                let transfer = Transfer {
                    key: &key,
                    payer: budget,
                    payee: card,
                    amount,
                    memo: "bench",
                };
                match ledger.pay(&transfer, &Settlement::Simulated).await {
                    Ok(_) => {
                        paid.fetch_add(1, Ordering::Relaxed);
                        spent.fetch_add(amount.0 as u64, Ordering::Relaxed);
                    }
                    Err(LedgerError::InsufficientFunds { .. }) => {
                        refused.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(other) => return Err(other),
                }
            }
            Ok(())
        }));
    }
    for task in tasks {
        task.await??;
    }
    let seconds = started.elapsed().as_secs_f64();
    let report = super::reconcile::reconcile(&db).await?;
    Ok(LedgerBenchResult {
        attempted: (args.payers * args.payments) as u64,
        paid: paid.load(Ordering::Relaxed),
        refused: refused.load(Ordering::Relaxed),
        seconds,
        spent: MicroUsdc(spent.load(Ordering::Relaxed) as i64),
        funded: MicroUsdc(funded),
        violations: report.findings.len(),
    })
}
