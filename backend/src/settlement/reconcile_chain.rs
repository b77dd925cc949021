//! `lachesis ledger reconcile --rpc-url URL --usdc ADDR`: the ledger against the chain.
//!
//! A wallet's ledger balance cannot equal its chain balance: budgets are funded in the ledger
//! (`ledger fund`, a deposit the platform saw), one wallet may back several accounts, and a refund
//! of a chain payment is a ledger credit, not a transfer back. What must hold is narrower and
//! exact: every chain-settled payment is a successful transfer of its amount between the two
//! accounts' wallets; no released hold's transfer ran; and, per wallet, the token balance changed
//! since its baseline (read at a block before the platform first moved money for it) by exactly
//! the chain-settled entries mined after that block, plus transfers mined but not yet captured.
//! That last check assumes the wallet is the platform's to move: a deposit to it from elsewhere
//! shows up as a difference (which is the point: the ledger has not seen that money).

use std::collections::{BTreeMap, HashMap};

use alloy::eips::BlockId;
use alloy::network::TransactionBuilder;
use alloy::primitives::{Address, B256, I256, U256};
use alloy::providers::{DynProvider, Provider, ProviderBuilder};
use alloy::rpc::types::{TransactionReceipt, TransactionRequest};
use alloy::sol_types::{SolCall, SolEvent};
use lachesis_shared::ledger::ReconcileFinding;
use sqlx::PgPool;

use super::SettleError;
use super::chain::IUsdc;
use super::config::wallet_text;
use crate::ledger::queries::{chain_legs, submitted_chain_holds};

/// The chain checks: name and meaning.
pub const CHAIN_CHECKS: &[(&str, &str)] = &[
    (
        "chain_payments_confirmed",
        "every chain-settled payment is a successful transfer of its amount between the accounts' wallets",
    ),
    (
        "released_holds_moved_nothing",
        "no released chain hold's transfer or authorization ran on chain",
    ),
    (
        "wallet_balances_match",
        "each wallet's token balance changed since its baseline by exactly its chain-settled entries",
    ),
];

/// What the chain checks found.
#[derive(Debug, Clone, Default)]
pub struct ChainReport {
    pub block: u64,
    pub payments: usize,
    pub wallets: usize,
    pub findings: Vec<ReconcileFinding>,
}

async fn balance_at(
    provider: &DynProvider,
    token: Address,
    wallet: Address,
    block: u64,
) -> Result<U256, SettleError> {
    let out = provider
        .call(
            TransactionRequest::default()
                .with_to(token)
                .with_input(IUsdc::balanceOfCall { account: wallet }.abi_encode()),
        )
        .block(BlockId::number(block))
        .await
        .map_err(|e| SettleError::Rpc(e.to_string()))?;
    IUsdc::balanceOfCall::abi_decode_returns(&out).map_err(|e| SettleError::Rpc(e.to_string()))
}

/// Records `wallet`'s balance at the current block, unless it has a baseline already.
pub(super) async fn record_baseline(
    db: &PgPool,
    provider: &DynProvider,
    chain_id: u64,
    token: Address,
    wallet: Address,
) -> Result<(), SettleError> {
    let known: bool = sqlx::query_scalar(
        "SELECT EXISTS (SELECT 1 FROM chain_wallet_baselines
                        WHERE chain_id = $1 AND token = $2 AND wallet = $3)",
    )
    .bind(chain_id as i64)
    .bind(wallet_text(token))
    .bind(wallet_text(wallet))
    .fetch_one(db)
    .await
    .map_err(crate::ledger::LedgerError::from)?;
    if known {
        return Ok(());
    }
    let block = provider
        .get_block_number()
        .await
        .map_err(|e| SettleError::Rpc(e.to_string()))?;
    let balance = balance_at(provider, token, wallet, block).await?;
    sqlx::query(
        "INSERT INTO chain_wallet_baselines (chain_id, token, wallet, block_number, balance)
         VALUES ($1, $2, $3, $4, $5::numeric) ON CONFLICT DO NOTHING",
    )
    .bind(chain_id as i64)
    .bind(wallet_text(token))
    .bind(wallet_text(wallet))
    .bind(block as i64)
    .bind(balance.to_string())
    .execute(db)
    .await
    .map_err(crate::ledger::LedgerError::from)?;
    Ok(())
}

