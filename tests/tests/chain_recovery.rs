//! On-chain settlement failing and recovering, against a real chain: each test starts its own
//! anvil with Circle's FiatTokenV2_2 and a fresh Postgres database. The RPC endpoint down before
//! anything is sent; the RPC endpoint failing mid-payment (through a proxy that loses the request
//! or the answer); a lost transfer whose nonce was reused; a receipt that does not come in time;
//! a process dying with a payment in flight, each settled exactly once by recovery;
//! `lachesis ledger reconcile --rpc-url` catching money the ledger has not seen; and the server,
//! configured from flags and keys in the environment, settling an open payment as it starts.
//! The shared world is `lachesis_tests::chain_world`; `scripts/ensure-tools.sh` installs the npm
//! packages.

use std::sync::Arc;
use std::time::{Duration, Instant};

use alloy::primitives::U256;
use lachesis::ledger::Ledger;
use lachesis::settlement::recover::Resolution;
use lachesis::settlement::{ChainSettler, Scheme, SettleError, Settler};
use lachesis_tests::chain_world::{Fault, FlakyRpc, USDC, start_chain, world, world_on};
use lachesis_tests::{fresh_database, lachesis_bin};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_rpc_down_before_anything_is_sent_releases_the_hold() {
    let w = world(10 * USDC, 10 * USDC).await;
    for scheme in [Scheme::Transfer, Scheme::Eip3009] {
        let proxy = FlakyRpc::start(w.chain.port).await;
        let settler = w.settler_via(scheme, &proxy.url()).await;
        proxy.go_down();
        let key = format!("down-{scheme:?}");
        let error = settler
            .pay(&w.ledger, &w.transfer(&key, USDC))
            .await
            .unwrap_err();
        assert!(matches!(error, SettleError::Rpc(_)), "{error}");
        assert_eq!(w.hold_state(&key).await, "released");
    }
    assert_eq!(w.available(w.budget).await, 10 * USDC as i64);
    assert_eq!(w.chain_balance(w.payee_wallet).await, 0);
    w.assert_reconciles().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rpc_dying_mid_payment_leaves_the_hold_and_recovery_settles_it_once() {
    let w = world(20 * USDC, 20 * USDC).await;
    let mut moved = 0;
    for scheme in [Scheme::Transfer, Scheme::Eip3009] {
        for fault in [Fault::LoseResponse, Fault::LoseRequest] {
            let mut proxy = FlakyRpc::start(w.chain.port).await;
            let settler = w.settler_via(scheme, &proxy.url()).await;
            proxy.arm(fault);
            let key = format!("{scheme:?}-{fault:?}");
            let error = settler
                .pay(&w.ledger, &w.transfer(&key, USDC))
                .await
                .unwrap_err();
            let SettleError::Unconfirmed { hold, .. } = error else {
                panic!("{scheme:?} {fault:?}: {error}");
            };
            // Held, not charged, and consistent while the endpoint is down.
            assert_eq!(w.hold_state(&key).await, "held", "{scheme:?} {fault:?}");
            assert_eq!(
                w.available(w.budget).await,
                20_000_000 - moved - USDC as i64
            );
            let ledger_report = lachesis::ledger::reconcile::reconcile(&w.db).await.unwrap();
            assert!(ledger_report.is_balanced(), "{ledger_report}");
            // Still down: recovery leaves it.
            let report = settler.resolve_pending(&w.ledger).await.unwrap();
            assert_eq!(report.pending, vec![hold], "{scheme:?} {fault:?}");

            proxy.come_back().await;
            let report = settler.resolve_pending(&w.ledger).await.unwrap();
            assert_eq!(report.captured, 1, "{scheme:?} {fault:?}: {report:?}");
            moved += USDC as i64;
            assert_eq!(w.hold_state(&key).await, "captured");
            assert_eq!(
                w.chain_balance(w.payee_wallet).await,
                moved as u64,
                "moved exactly once"
            );
            // The key is paid: asking again replays it.
            let again = settler
                .pay(&w.ledger, &w.transfer(&key, USDC))
                .await
                .unwrap();
            assert!(again.replayed);
            proxy.go_down();
        }
    }
    assert_eq!(w.available(w.card).await, moved);
    w.assert_reconciles().await;
    let (ok, out) = w.reconcile_cli();
    assert!(ok, "{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_transfer_whose_nonce_was_reused_is_released_not_charged() {
    let w = world(10 * USDC, 10 * USDC).await;
    let mut proxy = FlakyRpc::start(w.chain.port).await;
    let settler = w.settler_via(Scheme::Transfer, &proxy.url()).await;
    proxy.arm(Fault::LoseRequest);
    let error = settler
        .pay(&w.ledger, &w.transfer("lost", USDC))
        .await
        .unwrap_err();
    let SettleError::Unconfirmed { hold, .. } = error else {
        panic!("{error}")
    };
    proxy.come_back().await;
    // The next payment takes the lost one's nonce, so the lost one can never be mined.
    settler
        .pay(&w.ledger, &w.transfer("next", 2 * USDC))
        .await
        .unwrap();
    assert_eq!(
        settler.resolve_hold(&w.ledger, hold).await.unwrap(),
        Resolution::Released {
            reason: "its nonce was used by another transaction: it can never be mined".into()
        }
    );
    assert_eq!(w.chain_balance(w.payee_wallet).await, 2 * USDC);
    assert_eq!(w.available(w.budget).await, 8 * USDC as i64);
    w.assert_reconciles().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_receipt_that_does_not_come_in_time_leaves_the_hold_until_it_does() {
    let w = world(10 * USDC, 10 * USDC).await;
    for scheme in [Scheme::Transfer, Scheme::Eip3009] {
        let mut config = w.config(scheme, &w.chain.url);
        config.receipt_timeout = Duration::from_millis(500);
        let settler =
            ChainSettler::connect(config, vec![w.agent.clone()], Some(w.platform.clone()))
                .await
                .unwrap();
        w.chain.set_automine(false).await.unwrap();
        let key = format!("slow-{scheme:?}");
        let error = settler
            .pay(&w.ledger, &w.transfer(&key, USDC))
            .await
            .unwrap_err();
        assert!(matches!(error, SettleError::Unconfirmed { .. }), "{error}");
        assert_eq!(w.hold_state(&key).await, "held");
        w.chain.mine().await.unwrap();
        w.chain.set_automine(true).await.unwrap();
        let report = settler.resolve_pending(&w.ledger).await.unwrap();
        assert_eq!(report.captured, 1, "{report:?}");
        assert_eq!(w.hold_state(&key).await, "captured");
    }
    assert_eq!(w.chain_balance(w.payee_wallet).await, 2 * USDC);
    w.assert_reconciles().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_process_payment_is_settled_from_the_chain_by_the_next_one() {
    let w = world(10 * USDC, 10 * USDC).await;
    let proxy = FlakyRpc::start(w.chain.port).await;
    {
        // The first process: its answer is lost, then it dies (its owner lock goes with it).
        let ledger = Ledger::with_owner(w.db.clone()).await.unwrap();
        let settler = w.settler_via(Scheme::Eip3009, &proxy.url()).await;
        proxy.arm(Fault::LoseResponse);
        let error = settler
            .pay(&ledger, &w.transfer("crash", USDC))
            .await
            .unwrap_err();
        assert!(matches!(error, SettleError::Unconfirmed { .. }), "{error}");
    }
    assert_eq!(w.hold_state("crash").await, "held");
    // The next process, straight to the chain.
    let ledger = Ledger::with_owner(w.db.clone()).await.unwrap();
    let settler = Settler::Chain(Arc::new(w.settler(Scheme::Eip3009).await));
    let report = settler.resolve_pending(&ledger).await.unwrap();
    assert_eq!(report.captured, 1, "{report:?}");
    assert_eq!(w.hold_state("crash").await, "captured");
    assert_eq!(w.chain_balance(w.payee_wallet).await, USDC);
    w.assert_reconciles().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reconcile_catches_chain_money_the_ledger_has_not_seen() {
    let w = world(10 * USDC, 10 * USDC).await;
    let settler = w.settler(Scheme::Transfer).await;
    settler
        .pay(&w.ledger, &w.transfer("pay", USDC))
        .await
        .unwrap();
    w.assert_reconciles().await;
    // Money arrives in the agent's wallet outside the platform.
    w.chain
        .mint(w.agent.address(), U256::from(5 * USDC))
        .await
        .unwrap();
    let (ok, out) = w.reconcile_cli();
    assert!(!ok, "{out}");
    assert!(out.contains("FAILED  wallet_balances_match"), "{out}");
    assert!(out.contains("changed by 4000000"), "{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_settles_on_chain_from_flags_and_keys_in_the_environment() {
    let chain = start_chain().await;
    let url = fresh_database().await;
    let db = lachesis::db::connect(&url, 10).await.unwrap();
    lachesis::db::migrate(&db).await.unwrap();
    let w = world_on(chain, db, url, 10 * USDC, 10 * USDC).await;
    // A payment left open by a process that died, for the server to settle as it starts.
    let proxy = FlakyRpc::start(w.chain.port).await;
    {
        let ledger = Ledger::with_owner(w.db.clone()).await.unwrap();
        let settler = w.settler_via(Scheme::Eip3009, &proxy.url()).await;
        proxy.arm(Fault::LoseRequest);
        let error = settler
            .pay(&ledger, &w.transfer("crash", USDC))
            .await
            .unwrap_err();
        assert!(matches!(error, SettleError::Unconfirmed { .. }), "{error}");
    }
    let mut server = tokio::process::Command::new(lachesis_bin())
        .args([
            "serve",
            "--host",
            "127.0.0.1",
            "--port",
            "0",
            "--no-embedded-model",
        ])
        .args([
            "--settlement",
            "chain",
            "--chain",
            "local",
            "--chain-scheme",
            "eip3009",
        ])
        .args([
            "--chain-id",
            &w.chain.chain_id.to_string(),
            "--rpc-url",
            &w.chain.url,
        ])
        .env("DATABASE_URL", &w.url)
        .env(
            "LACHESIS_CHAIN_AGENT_KEYS",
            format!("{}", w.agent.to_bytes()),
        )
        .env(
            "LACHESIS_CHAIN_PLATFORM_KEY",
            format!("{}", w.platform.to_bytes()),
        )
        .env_remove("LACHESIS_API_TOKEN")
        .stdout(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while w.hold_state("crash").await == "held" {
        assert!(
            Instant::now() < deadline,
            "the server did not settle the open hold"
        );
        assert!(server.try_wait().unwrap().is_none(), "the server exited");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(w.hold_state("crash").await, "captured");
    assert_eq!(w.chain_balance(w.payee_wallet).await, USDC);
    server.start_kill().unwrap();
    w.assert_reconciles().await;
}
