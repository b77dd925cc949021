//! The load that runs through every drill, all of it through the proxy as a client would: posters
//! send scored groups (each with a marker of its own, retried until acknowledged), a trainer pulls
//! batches, payers pay through the ledger and watchers follow the run over WebSockets.
//!
//! Stopping is two-phase: no new work starts, but a poster or payer finishes what it began
//! (retrying until it is acknowledged), so at the end every group and payment begun is either
//! acknowledged or reported as given up.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::journal::{Activity, Failure, Journal};
use super::payments::{self, Payments};
use super::watchers::Watchers;
use crate::{group, markers};

/// Sequences per group; a batch of `BATCH_SIZE` sequences holds two groups.
pub const GROUP_SEQS: usize = 4;
pub const BATCH_SIZE: i64 = 8;
pub const RUN: &str = "drill";

const POSTERS: i64 = 3;
const PAYERS: usize = 2;
const WATCHERS: usize = 3;
/// A poster's pause between groups: enough load to catch requests in flight at every fault
/// without burying two cores.
const POST_PACE: Duration = Duration::from_millis(25);
/// After stop, how long a poster or payer keeps retrying what it began before giving up (and
/// the drill reports it).
pub const STOP_GRACE: Duration = Duration::from_secs(60);

/// An HTTP client for the workload: bounded requests, so one that hangs in an outage counts as
/// failed and is retried instead of stalling the drill.
pub fn http_client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .expect("an HTTP client")
}

/// A stop signal that remembers when it was given.
#[derive(Clone)]
pub struct Stop {
    rx: watch::Receiver<Option<Instant>>,
}

impl Stop {
    pub fn requested(&self) -> bool {
        self.rx.borrow().is_some()
    }

    /// True once the stop was requested more than `grace` ago.
    pub fn overdue(&self, grace: Duration) -> bool {
        self.rx.borrow().is_some_and(|at| at.elapsed() > grace)
    }

    pub async fn wait(&mut self) {
        let _ = self.rx.wait_for(Option::is_some).await;
    }
}

pub fn stop_pair() -> (watch::Sender<Option<Instant>>, Stop) {
    let (tx, rx) = watch::channel(None);
    (tx, Stop { rx })
}

/// Registers the run and makes the trainer's first `/batch` call, which starts it.
pub async fn start_run(http: &reqwest::Client, base: &str) -> anyhow::Result<()> {
    http.post(format!("{base}/runs/{RUN}/register"))
        .json(&crate::registration(BATCH_SIZE))
        .send()
        .await?
        .error_for_status()?;
    http.get(format!("{base}/runs/{RUN}/batch"))
        .send()
        .await?
        .error_for_status()?;
    Ok(())
}

