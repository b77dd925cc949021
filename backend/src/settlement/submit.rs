//! Getting a transaction to the chain: gas and fee estimates (where a contract's refusal shows up
//! before anything is sent), per-sender nonces, signing, recording the signed transaction before
//! it leaves, broadcasting, and reading what a failed RPC call means for it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use alloy::eips::eip1559::Eip1559Estimation;
use alloy::eips::eip2718::Encodable2718;
use alloy::network::TransactionBuilder;
use alloy::primitives::{Address, B256, Bytes};
use alloy::providers::{DynProvider, Provider};
use alloy::rpc::types::{TransactionReceipt, TransactionRequest};
use alloy::transports::{TransportError, TransportErrorKind};
use lachesis_shared::ledger::MicroUsdc;

use super::SettleError;
use super::chain::ChainSettler;
use super::config::wallet_text;
use crate::ledger::Ledger;

/// How a failed RPC call bears on a transaction it carried.
#[derive(Debug)]
pub(super) enum RpcFailure {
    /// The node answered with an error (for a transaction: it did not take it; for a call or an
    /// estimate: it reverted). Carries the message and any decoded revert reason.
    Refused(String),
    /// The request never reached the node (connection refused): nothing was processed.
    Unreached(String),
    /// Anything else (a reset connection, a timeout, a garbled answer): it may have been processed.
    Unknown(String),
}

pub(super) fn classify_rpc(error: &TransportError) -> RpcFailure {
    if let Some(payload) = error.as_error_resp() {
        let mut text = payload.message.to_string();
        if let Some(reason) = payload
            .as_revert_data()
            .and_then(|data| alloy::sol_types::decode_revert_reason(&data))
            && !text.contains(&reason)
        {
            text = format!("{text}: {reason}");
        }
        return RpcFailure::Refused(text);
    }
    if let TransportError::Transport(TransportErrorKind::Custom(inner)) = error
        && let Some(http) = inner.downcast_ref::<alloy::transports::http::reqwest::Error>()
        && http.is_connect()
    {
        return RpcFailure::Unreached(error.to_string());
    }
    RpcFailure::Unknown(error.to_string())
}

/// What the contract's or the node's refusal means for the payment.
pub(super) fn refusal(
    text: &str,
    payer: Address,
    amount: MicroUsdc,
    sender: Address,
) -> SettleError {
    let lower = text.to_ascii_lowercase();
    if lower.contains("authorization is used or canceled") {
        SettleError::AuthorizationReplayed(text.to_string())
    } else if lower.contains("transfer amount exceeds balance") {
        SettleError::InsufficientChainFunds {
            wallet: wallet_text(payer),
            amount,
        }
    } else if lower.contains("insufficient funds") {
        SettleError::InsufficientGas {
            wallet: wallet_text(sender),
        }
    } else if lower.contains("invalid signature")
        || lower.contains("authorization is expired")
        || lower.contains("authorization is not yet valid")
    {
        SettleError::InvalidAuthorization(text.to_string())
    } else {
        SettleError::Rejected(text.to_string())
    }
}

/// Why a send ended without a hash known to be on chain.
pub(super) enum SendError {
    /// Certainly not on chain: the hold may be released.
    NotSent(SettleError),
    /// Perhaps on chain: the hold stays for recovery.
    Unknown { hash: B256, reason: String },
}

/// Where a signed transaction is recorded before it is sent.
pub(super) enum Record {
    /// An ERC-20 transfer for this hold (`chain_transfers`).
    Transfer { hold: i64 },
    /// A platform transaction carrying the hold's authorization (`chain_authorizations`).
    Authorization { hold: i64 },
}

impl ChainSettler {
    /// Estimates gas and fees for a call to the token from `sender`. A revert here is the
    /// contract refusing (no funds, a used authorization): nothing was sent.
    pub(super) async fn prepare(
        &self,
        sender: Address,
        data: Vec<u8>,
        payer: Address,
        amount: MicroUsdc,
    ) -> Result<TransactionRequest, SettleError> {
        let request = TransactionRequest::default()
            .with_from(sender)
            .with_to(self.config.usdc)
            .with_input(Bytes::from(data))
            .with_chain_id(self.config.chain_id);
        let gas =
            self.provider
                .estimate_gas(request.clone())
                .await
                .map_err(|e| match classify_rpc(&e) {
                    RpcFailure::Refused(text) => refusal(&text, payer, amount, sender),
                    RpcFailure::Unreached(text) | RpcFailure::Unknown(text) => {
                        SettleError::Rpc(text)
                    }
                })?;
        let fees = self.fees().await?;
        Ok(request
            .with_gas_limit(gas.saturating_mul(6) / 5 + 5_000)
            .with_max_fee_per_gas(fees.max_fee_per_gas)
            .with_max_priority_fee_per_gas(fees.max_priority_fee_per_gas))
    }

