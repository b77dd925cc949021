//! EIP-3009 `transferWithAuthorization`, as x402's "exact" scheme uses it: the payer signs an
//! EIP-712 authorization (from, to, value, validity window, a random 32-byte nonce) and the
//! platform submits it, paying the gas. The contract runs each (from, nonce) once; Postgres
//! records every authorization (unique nonce) before it is submitted, so a replay is refused
//! before it costs gas, and one that reaches the chain anyway is refused there.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use alloy::primitives::{Address, B256, U256};
use alloy::signers::SignerSync;
use alloy::signers::local::PrivateKeySigner;
use alloy::sol_types::{Eip712Domain, SolCall, SolStruct};
use lachesis_shared::ledger::MicroUsdc;
use sqlx::PgPool;

use super::chain::{ChainSettler, IUsdc};
use super::config::wallet_text;
use super::submit::SendError;
use super::{Paid, SettleError};
use crate::ledger::{Ledger, LedgerError, Transfer};

alloy::sol! {
    /// The EIP-712 message FiatTokenV2 verifies (`TRANSFER_WITH_AUTHORIZATION_TYPEHASH`).
    struct TransferWithAuthorization {
        address from;
        address to;
        uint256 value;
        uint256 validAfter;
        uint256 validBefore;
        bytes32 nonce;
    }
}

/// A signed authorization: everything the platform needs to move `value` from `from` to `to`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignedAuthorization {
    pub from: Address,
    pub to: Address,
    pub value: U256,
    pub valid_after: u64,
    pub valid_before: u64,
    pub nonce: B256,
    /// r || s || v (v = 27 or 28).
    pub signature: [u8; 65],
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

impl SignedAuthorization {
    fn message(&self) -> TransferWithAuthorization {
        TransferWithAuthorization {
            from: self.from,
            to: self.to,
            value: self.value,
            validAfter: U256::from(self.valid_after),
            validBefore: U256::from(self.valid_before),
            nonce: self.nonce,
        }
    }

    /// Signs an authorization from `signer`'s address, valid from now for `validity`, under a
    /// fresh random nonce.
    pub fn sign(
        signer: &PrivateKeySigner,
        domain: &Eip712Domain,
        to: Address,
        value: U256,
        validity: Duration,
    ) -> Result<Self, alloy::signers::Error> {
        let mut auth = Self {
            from: signer.address(),
            to,
            value,
            valid_after: 0,
            valid_before: now_secs() + validity.as_secs().max(1),
            nonce: B256::from(rand::random::<[u8; 32]>()),
            signature: [0; 65],
        };
        let hash = auth.message().eip712_signing_hash(domain);
        auth.signature = signer.sign_hash_sync(&hash)?.as_bytes();
        Ok(auth)
    }

    /// Whether `from` signed exactly this (what the contract will check too).
    pub fn verify(&self, domain: &Eip712Domain) -> Result<(), SettleError> {
        let signature = alloy::primitives::Signature::from_raw_array(&self.signature)
            .map_err(|e| SettleError::InvalidAuthorization(format!("signature: {e}")))?;
        let hash = self.message().eip712_signing_hash(domain);
        match signature.recover_address_from_prehash(&hash) {
            Ok(signer) if signer == self.from => Ok(()),
            _ => Err(SettleError::InvalidAuthorization(
                "the signature is not the payer's".into(),
            )),
        }
    }

    /// `transferWithAuthorization(from, to, value, validAfter, validBefore, nonce, v, r, s)`.
    pub fn calldata(&self) -> Vec<u8> {
        // The signed message's fields, in the call's order, then the signature split.
        let m = self.message();
        let (v, r, s) = (
            self.signature[64],
            B256::from_slice(&self.signature[..32]),
            B256::from_slice(&self.signature[32..64]),
        );
        let args = (
            m.from,
            m.to,
            m.value,
            m.validAfter,
            m.validBefore,
            m.nonce,
            v,
            r,
            s,
        );
        IUsdc::transferWithAuthorizationCall::new(args).abi_encode()
    }
}

/// An authorization as recorded, with what became of it.
#[derive(Debug, Clone)]
pub struct RecordedAuthorization {
    pub auth: SignedAuthorization,
    pub state: String,
    pub tx_hashes: Vec<String>,
}

/// Records `auth` for `hold` before it is submitted. A nonce recorded before is a replay.
async fn record(
    db: &PgPool,
    chain_id: u64,
    token: Address,
    hold: i64,
    auth: &SignedAuthorization,
) -> Result<(), SettleError> {
    let result = sqlx::query(
        "INSERT INTO chain_authorizations
             (chain_id, token, nonce, hold_id, from_wallet, to_wallet, value, valid_after,
              valid_before, signature)
         VALUES ($1, $2, $3, $4, $5, $6, $7::numeric, $8, $9, $10)",
    )
    .bind(chain_id as i64)
    .bind(wallet_text(token))
    .bind(format!("{:#x}", auth.nonce))
    .bind(hold)
    .bind(wallet_text(auth.from))
    .bind(wallet_text(auth.to))
    .bind(auth.value.to_string())
    .bind(auth.valid_after as i64)
    .bind(auth.valid_before as i64)
    .bind(alloy::hex::encode_prefixed(auth.signature))
    .execute(db)
    .await;
    match result {
        Ok(_) => Ok(()),
        Err(sqlx::Error::Database(e))
            if e.constraint() == Some("chain_authorizations_nonce_unique") =>
        {
            Err(SettleError::AuthorizationReplayed(format!(
                "nonce {:#x} of {} was already used",
                auth.nonce,
                wallet_text(auth.from)
            )))
        }
        Err(e) => Err(LedgerError::from(e).into()),
    }
}

