//! Finishing chain payments whose outcome was unknown: the RPC endpoint died mid-payment, the
//! receipt did not come in time, or the process crashed after submitting. Each open hold is settled
//! from what the chain says, and only from a fact that cannot change later:
//!   * a successful receipt: capture with its hash; a reverted one: release;
//!   * an ERC-20 transfer with no receipt whose nonce the sender has since used for something else
//!     can never be mined: release; otherwise its raw transaction is rebroadcast unchanged (same
//!     nonce, same hash, so it is mined at most once) and awaited;
//!   * an authorization the contract has run: capture (with the transaction that ran it); one not
//!     run and past its `validBefore` can never run: release; one not run but still valid is
//!     resubmitted (the contract runs it at most once) and awaited.
//!
//! Anything else stays open for the next round.

use std::time::{SystemTime, UNIX_EPOCH};

use alloy::primitives::{Address, B256};
use alloy::providers::Provider;
use lachesis_shared::ledger::MicroUsdc;

use super::SettleError;
use super::chain::{ChainSettler, IUsdc};
use super::submit::SendError;
use crate::ledger::{HoldState, Ledger, LedgerError};

/// What became of one open hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resolution {
    Captured {
        tx_hash: String,
    },
    Released {
        reason: String,
    },
    /// Still unknown; tried again later.
    Pending {
        reason: String,
    },
}

/// What a round of recovery did.
#[derive(Debug, Default, Clone)]
pub struct ResolveReport {
    pub captured: usize,
    pub released: usize,
    pub pending: Vec<i64>,
}

impl ChainSettler {
    /// Settles what this process left open and what dead processes left awaiting the chain.
    pub async fn resolve_pending(&self, ledger: &Ledger) -> Result<ResolveReport, SettleError> {
        let mut holds: Vec<i64> = self
            .unconfirmed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .iter()
            .copied()
            .collect();
        let recovery = ledger.recover().await?;
        holds.extend(recovery.awaiting_chain.iter().map(|hold| hold.id));
        holds.sort_unstable();
        holds.dedup();
        self.resolve_holds(ledger, &holds).await
    }

    /// Settles each of `holds` (see the module's rules).
    pub async fn resolve_holds(
        &self,
        ledger: &Ledger,
        holds: &[i64],
    ) -> Result<ResolveReport, SettleError> {
        let mut report = ResolveReport::default();
        for &hold in holds {
            match self.resolve_hold(ledger, hold).await {
                Ok(Resolution::Captured { .. }) => report.captured += 1,
                Ok(Resolution::Released { .. }) => report.released += 1,
                Ok(Resolution::Pending { reason }) => {
                    tracing::info!(hold, %reason, "chain hold still unresolved");
                    report.pending.push(hold);
                }
                Err(e) => {
                    tracing::warn!(hold, error = %e, "resolving a chain hold");
                    report.pending.push(hold);
                }
            }
        }
        Ok(report)
    }

    /// Settles one open chain hold from what the chain says.
    pub async fn resolve_hold(
        &self,
        ledger: &Ledger,
        hold: i64,
    ) -> Result<Resolution, SettleError> {
        if !self
            .in_flight
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(hold)
        {
            return Ok(Resolution::Pending {
                reason: "being settled right now".into(),
            });
        }
        let result = self.resolve_claimed(ledger, hold).await;
        self.in_flight
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(&hold);
        if !matches!(result, Ok(Resolution::Pending { .. }) | Err(_)) {
            self.unconfirmed
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .remove(&hold);
        }
        result
    }