    async fn fees(&self) -> Result<Eip1559Estimation, SettleError> {
        if let Some((at, fees)) = *self
            .fees
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            && at.elapsed() < Duration::from_secs(2)
        {
            return Ok(fees);
        }
        let fees = self
            .provider
            .estimate_eip1559_fees()
            .await
            .map_err(|e| SettleError::Rpc(e.to_string()))?;
        *self
            .fees
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some((Instant::now(), fees));
        Ok(fees)
    }

    fn sender_lock(&self, sender: Address) -> Arc<tokio::sync::Mutex<Option<u64>>> {
        self.senders
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .entry(sender)
            .or_default()
            .clone()
    }

    /// Signs `request` with `sender`'s next nonce, records it where `record` says (before it
    /// leaves), and broadcasts it.
    pub(super) async fn send(
        &self,
        ledger: &Ledger,
        sender: Address,
        request: TransactionRequest,
        record: Record,
    ) -> Result<B256, SendError> {
        let not_sent = SendError::NotSent;
        let wallet = self.wallet.as_ref().ok_or_else(|| {
            not_sent(SettleError::NoKey {
                wallet: wallet_text(sender),
            })
        })?;
        let lock = self.sender_lock(sender);
        let mut next = lock.lock().await;
        let nonce = match *next {
            Some(nonce) => nonce,
            None => self
                .provider
                .get_transaction_count(sender)
                .pending()
                .await
                .map_err(|e| not_sent(SettleError::Rpc(e.to_string())))?,
        };
        let envelope = request
            .with_nonce(nonce)
            .build(wallet)
            .await
            .map_err(|e| not_sent(SettleError::Rejected(format!("signing: {e}"))))?;
        let hash = *envelope.tx_hash();
        let raw = envelope.encoded_2718();
        let hash_text = format!("{hash:#x}");
        let recorded = async {
            match record {
                Record::Transfer { hold } => {
                    sqlx::query(
                        "INSERT INTO chain_transfers (hold_id, chain_id, sender, nonce, tx_hash, raw_tx)
                         VALUES ($1, $2, $3, $4, $5, $6)
                         ON CONFLICT (hold_id) DO UPDATE SET nonce = $4, tx_hash = $5, raw_tx = $6",
                    )
                    .bind(hold)
                    .bind(self.config.chain_id as i64)
                    .bind(wallet_text(sender))
                    .bind(nonce as i64)
                    .bind(&hash_text)
                    .bind(alloy::hex::encode_prefixed(&raw))
                    .execute(ledger.pool())
                    .await?;
                    ledger.note_submitted(hold, &hash_text).await
                }
                Record::Authorization { hold } => {
                    super::eip3009::note_submitted(ledger.pool(), hold, &hash_text).await?;
                    ledger.note_submitted(hold, &hash_text).await
                }
            }
        }
        .await;
        if let Err(e) = recorded {
            return Err(not_sent(e.into()));
        }
        match self.provider.send_raw_transaction(&raw).await {
            Ok(_) => {
                *next = Some(nonce + 1);
                Ok(hash)
            }
            Err(e) => match classify_rpc(&e) {
                RpcFailure::Refused(text)
                    if text.to_ascii_lowercase().contains("already known") =>
                {
                    *next = Some(nonce + 1);
                    Ok(hash)
                }
                RpcFailure::Refused(text) => {
                    // The node did not take it: the nonce is free again, but ask next time.
                    *next = None;
                    Err(not_sent(refusal(&text, sender, MicroUsdc(0), sender)))
                }
                RpcFailure::Unreached(text) => {
                    *next = None;
                    Err(not_sent(SettleError::Rpc(text)))
                }
                RpcFailure::Unknown(reason) => {
                    *next = None;
                    Err(SendError::Unknown { hash, reason })
                }
            },
        }
    }

    /// Polls for a receipt until `timeout`; `Err` says why none came.
    pub(super) async fn wait_receipt(
        &self,
        hash: B256,
        timeout: Duration,
    ) -> Result<TransactionReceipt, String> {
        wait_receipt(&self.provider, hash, timeout).await
    }
}

/// Polls `eth_getTransactionReceipt` (at once, then backing off to a quarter second) until the
/// receipt or `timeout`.
pub async fn wait_receipt(
    provider: &DynProvider,
    hash: B256,
    timeout: Duration,
) -> Result<TransactionReceipt, String> {
    let deadline = Instant::now() + timeout;
    let mut pause = Duration::from_millis(2);
    loop {
        let last = match provider.get_transaction_receipt(hash).await {
            Ok(Some(receipt)) => return Ok(receipt),
            Ok(None) => "no receipt yet".to_string(),
            Err(e) => e.to_string(),
        };
        if Instant::now() + pause > deadline {
            return Err(format!("no receipt within {timeout:?} ({last})"));
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_millis(250));
    }
}