/// Appends a platform transaction carrying the hold's authorization.
pub(super) async fn note_submitted(
    db: &PgPool,
    hold: i64,
    tx_hash: &str,
) -> Result<(), LedgerError> {
    sqlx::query(
        "UPDATE chain_authorizations SET state = 'submitted', updated_at = now(),
             tx_hashes = array_append(tx_hashes, $2)
         WHERE hold_id = $1",
    )
    .bind(hold)
    .bind(tx_hash)
    .execute(db)
    .await?;
    Ok(())
}

/// Sets the state of the hold's authorization, if it has one.
pub(super) async fn mark(
    db: &PgPool,
    hold: i64,
    state: &str,
    error: Option<&str>,
) -> Result<(), LedgerError> {
    sqlx::query(
        "UPDATE chain_authorizations SET state = $2, error = coalesce($3, error), updated_at = now()
         WHERE hold_id = $1",
    )
    .bind(hold)
    .bind(state)
    .bind(error)
    .execute(db)
    .await?;
    Ok(())
}

/// The authorization recorded for a hold.
pub async fn for_hold(
    db: &PgPool,
    hold: i64,
) -> Result<Option<RecordedAuthorization>, LedgerError> {
    // A cast of a NOT NULL column is never NULL; inference cannot tell.
    let Some(row) = sqlx::query!(
        r#"SELECT from_wallet, to_wallet, value::text AS "value!", valid_after, valid_before,
                  nonce, signature, state, tx_hashes
           FROM chain_authorizations WHERE hold_id = $1"#,
        hold
    )
    .fetch_optional(db)
    .await?
    else {
        return Ok(None);
    };
    let bad = |what: &str| {
        LedgerError::Db(sqlx::Error::Protocol(format!(
            "chain_authorizations: bad {what}"
        )))
    };
    let signature: [u8; 65] = alloy::hex::decode(&row.signature)
        .ok()
        .and_then(|bytes| bytes.try_into().ok())
        .ok_or_else(|| bad("signature"))?;
    let auth = SignedAuthorization {
        from: row.from_wallet.parse().map_err(|_| bad("from"))?,
        to: row.to_wallet.parse().map_err(|_| bad("to"))?,
        value: row.value.parse().map_err(|_| bad("value"))?,
        valid_after: row.valid_after as u64,
        valid_before: row.valid_before as u64,
        nonce: row.nonce.parse().map_err(|_| bad("nonce"))?,
        signature,
    };
    Ok(Some(RecordedAuthorization {
        auth,
        state: row.state,
        tx_hashes: row.tx_hashes,
    }))
}

impl ChainSettler {
    /// Settles `transfer` with an authorization the payer signed elsewhere (an x402 client's
    /// `X-PAYMENT`): it must move exactly the transfer's amount between the accounts' wallets.
    pub async fn pay_with_authorization(
        &self,
        ledger: &Ledger,
        transfer: &Transfer<'_>,
        auth: &SignedAuthorization,
    ) -> Result<Paid, SettleError> {
        let (payer, payee) = self.wallets(ledger, transfer).await?;
        if auth.from != payer
            || auth.to != payee
            || auth.value != U256::from(super::token_units(transfer.amount))
        {
            return Err(SettleError::InvalidAuthorization(
                "the authorization does not match the payment's wallets and amount".into(),
            ));
        }
        auth.verify(&self.domain)?;
        let hold = ledger.hold(transfer, true).await?;
        if hold.replayed {
            return self.replayed(ledger, hold.id, hold.state).await;
        }
        self.in_flight
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(hold.id);
        let result = self
            .authorization_held(ledger, hold.id, transfer.amount, auth)
            .await;
        self.in_flight
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(&hold.id);
        result
    }

    /// Records, submits and settles an authorization for an open hold.
    pub(super) async fn authorization_held(
        &self,
        ledger: &Ledger,
        hold: i64,
        amount: MicroUsdc,
        auth: &SignedAuthorization,
    ) -> Result<Paid, SettleError> {
        let recorded = async {
            record(
                ledger.pool(),
                self.config.chain_id,
                self.config.usdc,
                hold,
                auth,
            )
            .await?;
            self.ensure_baselines(ledger, &[auth.from, auth.to]).await
        }
        .await;
        if let Err(e) = recorded {
            return self.fail(ledger, hold, e).await;
        }
        match self.submit_authorization(ledger, hold, amount, auth).await {
            Ok(hash) => self.finish(ledger, hold, hash).await,
            Err(SendError::NotSent(e)) => {
                mark(ledger.pool(), hold, "failed", Some(&e.to_string())).await?;
                self.fail(ledger, hold, e).await
            }
            Err(SendError::Unknown { hash, reason }) => self.left_open(hold, hash, reason),
        }
    }