    async fn resolve_claimed(&self, ledger: &Ledger, hold: i64) -> Result<Resolution, SettleError> {
        let row = ledger.hold_record(hold).await?;
        match row.state {
            HoldState::Captured => {
                return Ok(Resolution::Captured {
                    tx_hash: row.chain_tx.unwrap_or_default(),
                });
            }
            HoldState::Released => {
                return Ok(Resolution::Released {
                    reason: row.release_reason.unwrap_or_default(),
                });
            }
            HoldState::Held => {}
        }
        if !row.on_chain {
            return Ok(Resolution::Pending {
                reason: "not a chain hold".into(),
            });
        }
        let amount = MicroUsdc(row.amount);
        if let Some(recorded) = super::eip3009::for_hold(ledger.pool(), hold).await? {
            return self
                .resolve_authorization(ledger, hold, amount, recorded)
                .await;
        }
        let transfer = sqlx::query!(
            "SELECT sender, nonce, tx_hash, raw_tx FROM chain_transfers WHERE hold_id = $1",
            hold
        )
        .fetch_optional(ledger.pool())
        .await
        .map_err(LedgerError::from)?;
        let Some(transfer) = transfer else {
            // Nothing was ever signed for it: nothing can have moved.
            return self
                .release(ledger, hold, "no transfer was ever sent")
                .await;
        };
        let bad = |what: &str| {
            SettleError::Rpc(format!("chain_transfers row of hold {hold}: bad {what}"))
        };
        let sender: Address = transfer.sender.parse().map_err(|_| bad("sender"))?;
        let nonce = transfer.nonce as u64;
        let hash: B256 = transfer.tx_hash.parse().map_err(|_| bad("hash"))?;
        let raw = alloy::hex::decode(transfer.raw_tx).map_err(|_| bad("raw tx"))?;

        if let Some(resolution) = self.by_receipt(ledger, hold, hash).await? {
            return Ok(resolution);
        }
        let mined_nonce = self
            .provider
            .get_transaction_count(sender)
            .latest()
            .await
            .map_err(|e| SettleError::Rpc(e.to_string()))?;
        if mined_nonce > nonce {
            // The nonce is taken; the receipt is looked for once more in case it just landed.
            if let Some(resolution) = self.by_receipt(ledger, hold, hash).await? {
                return Ok(resolution);
            }
            return self
                .release(
                    ledger,
                    hold,
                    "its nonce was used by another transaction: it can never be mined",
                )
                .await;
        }
        if let Err(e) = self.provider.send_raw_transaction(&raw).await {
            let text = e.to_string();
            if !text.to_ascii_lowercase().contains("already known") {
                tracing::info!(hold, error = %text, "rebroadcast refused");
            }
        }
        self.await_resolution(ledger, hold, hash).await
    }

    async fn resolve_authorization(
        &self,
        ledger: &Ledger,
        hold: i64,
        amount: MicroUsdc,
        recorded: super::eip3009::RecordedAuthorization,
    ) -> Result<Resolution, SettleError> {
        let hashes: Vec<B256> = recorded
            .tx_hashes
            .iter()
            .rev()
            .filter_map(|h| h.parse().ok())
            .collect();
        for &hash in &hashes {
            let receipt = self
                .provider
                .get_transaction_receipt(hash)
                .await
                .map_err(|e| SettleError::Rpc(e.to_string()))?;
            if receipt.is_some_and(|r| r.status()) {
                self.captured(ledger, hold, hash).await?;
                return Ok(Resolution::Captured {
                    tx_hash: format!("{hash:#x}"),
                });
            }
        }
        let auth = recorded.auth;
        if self.authorization_used(&auth).await? {
            // Run by a transaction this process did not see succeed: find it by its event.
            let hash = self
                .authorization_tx(&auth)
                .await?
                .or(hashes.first().copied());
            let Some(hash) = hash else {
                return Ok(Resolution::Pending {
                    reason: "the authorization was used but its transaction is not found".into(),
                });
            };
            self.captured(ledger, hold, hash).await?;
            return Ok(Resolution::Captured {
                tx_hash: format!("{hash:#x}"),
            });
        }
        // A transaction of ours may still be waiting in the node's pool.
        for &hash in &hashes {
            if let Ok(Some(_)) = self.provider.get_transaction_by_hash(hash).await {
                return self.await_resolution(ledger, hold, hash).await;
            }
        }
        let chain_now = self
            .provider
            .get_block_by_number(alloy::eips::BlockNumberOrTag::Latest)
            .await
            .map_err(|e| SettleError::Rpc(e.to_string()))?
            .map(|block| block.header.timestamp)
            .unwrap_or_else(|| {
                SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .map(|d| d.as_secs())
                    .unwrap_or(0)
            });
        if auth.valid_before <= chain_now {
            super::eip3009::mark(ledger.pool(), hold, "failed", Some("expired unused")).await?;
            return self
                .release(
                    ledger,
                    hold,
                    "the authorization expired unused: it can never run",
                )
                .await;
        }
        match self.submit_authorization(ledger, hold, amount, &auth).await {
            Ok(hash) => self.await_resolution(ledger, hold, hash).await,
            Err(SendError::NotSent(SettleError::AuthorizationReplayed(_))) => {
                // Used between the check and the estimate: settled next round from the event.
                Ok(Resolution::Pending {
                    reason: "the authorization was just used".into(),
                })
            }
            // Refused as it stands (no funds yet, say), it may still run before it expires, so
            // the hold stays until it runs or expires.
            Err(SendError::NotSent(e)) => Ok(Resolution::Pending {
                reason: e.to_string(),
            }),
            Err(SendError::Unknown { reason, .. }) => Ok(Resolution::Pending { reason }),
        }
    }

