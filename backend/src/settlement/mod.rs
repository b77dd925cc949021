//! How a payment the ledger records is settled: `simulated` (the ledger alone, which really debits
//! the budget) or on chain (see the chain variant). Callers pay through [`Settler::pay`] and never
//! care which.

use lachesis_shared::ledger::MicroUsdc;

use crate::ledger::{Ledger, LedgerError, Settlement, Transfer};

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

#[derive(Debug, thiserror::Error)]
pub enum SettleError {
    #[error(transparent)]
    Ledger(#[from] LedgerError),
}

impl SettleError {
    /// The payer cannot cover the amount (nothing was charged).
    pub fn is_insufficient_funds(&self) -> bool {
        matches!(
            self,
            SettleError::Ledger(LedgerError::InsufficientFunds { .. })
        )
    }
}

/// The settlement mode of a server or a run.
#[derive(Clone, Default)]
pub enum Settler {
    /// Ledger only.
    #[default]
    Simulated,
}

impl Settler {
    pub fn mode(&self) -> &'static str {
        match self {
            Settler::Simulated => "simulated",
        }
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
