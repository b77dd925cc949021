//! How a payment the ledger records is settled: `simulated` (the ledger alone, which really debits
//! the budget) or on chain (`chain.rs`: an ERC-20 transfer or an EIP-3009 authorization, captured
//! with its hash). Callers pay through [`Settler::pay`] and never care which.

pub mod chain;
pub mod config;
pub mod devchain;
pub mod devchain_cli;
pub mod eip3009;
pub mod keystore;
pub mod reconcile_chain;
pub mod recover;
mod submit;

use std::sync::Arc;
use std::time::Duration;

use lachesis_shared::ledger::MicroUsdc;

use crate::ledger::{Ledger, LedgerError, Settlement, Transfer};
pub use chain::ChainSettler;
pub use config::{ChainConfig, Network, Scheme, SettlementArgs, SettlementMode};

/// A payment that went through (or, under a key used before, the one that did).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Paid {
    pub tx_id: i64,
    /// The key had been used: nothing new was charged.
    pub replayed: bool,
    /// The on-chain transfer, when settled on chain.
    pub chain_tx: Option<String>,
    /// The transfer on the chain's explorer, when the chain has one.
    pub explorer_url: Option<String>,
}

/// Why a payment did not go through. Unless it says otherwise ([`SettleError::Unconfirmed`],
/// [`SettleError::InFlight`]), nothing was charged and nothing moved on chain.
#[derive(Debug, thiserror::Error)]
pub enum SettleError {
    #[error(transparent)]
    Ledger(#[from] LedgerError),
    #[error("ledger account {0} has no wallet to settle on chain with")]
    NoWallet(String),
    #[error("no key for wallet {wallet}")]
    NoKey { wallet: String },
    #[error("wallet {wallet} holds less than {amount} USDC on chain")]
    InsufficientChainFunds { wallet: String, amount: MicroUsdc },
    #[error("wallet {wallet} cannot pay the gas")]
    InsufficientGas { wallet: String },
    #[error("authorization replayed: {0}")]
    AuthorizationReplayed(String),
    #[error("invalid authorization: {0}")]
    InvalidAuthorization(String),
    #[error("transfer {} reverted: {reason}", tx_hash.as_deref().unwrap_or("(not sent)"))]
    Reverted {
        tx_hash: Option<String>,
        reason: String,
    },
    #[error("the chain refused the transaction: {0}")]
    Rejected(String),
    #[error("chain RPC: {0}")]
    Rpc(String),
    /// The transfer may or may not be on chain (the endpoint failed mid-payment, or no receipt came
    /// in time): the hold stays open and recovery settles it from the chain, exactly once.
    #[error("transfer {tx_hash} unconfirmed ({reason}); hold {hold} is left for recovery")]
    Unconfirmed {
        hold: i64,
        tx_hash: String,
        reason: String,
    },
    /// The idempotency key's first payment is still being settled.
    #[error("hold {hold}: the first payment under this key is still being settled")]
    InFlight { hold: i64 },
    /// The idempotency key's first payment failed (its hold was released); pay under a new key.
    #[error("hold {hold}: the first payment under this key failed ({})", reason.as_deref().unwrap_or("released"))]
    PreviouslyFailed { hold: i64, reason: Option<String> },
}

impl SettleError {
    /// The payer cannot cover the amount, in the ledger or on chain (nothing was charged).
    pub fn is_insufficient_funds(&self) -> bool {
        matches!(
            self,
            SettleError::Ledger(LedgerError::InsufficientFunds { .. })
                | SettleError::InsufficientChainFunds { .. }
        )
    }
}

/// The settlement mode of a server or a run.
#[derive(Clone, Default)]
pub enum Settler {
    /// Ledger only.
    #[default]
    Simulated,
    /// USDC transfers on chain.
    Chain(Arc<ChainSettler>),
}

impl Settler {
    pub fn on_chain(&self) -> bool {
        matches!(self, Settler::Chain(_))
    }