/// Posts the group `marker` until a 2xx answer (true), or until `stop` is overdue (false).
pub async fn post_until_acked(
    http: &reqwest::Client,
    base: &str,
    marker: i64,
    journal: &Journal,
    stop: &Stop,
) -> bool {
    let mut backoff = Duration::from_millis(20);
    loop {
        journal.group_sent(marker);
        let answer = http
            .post(format!("{base}/runs/{RUN}/scored_data"))
            .json(&group(marker, GROUP_SEQS, None))
            .send()
            .await;
        let failure = match answer {
            Ok(resp) if resp.status().is_success() => match resp.json::<Value>().await {
                Ok(_) => {
                    journal.group_acked(marker);
                    return true;
                }
                Err(e) => Failure::of(&e),
            },
            Ok(resp) => Failure::of_status(&resp),
            Err(e) => Failure::of(&e),
        };
        journal.group_failed(marker, failure);
        if stop.overdue(STOP_GRACE) {
            return false;
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(Duration::from_millis(500));
    }
}

/// One `/batch` call: `Ok(Some(markers))` for a batch, `Ok(None)` when none is ready, `Err` when
/// the call failed (a batch may then have been handed out with its answer lost).
pub async fn pull_batch(http: &reqwest::Client, base: &str) -> Result<Option<Vec<i64>>, Failure> {
    let resp = http
        .get(format!("{base}/runs/{RUN}/batch"))
        .send()
        .await
        .map_err(|e| Failure::of(&e))?;
    if !resp.status().is_success() {
        return Err(Failure::of_status(&resp));
    }
    let batch: Value = resp.json().await.map_err(|e| Failure::of(&e))?;
    Ok((!batch["batch"].is_null()).then(|| markers(&batch)))
}

async fn poster(
    id: i64,
    http: reqwest::Client,
    base: String,
    journal: Arc<Journal>,
    stop: Stop,
    given_up: Arc<std::sync::atomic::AtomicU64>,
) {
    for i in 0.. {
        if stop.requested() {
            break;
        }
        let marker = (id + 1) * 1_000_000 + i;
        if !post_until_acked(&http, &base, marker, &journal, &stop).await {
            given_up.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            break;
        }
        tokio::time::sleep(POST_PACE).await;
    }
}

async fn trainer(http: reqwest::Client, base: String, journal: Arc<Journal>, stop: Stop) {
    let mut backoff = Duration::from_millis(20);
    while !stop.requested() {
        match pull_batch(&http, &base).await {
            Ok(Some(served)) => {
                journal.batch_served(&served);
                backoff = Duration::from_millis(20);
            }
            Ok(None) => tokio::time::sleep(Duration::from_millis(30)).await,
            Err(failure) => {
                journal.failed(Activity::Pull, failure);
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_millis(500));
            }
        }
    }
}

/// The running workload.
pub struct Workload {
    pub journal: Arc<Journal>,
    pub watchers: Watchers,
    pub payments: Payments,
    stop: watch::Sender<Option<Instant>>,
    tasks: Vec<JoinHandle<()>>,
    /// Groups and payments abandoned after `STOP_GRACE` past the stop.
    pub groups_given_up: Arc<std::sync::atomic::AtomicU64>,
    pub payments_given_up: Arc<std::sync::atomic::AtomicU64>,
}

impl Workload {
    /// Starts everything against `base` (the proxy) and `database_url` (the payers' ledger).
    pub async fn start(base: &str, ws_url: &str, database_url: &str) -> anyhow::Result<Self> {
        let journal = Arc::new(Journal::default());
        let (stop_tx, stop) = stop_pair();
        let groups_given_up = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let payments_given_up = Arc::new(std::sync::atomic::AtomicU64::new(0));
        // Watchers first, so the groups of the drill's first moments are followed.
        let watchers = Watchers::start(ws_url, RUN, WATCHERS).await?;
        let payments = Payments::setup(database_url).await?;
        let mut tasks = Vec::new();
        // A client (so a connection) per poster and for the trainer: the proxy spreads them over
        // the instances, so every instance carries part of the load when a fault hits it.
        for id in 0..POSTERS {
            tasks.push(tokio::spawn(poster(
                id,
                http_client(),
                base.to_string(),
                journal.clone(),
                stop.clone(),
                groups_given_up.clone(),
            )));
        }
        tasks.push(tokio::spawn(trainer(
            http_client(),
            base.to_string(),
            journal.clone(),
            stop.clone(),
        )));
        for id in 0..PAYERS {
            tasks.push(tokio::spawn(payments::payer(
                id,
                payments.clone(),
                journal.clone(),
                stop.clone(),
                payments_given_up.clone(),
            )));
        }
        Ok(Self {
            journal,
            watchers,
            payments,
            stop: stop_tx,
            tasks,
            groups_given_up,
            payments_given_up,
        })
    }

    /// Stops posting, pulling and paying (each finishing what it began); the watchers keep
    /// listening until the checks have drained the queue.
    pub async fn stop(&mut self) {
        let _ = self.stop.send(Some(Instant::now()));
        for task in self.tasks.drain(..) {
            let _ = task.await;
        }
    }
}
