//! `lachesis ledger ...`: reconcile, balances, deposits.

use clap::{Args, Subcommand};
use lachesis_shared::ledger::{AccountKind, MicroUsdc};

use super::Ledger;

#[derive(Subcommand)]
pub enum LedgerCommand {
    /// Re-checks every ledger invariant from the raw rows and says whether the ledger balances
    /// (exit status 1 when it does not).
    Reconcile(DbArgs),
    /// Every account's balance, held and available amounts.
    Balances(DbArgs),
    /// Deposits USDC into an account (created as a budget if it is new).
    Fund {
        #[command(flatten)]
        db: DbArgs,
        /// The account, e.g. `budget/my-run/agent`.
        #[arg(long)]
        account: String,
        /// Decimal USDC, e.g. `25` or `0.5`.
        #[arg(long)]
        usdc: String,
        /// The deposit's idempotency key: repeating the command with it deposits once.
        #[arg(long)]
        key: String,
    },
}

#[derive(Args)]
pub struct DbArgs {
    #[arg(long, env = "DATABASE_URL")]
    pub database_url: String,
}

async fn open(db: &DbArgs) -> anyhow::Result<Ledger> {
    let pool = crate::db::connect(&db.database_url, 4).await?;
    crate::db::migrate(&pool).await?;
    Ok(Ledger::new(pool))
}

/// Runs the command; `Ok(false)` when reconcile found violations.
pub async fn run(command: LedgerCommand) -> anyhow::Result<bool> {
    match command {
        LedgerCommand::Reconcile(db) => {
            let ledger = open(&db).await?;
            let report = super::reconcile::reconcile(ledger.pool()).await?;
            for (name, meaning) in super::reconcile::describe() {
                let failed = report.findings.iter().filter(|f| f.check == name).count();
                let verdict = if failed == 0 { "ok" } else { "FAILED" };
                println!("{verdict:>6}  {name}: {meaning}");
            }
            println!("{report}");
            Ok(report.is_balanced())
        }
        LedgerCommand::Balances(db) => {
            let ledger = open(&db).await?;
            println!(
                "{:<48} {:>12} {:>18} {:>18} {:>18}",
                "account", "kind", "balance", "held", "available"
            );
            for account in ledger.balances().await? {
                println!(
                    "{:<48} {:>12} {:>18} {:>18} {:>18}",
                    account.name,
                    account.kind.as_str(),
                    account.balance,
                    account.held,
                    account.available
                );
            }
            Ok(true)
        }
        LedgerCommand::Fund {
            db,
            account,
            usdc,
            key,
        } => {
            let amount = MicroUsdc::parse_usdc(&usdc)
                .filter(|amount| amount.0 > 0)
                .ok_or_else(|| anyhow::anyhow!("--usdc {usdc:?} is not a positive USDC amount"))?;
            let ledger = open(&db).await?;
            let id = ledger
                .account(&account, AccountKind::Budget, None, None)
                .await?;
            let posted = ledger.fund(&key, id, amount).await?;
            let balance = ledger.balance(id).await?;
            let what = if posted.replayed {
                "already deposited"
            } else {
                "deposited"
            };
            println!(
                "{what} {amount} USDC (transaction {}); {account} now has {} available",
                posted.tx_id, balance.available
            );
            Ok(true)
        }
    }
}
