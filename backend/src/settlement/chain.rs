//! Settlement on chain: a ledger hold, then a USDC transfer (an ERC-20 `transfer` from the payer's
//! wallet, or an EIP-3009 authorization the payer signs and the platform submits), then the
//! receipt, then the capture with the transfer's hash.
//!
//! The order of writes is what keeps the ledger consistent whatever fails: the signed transaction
//! (or authorization) and its hash are in Postgres before a byte goes to the RPC endpoint. So a
//! refusal releases the hold (nothing can move), a confirmed receipt captures it, and anything in
//! between (the endpoint dying mid-request, a receipt that does not come in time, a crash) leaves
//! the hold open with enough recorded for `recover.rs` to find out on chain what happened and to
//! finish it exactly once: a raw transaction rebroadcast keeps its nonce and hash, an
//! authorization resubmitted keeps its nonce, and the contract runs either at most once.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use alloy::eips::eip1559::Eip1559Estimation;
use alloy::network::{EthereumWallet, TransactionBuilder};
use alloy::primitives::{Address, B256, U256};
use alloy::providers::{DynProvider, Provider, ProviderBuilder};
use alloy::rpc::client::RpcClient;
use alloy::rpc::types::TransactionRequest;
use alloy::signers::local::PrivateKeySigner;
use alloy::sol_types::{Eip712Domain, SolCall};
use lachesis_shared::ledger::MicroUsdc;

use super::config::{ChainConfig, Scheme, wallet_text};
pub use super::submit::wait_receipt;
use super::submit::{Record, SendError};
use super::{Paid, SettleError};
use crate::ledger::queries::account_wallets;
use crate::ledger::{AccountId, HoldState, Ledger, Transfer};

alloy::sol! {
    /// The parts of Circle's FiatTokenV2_2 (USDC) that settlement uses.
    interface IUsdc {
        function name() external view returns (string);
        function version() external view returns (string);
        function balanceOf(address account) external view returns (uint256);
        function transfer(address to, uint256 value) external returns (bool);
        function authorizationState(address authorizer, bytes32 nonce) external view returns (bool);
        function transferWithAuthorization(
            address from, address to, uint256 value, uint256 validAfter, uint256 validBefore,
            bytes32 nonce, uint8 v, bytes32 r, bytes32 s) external;
        event Transfer(address indexed from, address indexed to, uint256 value);
        event AuthorizationUsed(address indexed authorizer, bytes32 indexed nonce);
    }
}

/// Settles payments as USDC transfers on one chain. Shared by the server's handlers.
pub struct ChainSettler {
    pub(super) config: ChainConfig,
    pub(super) provider: DynProvider,
    /// Every key this process holds, to sign transactions from the matching `from`.
    pub(super) wallet: Option<EthereumWallet>,
    /// Payer keys by wallet address.
    pub(super) payers: HashMap<Address, PrivateKeySigner>,
    /// Submits EIP-3009 authorizations (and pays their gas).
    pub(super) platform: Option<PrivateKeySigner>,
    /// The token's EIP-712 domain, read from the contract (`name()`, `version()`).
    pub(super) domain: Eip712Domain,
    /// Per sender: the next transaction nonce, when known. Holding the lock serializes one
    /// sender's submissions so nonces go out in order; an uncertain send forgets the nonce.
    pub(super) senders: Mutex<HashMap<Address, Arc<tokio::sync::Mutex<Option<u64>>>>>,
    /// Fee estimate reused for a moment (one `eth_feeHistory` per payment is wasted latency).
    pub(super) fees: Mutex<Option<(Instant, Eip1559Estimation)>>,
    /// Holds this process is settling right now: recovery leaves them alone.
    pub(super) in_flight: Mutex<HashSet<i64>>,
    /// Holds this process left open (outcome unknown), for `resolve_pending`.
    pub(super) unconfirmed: Mutex<BTreeSet<i64>>,
    /// Wallets whose balance baseline is recorded (see `reconcile_chain.rs`).
    baselines: Mutex<HashSet<Address>>,
}