    /// One platform transaction carrying the recorded authorization of `hold`.
    pub(super) async fn submit_authorization(
        &self,
        ledger: &Ledger,
        hold: i64,
        amount: MicroUsdc,
        auth: &SignedAuthorization,
    ) -> Result<alloy::primitives::B256, SendError> {
        let platform = self
            .platform
            .as_ref()
            .ok_or_else(|| {
                SendError::NotSent(SettleError::NoKey {
                    wallet: "the platform's submitter".into(),
                })
            })?
            .address();
        let request = self
            .prepare(platform, auth.calldata(), auth.from, amount)
            .await
            .map_err(SendError::NotSent)?;
        self.send(
            ledger,
            platform,
            request,
            super::submit::Record::Authorization { hold },
        )
        .await
    }

    /// Whether the contract has run (or cancelled) the authorization.
    pub(super) async fn authorization_used(
        &self,
        auth: &SignedAuthorization,
    ) -> Result<bool, SettleError> {
        use alloy::network::TransactionBuilder;
        use alloy::providers::Provider;
        let out = self
            .provider
            .call(
                alloy::rpc::types::TransactionRequest::default()
                    .with_to(self.config.usdc)
                    .with_input(
                        IUsdc::authorizationStateCall {
                            authorizer: auth.from,
                            nonce: auth.nonce,
                        }
                        .abi_encode(),
                    ),
            )
            .await
            .map_err(|e| SettleError::Rpc(e.to_string()))?;
        IUsdc::authorizationStateCall::abi_decode_returns(&out)
            .map_err(|e| SettleError::Rpc(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloy::sol_types::eip712_domain;
    use proptest::prelude::*;

    fn domain() -> Eip712Domain {
        eip712_domain! {
            name: "USD Coin",
            version: "2",
            chain_id: 8453,
            verifying_contract: super::super::config::BASE_USDC,
        }
    }

    #[test]
    fn the_typehash_is_circles() {
        // keccak256("TransferWithAuthorization(address from,address to,uint256 value,uint256
        // validAfter,uint256 validBefore,bytes32 nonce)"), FiatTokenV2's constant.
        assert_eq!(
            format!(
                "{:#x}",
                TransferWithAuthorization {
                    from: Address::ZERO,
                    to: Address::ZERO,
                    value: U256::ZERO,
                    validAfter: U256::ZERO,
                    validBefore: U256::ZERO,
                    nonce: B256::ZERO,
                }
                .eip712_type_hash()
            ),
            "0x7c7c6cdb67a18743f49ec6fa9b35f50d52ed05cbed4cc592e13b44501c1a2267"
        );
        assert_eq!(
            &IUsdc::transferWithAuthorizationCall::SELECTOR,
            &[0xe3, 0xee, 0x16, 0x0e]
        );
    }

    #[test]
    fn a_signed_authorization_verifies_and_a_tampered_one_does_not() {
        let payer = PrivateKeySigner::random();
        let to = Address::repeat_byte(7);
        let auth = SignedAuthorization::sign(
            &payer,
            &domain(),
            to,
            U256::from(1_500u64),
            Duration::from_secs(60),
        )
        .unwrap();
        assert_eq!(auth.from, payer.address());
        auth.verify(&domain()).unwrap();
        let mut more = auth.clone();
        more.value = U256::from(1_501u64);
        assert!(more.verify(&domain()).is_err());
        let mut elsewhere = domain();
        elsewhere.chain_id = Some(U256::from(84532u64));
        assert!(auth.verify(&elsewhere).is_err());
        let calldata = auth.calldata();
        assert_eq!(calldata.len(), 4 + 9 * 32);
        let decoded = IUsdc::transferWithAuthorizationCall::abi_decode(&calldata).unwrap();
        assert_eq!(
            (decoded.from, decoded.to, decoded.nonce),
            (auth.from, to, auth.nonce)
        );
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(24))]
        #[test]
        fn calldata_round_trips_for_any_authorization(
            value in any::<u64>(),
            valid_before in any::<u64>(),
            nonce in any::<[u8; 32]>(),
            signature in proptest::collection::vec(any::<u8>(), 65),
        ) {
            let auth = SignedAuthorization {
                from: Address::repeat_byte(1),
                to: Address::repeat_byte(2),
                value: U256::from(value),
                valid_after: 0,
                valid_before,
                nonce: B256::from(nonce),
                signature: signature.clone().try_into().unwrap(),
            };
            let decoded = IUsdc::transferWithAuthorizationCall::abi_decode(&auth.calldata()).unwrap();
            prop_assert_eq!(decoded.value, U256::from(value));
            prop_assert_eq!(decoded.validBefore, U256::from(valid_before));
            prop_assert_eq!(decoded.v, signature[64]);
            prop_assert_eq!(decoded.r.as_slice(), &signature[..32]);
            prop_assert_eq!(decoded.s.as_slice(), &signature[32..64]);
        }
    }
}
