//! `lachesis ledger ...`: reconcile, balances, deposits.

use clap::{Args, Subcommand};
use lachesis_shared::ledger::{AccountKind, MicroUsdc};

use super::Ledger;

#[derive(Subcommand)]
pub enum LedgerCommand {
    /// Re-checks every ledger invariant from the raw rows and says whether the ledger balances
    /// (exit status 1 when it does not). With `--rpc-url`, also checks the chain-settled payments
    /// and the wallets' token balances against the chain.
    Reconcile {
        #[command(flatten)]
        db: DbArgs,
        /// The chain's JSON-RPC endpoint, for the on-chain checks.
        #[arg(long, env = "LACHESIS_CHAIN_RPC_URL")]
        rpc_url: Option<String>,
        /// The USDC contract (default: Base's address, where the dev chain places it too).
        #[arg(long, env = "LACHESIS_CHAIN_USDC")]
        usdc: Option<String>,
    },
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
    /// Writes an encrypted keystore for chain settlement: the key in LACHESIS_CHAIN_KEY (or a new
    /// random one), encrypted with LACHESIS_CHAIN_KEYSTORE_PASSWORD. Prints the wallet address.
    Keystore {
        /// The file to write (its folder is created).
        #[arg(long)]
        out: std::path::PathBuf,
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
        LedgerCommand::Reconcile { db, rpc_url, usdc } => {
            let ledger = open(&db).await?;
            let mut report = super::reconcile::reconcile(ledger.pool()).await?;
            let mut checks: Vec<_> = super::reconcile::describe().collect();
            if let Some(rpc_url) = rpc_url.filter(|url| !url.is_empty()) {
                let token = match usdc {
                    Some(text) => crate::settlement::config::parse_address(&text)?,
                    None => crate::settlement::config::BASE_USDC,
                };
                let chain = crate::settlement::reconcile_chain::reconcile_chain(
                    ledger.pool(),
                    &rpc_url,
                    token,
                )
                .await?;
                println!(
                    "chain at block {}: {} chain-settled payments, {} wallets with a baseline",
                    chain.block, chain.payments, chain.wallets
                );
                checks.extend(
                    crate::settlement::reconcile_chain::CHAIN_CHECKS
                        .iter()
                        .copied(),
                );
                report.checks.extend(
                    crate::settlement::reconcile_chain::CHAIN_CHECKS
                        .iter()
                        .map(|(name, _)| *name),
                );
                report.findings.extend(chain.findings);
            }
            for (name, meaning) in checks {
                let failed = report.findings.iter().filter(|f| f.check == name).count();
                let verdict = if failed == 0 { "ok" } else { "FAILED" };
                println!("{verdict:>6}  {name}: {meaning}");
            }
            println!("{report}");
            Ok(report.is_balanced())
        }
        LedgerCommand::Keystore { out } => {
            use crate::settlement::keystore;
            let password = std::env::var(keystore::PASSWORD_ENV)
                .map_err(|_| keystore::KeyError::NoPassword(keystore::PASSWORD_ENV))?;
            anyhow::ensure!(!password.is_empty(), "{} is empty", keystore::PASSWORD_ENV);
            let signer = match std::env::var("LACHESIS_CHAIN_KEY") {
                Ok(key) => keystore::parse_hex_key(&key, "LACHESIS_CHAIN_KEY")?,
                Err(_) => alloy::signers::local::PrivateKeySigner::random(),
            };
            let dir = out
                .parent()
                .filter(|d| !d.as_os_str().is_empty())
                .unwrap_or(std::path::Path::new("."));
            let name = out
                .file_name()
                .and_then(|n| n.to_str())
                .ok_or_else(|| anyhow::anyhow!("--out {} names no file", out.display()))?;
            let path = keystore::write_keystore(dir, name, &signer, &password)?;
            println!("{:#x} in {}", signer.address(), path.display());
            Ok(true)
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