/// Whether the receipt carries a token `Transfer` of `value` from `from` to `to`.
fn moved(
    receipt: &TransactionReceipt,
    token: Address,
    from: Address,
    to: Address,
    value: U256,
) -> bool {
    receipt.logs().iter().any(|log| {
        log.inner.address == token
            && IUsdc::Transfer::decode_log_data(&log.inner.data)
                .is_ok_and(|t| t.from == from && t.to == to && t.value == value)
    })
}

/// One entry of a payment: its signed amount and the account's wallet.
type Leg = (i64, Option<Address>);

fn finding(check: &str, detail: String) -> ReconcileFinding {
    ReconcileFinding {
        check: check.to_string(),
        detail,
    }
}

/// Runs the chain checks against the endpoint at `rpc_url` for the token at `token`.
pub async fn reconcile_chain(
    db: &PgPool,
    rpc_url: &str,
    token: Address,
) -> anyhow::Result<ChainReport> {
    let url = rpc_url
        .parse()
        .map_err(|e| anyhow::anyhow!("RPC URL {rpc_url:?}: {e}"))?;
    let provider = ProviderBuilder::new()
        .disable_recommended_fillers()
        .connect_http(url)
        .erased();
    let chain_id = provider.get_chain_id().await?;
    let block = provider.get_block_number().await?;
    let mut report = ChainReport {
        block,
        ..ChainReport::default()
    };
    // Signed token movements per wallet, with the block they were mined in.
    let mut deltas: HashMap<Address, Vec<(u64, I256)>> = HashMap::new();
    let mut note = |wallet: Address, block: u64, amount: i64| {
        deltas
            .entry(wallet)
            .or_default()
            .push((block, I256::try_from(amount).unwrap_or_default()));
    };
    let wallet_of = |text: Option<String>| text.and_then(|w| w.parse::<Address>().ok());

    let mut payments: BTreeMap<i64, (Option<String>, Vec<Leg>)> = BTreeMap::new();
    for leg in chain_legs(db).await? {
        let entry = payments
            .entry(leg.tx_id)
            .or_insert_with(|| (leg.chain_tx, Vec::new()));
        entry.1.push((leg.amount, wallet_of(leg.wallet)));
    }
    report.payments = payments.len();
    let check = CHAIN_CHECKS[0].0;
    for (tx_id, (chain_tx, legs)) in payments {
        let (Some((debit, Some(from))), Some((credit, Some(to)))) = (
            legs.iter().find(|(amount, _)| *amount < 0).copied(),
            legs.iter().find(|(amount, _)| *amount > 0).copied(),
        ) else {
            report.findings.push(finding(
                check,
                format!("transaction {tx_id}: a leg has no wallet"),
            ));
            continue;
        };
        let Some(hash) = chain_tx.as_deref().and_then(|h| h.parse::<B256>().ok()) else {
            report.findings.push(finding(
                check,
                format!("transaction {tx_id}: no transfer hash"),
            ));
            continue;
        };
        match provider.get_transaction_receipt(hash).await? {
            Some(receipt) if receipt.status() => {
                if !moved(&receipt, token, from, to, U256::from(credit.unsigned_abs()))
                    || debit != -credit
                {
                    report.findings.push(finding(
                        check,
                        format!("transaction {tx_id}: {hash:#x} did not move {credit} from {from:#x} to {to:#x}"),
                    ));
                }
                let mined = receipt.block_number.unwrap_or_default();
                note(from, mined, debit);
                note(to, mined, credit);
            }
            Some(_) => report.findings.push(finding(
                check,
                format!("transaction {tx_id}: {hash:#x} reverted on chain"),
            )),
            None => report.findings.push(finding(
                check,
                format!("transaction {tx_id}: {hash:#x} is not on chain"),
            )),
        }
    }

    let holds = submitted_chain_holds(db).await?;
    // Each hold's EIP-3009 authorization, if it had one: recorded before its transfer was
    // submitted, so every hold read above with a transfer has its authorization here.
    let hold_ids: Vec<i64> = holds.iter().map(|hold| hold.id).collect();
    let authorizations: HashMap<i64, (String, String)> = sqlx::query!(
        "SELECT hold_id, from_wallet, nonce FROM chain_authorizations WHERE hold_id = ANY($1)",
        &hold_ids
    )
    .fetch_all(db)
    .await?
    .into_iter()
    .map(|row| (row.hold_id, (row.from_wallet, row.nonce)))
    .collect();
    for hold in holds {
        let id = hold.id;
        let state = hold.state;
        let amount = hold.amount;
        let hash: Option<B256> = hold.chain_tx.and_then(|h| h.parse().ok());
        let receipt = match hash {
            Some(hash) => provider.get_transaction_receipt(hash).await?,
            None => None,
        };
        let succeeded = receipt.as_ref().is_some_and(|r| r.status());
        if state == "held" {
            // Mined but not captured yet: the chain is ahead of the ledger by this much.
            if let (Some(receipt), true) = (&receipt, succeeded) {
                let mined = receipt.block_number.unwrap_or_default();
                if let Some(from) = wallet_of(hold.payer_wallet) {
                    note(from, mined, -amount);
                }
                if let Some(to) = wallet_of(hold.payee_wallet) {
                    note(to, mined, amount);
                }
            }
            continue;
        }
        let (from_wallet, nonce) = authorizations.get(&id).cloned().unzip();
        let ran = match (wallet_of(from_wallet), nonce) {
            (Some(authorizer), Some(nonce)) => {
                let nonce: B256 = nonce.parse().unwrap_or_default();
                let out = provider
                    .call(TransactionRequest::default().with_to(token).with_input(
                        IUsdc::authorizationStateCall { authorizer, nonce }.abi_encode(),
                    ))
                    .await?;
                IUsdc::authorizationStateCall::abi_decode_returns(&out)?
            }
            _ => succeeded,
        };
        if ran {
            report.findings.push(finding(
                CHAIN_CHECKS[1].0,
                format!("hold {id} was released but its transfer ran on chain"),
            ));
        }
    }

    // A cast of a NOT NULL column is never NULL; inference cannot tell.
    let baselines = sqlx::query!(
        r#"SELECT wallet, block_number, balance::text AS "balance!" FROM chain_wallet_baselines
           WHERE chain_id = $1 AND token = $2 ORDER BY wallet"#,
        chain_id as i64,
        wallet_text(token)
    )
    .fetch_all(db)
    .await?;
    let check = CHAIN_CHECKS[2].0;
    let mut baselined = Vec::new();
    for row in baselines {
        let wallet: Address = row.wallet.parse()?;
        let since = row.block_number as u64;
        let start: U256 = row.balance.parse()?;
        let now = balance_at(&provider, token, wallet, block).await?;
        let expected: I256 = deltas
            .get(&wallet)
            .into_iter()
            .flatten()
            .filter(|(mined, _)| *mined > since && *mined <= block)
            .map(|(_, amount)| *amount)
            .fold(I256::ZERO, |sum, amount| sum + amount);
        let actual = I256::from_raw(now) - I256::from_raw(start);
        if actual != expected {
            report.findings.push(finding(
                check,
                format!(
                    "{wallet:#x}: balance {start} at block {since}, {now} at block {block}: \
                     changed by {actual}, the ledger's chain entries by {expected}"
                ),
            ));
        }
        baselined.push(wallet);
    }
    for wallet in deltas.keys() {
        if !baselined.contains(wallet) {
            report.findings.push(finding(
                check,
                format!("{wallet:#x}: no balance baseline recorded"),
            ));
        }
    }
    report.wallets = baselined.len();
    Ok(report)
}