    /// The wallet an agent's budget pays from when none is named: the payer key this process
    /// holds, if it holds exactly one.
    pub fn default_payer_wallet(&self) -> Option<String> {
        match self {
            Settler::Simulated => None,
            Settler::Chain(chain) => chain.sole_payer_wallet(),
        }
    }

    pub fn mode(&self) -> &'static str {
        match self {
            Settler::Simulated => "simulated",
            Settler::Chain(_) => "chain",
        }
    }

    /// The settler the flags describe; for `chain`, keys come from the environment or encrypted
    /// keystores, and the endpoint must answer (and serve the configured chain) at once.
    pub async fn from_args(args: &SettlementArgs) -> anyhow::Result<Self> {
        if args.settlement == SettlementMode::Simulated {
            return Ok(Settler::Simulated);
        }
        let config = ChainConfig::from_args(args)?;
        let mut payers = Vec::new();
        for (i, key) in args
            .agent_keys
            .iter()
            .enumerate()
            .filter(|(_, k)| !k.trim().is_empty())
        {
            payers.push(keystore::parse_hex_key(
                key,
                &format!("LACHESIS_CHAIN_AGENT_KEYS[{i}]"),
            )?);
        }
        for path in &args.agent_keystores {
            payers.push(keystore::load_keystore_from_env(path)?);
        }
        let platform = match (&args.platform_key, &args.platform_keystore) {
            (Some(key), _) if !key.trim().is_empty() => {
                Some(keystore::parse_hex_key(key, "LACHESIS_CHAIN_PLATFORM_KEY")?)
            }
            (_, Some(path)) => Some(keystore::load_keystore_from_env(path)?),
            _ => None,
        };
        let settler = ChainSettler::connect(config, payers, platform).await?;
        tracing::info!(settler = ?settler, "settling payments on chain");
        Ok(Settler::Chain(Arc::new(settler)))
    }

    /// Settles chain holds whose outcome was left unknown (nothing to do when simulated).
    pub async fn resolve_pending(
        &self,
        ledger: &Ledger,
    ) -> Result<recover::ResolveReport, SettleError> {
        match self {
            Settler::Simulated => Ok(recover::ResolveReport::default()),
            Settler::Chain(chain) => chain.resolve_pending(ledger).await,
        }
    }

    /// Every `every`, settles what is left unknown, for as long as the process runs.
    pub fn spawn_recovery(&self, ledger: Ledger, every: Duration) {
        let Settler::Chain(chain) = self else {
            return;
        };
        let chain = Arc::clone(chain);
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(every).await;
                match chain.resolve_pending(&ledger).await {
                    Ok(report) if report.captured + report.released > 0 => tracing::info!(
                        captured = report.captured,
                        released = report.released,
                        pending = report.pending.len(),
                        "chain holds resolved"
                    ),
                    Ok(_) => {}
                    Err(e) => tracing::warn!(error = %e, "resolving chain holds"),
                }
            }
        });
    }

    /// Pays `transfer.amount` from payer to payee, once per idempotency key.
    pub async fn pay(&self, ledger: &Ledger, transfer: &Transfer<'_>) -> Result<Paid, SettleError> {
        match self {
            Settler::Simulated => {
                let posted = ledger.pay(transfer, &Settlement::Simulated).await?;
                Ok(Paid {
                    tx_id: posted.tx_id,
                    replayed: posted.replayed,
                    chain_tx: None,
                    explorer_url: None,
                })
            }
            Settler::Chain(chain) => chain.pay(ledger, transfer).await,
        }
    }
}

impl std::fmt::Debug for Settler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.mode())
    }
}

/// Micro-USDC are USDC's own base units (6 decimals), so on chain amounts carry over unchanged.
pub fn token_units(amount: MicroUsdc) -> u64 {
    u64::try_from(amount.0).unwrap_or(0)
}