    /// The transaction whose `AuthorizationUsed` event names this authorization, if the node finds
    /// it in its recent history.
    async fn authorization_tx(
        &self,
        auth: &super::eip3009::SignedAuthorization,
    ) -> Result<Option<B256>, SettleError> {
        use alloy::sol_types::SolEvent;
        let latest = self
            .provider
            .get_block_number()
            .await
            .map_err(|e| SettleError::Rpc(e.to_string()))?;
        let filter = alloy::rpc::types::Filter::new()
            .address(self.config.usdc)
            .event_signature(IUsdc::AuthorizationUsed::SIGNATURE_HASH)
            .topic1(auth.from.into_word())
            .topic2(auth.nonce)
            .from_block(latest.saturating_sub(9_999))
            .to_block(latest);
        let logs = self
            .provider
            .get_logs(&filter)
            .await
            .map_err(|e| SettleError::Rpc(e.to_string()))?;
        Ok(logs.first().and_then(|log| log.transaction_hash))
    }

    /// Settles by the receipt, when there is one.
    async fn by_receipt(
        &self,
        ledger: &Ledger,
        hold: i64,
        hash: B256,
    ) -> Result<Option<Resolution>, SettleError> {
        let receipt = self
            .provider
            .get_transaction_receipt(hash)
            .await
            .map_err(|e| SettleError::Rpc(e.to_string()))?;
        Ok(match receipt {
            Some(receipt) if receipt.status() => {
                self.captured(ledger, hold, hash).await?;
                Some(Resolution::Captured {
                    tx_hash: format!("{hash:#x}"),
                })
            }
            Some(_) => Some(self.release(ledger, hold, "the transfer reverted").await?),
            None => None,
        })
    }

    async fn await_resolution(
        &self,
        ledger: &Ledger,
        hold: i64,
        hash: B256,
    ) -> Result<Resolution, SettleError> {
        match self.wait_receipt(hash, self.config.receipt_timeout).await {
            Ok(_) => {
                Ok(self
                    .by_receipt(ledger, hold, hash)
                    .await?
                    .unwrap_or(Resolution::Pending {
                        reason: "the receipt vanished".into(),
                    }))
            }
            Err(reason) => Ok(Resolution::Pending { reason }),
        }
    }

    async fn release(
        &self,
        ledger: &Ledger,
        hold: i64,
        reason: &str,
    ) -> Result<Resolution, SettleError> {
        super::eip3009::mark(ledger.pool(), hold, "failed", Some(reason)).await?;
        ledger.release(hold, reason).await?;
        Ok(Resolution::Released {
            reason: reason.to_string(),
        })
    }
}