impl std::fmt::Debug for ChainSettler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChainSettler")
            .field("network", &self.config.network)
            .field("chain_id", &self.config.chain_id)
            .field("usdc", &self.config.usdc)
            .field("scheme", &self.config.scheme)
            .field("payers", &self.payers.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

impl ChainSettler {
    /// Connects to the endpoint, checks its chain id and reads the token's EIP-712 domain.
    pub async fn connect(
        config: ChainConfig,
        payers: Vec<PrivateKeySigner>,
        platform: Option<PrivateKeySigner>,
    ) -> anyhow::Result<Self> {
        if config.scheme == Scheme::Eip3009 && platform.is_none() {
            anyhow::bail!(
                "the eip3009 scheme needs the platform's key to submit authorizations \
                 (LACHESIS_CHAIN_PLATFORM_KEY or LACHESIS_CHAIN_PLATFORM_KEYSTORE)"
            );
        }
        let url: alloy::transports::http::reqwest::Url = config
            .rpc_url
            .parse()
            .map_err(|e| anyhow::anyhow!("RPC URL {:?}: {e}", config.rpc_url))?;
        let http = alloy::transports::http::reqwest::Client::builder()
            .timeout(config.request_timeout)
            .build()?;
        let provider = ProviderBuilder::new()
            .disable_recommended_fillers()
            .connect_client(RpcClient::new_http_with_client(http, url))
            .erased();
        let chain_id = provider
            .get_chain_id()
            .await
            .map_err(|e| anyhow::anyhow!("cannot reach the chain at {}: {e}", config.rpc_url))?;
        anyhow::ensure!(
            chain_id == config.chain_id,
            "{} serves chain {chain_id}, not {} ({:?})",
            config.rpc_url,
            config.chain_id,
            config.network
        );
        let read = |data: Vec<u8>| {
            let provider = provider.clone();
            let to = config.usdc;
            async move {
                provider
                    .call(TransactionRequest::default().with_to(to).with_input(data))
                    .await
            }
        };
        let name = read(IUsdc::nameCall {}.abi_encode())
            .await
            .ok()
            .and_then(|out| IUsdc::nameCall::abi_decode_returns(&out).ok())
            .ok_or_else(|| {
                anyhow::anyhow!("no USDC contract at {} on chain {chain_id}", config.usdc)
            })?;
        let version = read(IUsdc::versionCall {}.abi_encode())
            .await
            .ok()
            .and_then(|out| IUsdc::versionCall::abi_decode_returns(&out).ok())
            .unwrap_or_else(|| "2".to_string());
        let domain = Eip712Domain::new(
            Some(name.into()),
            Some(version.into()),
            Some(U256::from(chain_id)),
            Some(config.usdc),
            None,
        );
        let mut wallet: Option<EthereumWallet> = None;
        for signer in payers.iter().chain(platform.iter()) {
            match &mut wallet {
                Some(wallet) => wallet.register_signer(signer.clone()),
                None => wallet = Some(EthereumWallet::new(signer.clone())),
            }
        }
        Ok(Self {
            payers: payers.into_iter().map(|s| (s.address(), s)).collect(),
            platform,
            wallet,
            domain,
            provider,
            config,
            senders: Mutex::default(),
            fees: Mutex::default(),
            in_flight: Mutex::default(),
            unconfirmed: Mutex::default(),
            baselines: Mutex::default(),
        })
    }

    /// The payer key's address when this process holds exactly one (lowercase, 0x-prefixed).
    pub fn sole_payer_wallet(&self) -> Option<String> {
        let mut payers = self.payers.keys();
        match (payers.next(), payers.next()) {
            (Some(only), None) => Some(wallet_text(*only)),
            _ => None,
        }
    }

    pub fn config(&self) -> &ChainConfig {
        &self.config
    }

    pub fn provider(&self) -> &DynProvider {
        &self.provider
    }

    /// The token's EIP-712 domain, for payers that sign their own authorizations.
    pub fn domain(&self) -> &Eip712Domain {
        &self.domain
    }

    /// The token balance of `wallet`, in base units (micro-USDC).
    pub async fn balance_of(&self, wallet: Address) -> Result<U256, SettleError> {
        let out = self
            .provider
            .call(
                TransactionRequest::default()
                    .with_to(self.config.usdc)
                    .with_input(IUsdc::balanceOfCall { account: wallet }.abi_encode()),
            )
            .await
            .map_err(|e| SettleError::Rpc(e.to_string()))?;
        IUsdc::balanceOfCall::abi_decode_returns(&out).map_err(|e| SettleError::Rpc(e.to_string()))
    }

    /// Pays `transfer` on chain under the configured scheme, with the payer's key.
    pub async fn pay(&self, ledger: &Ledger, transfer: &Transfer<'_>) -> Result<Paid, SettleError> {
        let (payer, payee) = self.wallets(ledger, transfer).await?;
        let signer = self
            .payers
            .get(&payer)
            .ok_or_else(|| SettleError::NoKey {
                wallet: wallet_text(payer),
            })?
            .clone();
        let hold = ledger.hold(transfer, true).await?;
        if hold.replayed {
            return self.replayed(ledger, hold.id, hold.state).await;
        }
        let _settling = InFlight::new(self, hold.id);
        match self.config.scheme {
            Scheme::Transfer => {
                self.transfer_held(ledger, hold.id, payer, payee, transfer.amount)
                    .await
            }
            Scheme::Eip3009 => {
                let auth = super::eip3009::SignedAuthorization::sign(
                    &signer,
                    &self.domain,
                    payee,
                    U256::from(super::token_units(transfer.amount)),
                    self.config.authorization_validity,
                )
                .map_err(|e| SettleError::InvalidAuthorization(e.to_string()));
                match auth {
                    Ok(auth) => {
                        self.authorization_held(ledger, hold.id, transfer.amount, &auth)
                            .await
                    }
                    Err(e) => {
                        ledger.release(hold.id, &e.to_string()).await?;
                        Err(e)
                    }
                }
            }
        }
    }

    /// The payer's and payee's wallets; an account without one cannot settle on chain.
    pub(super) async fn wallets(
        &self,
        ledger: &Ledger,
        transfer: &Transfer<'_>,
    ) -> Result<(Address, Address), SettleError> {
        let accounts = account_wallets(ledger.pool(), &[transfer.payer, transfer.payee])
            .await
            .map_err(crate::ledger::LedgerError::from)?;
        let wallet_of = |id: AccountId| -> Result<Address, SettleError> {
            let account = accounts
                .iter()
                .find(|account| account.id == id)
                .ok_or_else(|| {
                    SettleError::Ledger(crate::ledger::LedgerError::UnknownAccount(format!(
                        "#{}",
                        id.0
                    )))
                })?;
            account
                .wallet
                .as_deref()
                .and_then(|w| w.parse().ok())
                .ok_or_else(|| SettleError::NoWallet(account.name.clone()))
        };
        Ok((wallet_of(transfer.payer)?, wallet_of(transfer.payee)?))
    }

    /// A key seen before: the first payment's outcome, never a second transfer.
    pub(super) async fn replayed(
        &self,
        ledger: &Ledger,
        hold: i64,
        state: HoldState,
    ) -> Result<Paid, SettleError> {
        if state == HoldState::Held {
            let left_open = self
                .unconfirmed
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .contains(&hold);
            if left_open {
                // This process left it unconfirmed: settle it from the chain now.
                if let Err(e) = self.resolve_hold(ledger, hold).await {
                    tracing::warn!(hold, error = %e, "resolving a replayed chain hold");
                }
            } else {
                // Another attempt (here or in another process) is settling it: its outcome comes
                // within a receipt timeout. Never resolved from here, since that attempt may be
                // about to send.
                let deadline =
                    Instant::now() + self.config.receipt_timeout + Duration::from_secs(5);
                let mut state = state;
                while state == HoldState::Held && Instant::now() < deadline {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    state = ledger.hold_record(hold).await?.state;
                }
            }
        }
        let row = ledger.hold_record(hold).await?;
        match row.state {
            HoldState::Captured => Ok(Paid {
                tx_id: row.capture_tx.unwrap_or_default(),
                replayed: true,
                explorer_url: row
                    .chain_tx
                    .as_deref()
                    .and_then(|tx| self.config.network.explorer_tx_url(tx)),
                chain_tx: row.chain_tx,
            }),
            HoldState::Released => Err(SettleError::PreviouslyFailed {
                hold,
                reason: row.release_reason,
            }),
            HoldState::Held => Err(SettleError::InFlight { hold }),
        }
    }

    /// The ERC-20 transfer for an open hold, to its end (captured, released, or left unconfirmed).
    async fn transfer_held(
        &self,
        ledger: &Ledger,
        hold: i64,
        payer: Address,
        payee: Address,
        amount: MicroUsdc,
    ) -> Result<Paid, SettleError> {
        let value = U256::from(super::token_units(amount));
        let data = IUsdc::transferCall { to: payee, value }.abi_encode();
        let sent = async {
            self.ensure_baselines(ledger, &[payer, payee]).await?;
            self.prepare(payer, data, payer, amount).await
        }
        .await;
        let request = match sent {
            Ok(request) => request,
            Err(e) => return self.fail(ledger, hold, e).await,
        };
        match self
            .send(ledger, payer, request, Record::Transfer { hold })
            .await
        {
            Ok(hash) => self.finish(ledger, hold, hash).await,
            Err(SendError::NotSent(e)) => self.fail(ledger, hold, e).await,
            Err(SendError::Unknown { hash, reason }) => self.left_open(hold, hash, reason),
        }
    }

    /// Releases the hold for a payment that certainly moved nothing.
    pub(super) async fn fail(
        &self,
        ledger: &Ledger,
        hold: i64,
        error: SettleError,
    ) -> Result<Paid, SettleError> {
        ledger.release(hold, &error.to_string()).await?;
        Err(error)
    }

    /// The outcome is unknown: the hold stays open, recorded for recovery.
    pub(super) fn left_open(
        &self,
        hold: i64,
        hash: B256,
        reason: String,
    ) -> Result<Paid, SettleError> {
        self.unconfirmed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(hold);
        tracing::warn!(hold, tx = %hash, %reason, "chain payment unconfirmed; left for recovery");
        Err(SettleError::Unconfirmed {
            hold,
            tx_hash: format!("{hash:#x}"),
            reason,
        })
    }

    /// Awaits the receipt of a sent transaction and settles the hold by it.
    pub(super) async fn finish(
        &self,
        ledger: &Ledger,
        hold: i64,
        hash: B256,
    ) -> Result<Paid, SettleError> {
        match self.wait_receipt(hash, self.config.receipt_timeout).await {
            Ok(receipt) if receipt.status() => self.captured(ledger, hold, hash).await,
            Ok(_) => {
                let error = SettleError::Reverted {
                    tx_hash: Some(format!("{hash:#x}")),
                    reason: "the transaction reverted".into(),
                };
                super::eip3009::mark(ledger.pool(), hold, "failed", Some(&error.to_string()))
                    .await?;
                self.fail(ledger, hold, error).await
            }
            Err(reason) => self.left_open(hold, hash, reason),
        }
    }

    pub(super) async fn captured(
        &self,
        ledger: &Ledger,
        hold: i64,
        hash: B256,
    ) -> Result<Paid, SettleError> {
        let tx_hash = format!("{hash:#x}");
        let tx_id = ledger.capture(hold, Some(&tx_hash)).await?;
        super::eip3009::mark(ledger.pool(), hold, "confirmed", None).await?;
        self.unconfirmed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(&hold);
        Ok(Paid {
            tx_id,
            replayed: false,
            explorer_url: self.config.network.explorer_tx_url(&tx_hash),
            chain_tx: Some(tx_hash),
        })
    }

    /// Records the token balance of each wallet not seen before, at the current block, before
    /// the platform first moves money for it (`lachesis ledger reconcile --rpc-url` starts there).
    pub(super) async fn ensure_baselines(
        &self,
        ledger: &Ledger,
        wallets: &[Address],
    ) -> Result<(), SettleError> {
        for &wallet in wallets {
            if self
                .baselines
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .contains(&wallet)
            {
                continue;
            }
            super::reconcile_chain::record_baseline(
                ledger.pool(),
                &self.provider,
                self.config.chain_id,
                self.config.usdc,
                wallet,
            )
            .await?;
            self.baselines
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .insert(wallet);
        }
        Ok(())
    }
}

/// Marks a hold as being settled by this process for as long as it lives.
struct InFlight<'a> {
    settler: &'a ChainSettler,
    hold: i64,
}

impl<'a> InFlight<'a> {
    fn new(settler: &'a ChainSettler, hold: i64) -> Self {
        settler
            .in_flight
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(hold);
        Self { settler, hold }
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.settler
            .in_flight
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(&self.hold);
    }
}
