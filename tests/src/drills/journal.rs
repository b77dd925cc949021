//! What the workload did, as the clients saw it: every group sent (when first, how many tries,
//! whether acknowledged), every group a batch served, every payment, and when requests failed.
//! The checks compare it with the database afterwards.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::time::Instant;

/// Which part of the workload a failed request belonged to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Activity {
    Ingest,
    Pull,
    Payment,
}

/// How a request failed, as the client saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Failure {
    /// The connection failed or closed before a whole answer arrived.
    Transport,
    /// No answer within the client's timeout.
    Timeout,
    /// An answer other than 2xx, and whether it said when to retry.
    Status { code: u16, retry_after: bool },
    /// The ledger returned an error (payments).
    Ledger,
}

impl Failure {
    pub fn of(error: &reqwest::Error) -> Self {
        if error.is_timeout() {
            Failure::Timeout
        } else {
            Failure::Transport
        }
    }

    pub fn of_status(resp: &reqwest::Response) -> Self {
        Failure::Status {
            code: resp.status().as_u16(),
            retry_after: resp.headers().contains_key(reqwest::header::RETRY_AFTER),
        }
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Transport => write!(f, "connection"),
            Failure::Timeout => write!(f, "timeout"),
            Failure::Status {
                code,
                retry_after: true,
            } => write!(f, "{code}+Retry-After"),
            Failure::Status { code, .. } => write!(f, "{code}"),
            Failure::Ledger => write!(f, "ledger error"),
        }
    }
}

/// "N (kind xM, ...)" for a list of failures.
pub fn describe(failures: &[Failure]) -> String {
    let mut counts = std::collections::BTreeMap::new();
    for failure in failures {
        *counts.entry(*failure).or_insert(0) += 1;
    }
    if counts.is_empty() {
        return "0".into();
    }
    let kinds: Vec<String> = counts.iter().map(|(k, n)| format!("{k} x{n}")).collect();
    format!("{} ({})", failures.len(), kinds.join(", "))
}

/// One marker's history. A failed attempt may still have been stored (the answer was lost, or
/// the server failed after its commit), so `failed` bounds how many extra copies may exist.
#[derive(Debug, Clone, Copy)]
pub struct MarkerLog {
    pub first_sent: Instant,
    pub attempts: u32,
    pub failed: u32,
    pub acked: bool,
}

#[derive(Default)]
struct Inner {
    markers: HashMap<i64, MarkerLog>,
    /// How many times `/batch` answers named each marker.
    served: HashMap<i64, u32>,
    batches: u64,
    /// Payment keys begun, and those the ledger confirmed.
    payments_begun: HashSet<String>,
    payments_confirmed: HashSet<String>,
    payment_replays: u64,
    failures: Vec<(Instant, Activity, Failure)>,
    ingest_acks: Vec<Instant>,
}

pub struct Journal {
    pub began: Instant,
    inner: Mutex<Inner>,
}

impl Default for Journal {
    fn default() -> Self {
        Self {
            began: Instant::now(),
            inner: Mutex::default(),
        }
    }
}

impl Journal {
    fn inner(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn group_sent(&self, marker: i64) {
        let now = Instant::now();
        self.inner()
            .markers
            .entry(marker)
            .or_insert(MarkerLog {
                first_sent: now,
                attempts: 0,
                failed: 0,
                acked: false,
            })
            .attempts += 1;
    }

    pub fn group_acked(&self, marker: i64) {
        let mut inner = self.inner();
        if let Some(log) = inner.markers.get_mut(&marker) {
            log.acked = true;
        }
        inner.ingest_acks.push(Instant::now());
    }

    pub fn group_failed(&self, marker: i64, failure: Failure) {
        let mut inner = self.inner();
        if let Some(log) = inner.markers.get_mut(&marker) {
            log.failed += 1;
        }
        inner
            .failures
            .push((Instant::now(), Activity::Ingest, failure));
    }

    pub fn batch_served(&self, markers: &[i64]) {
        let mut inner = self.inner();
        inner.batches += 1;
        for marker in markers {
            *inner.served.entry(*marker).or_default() += 1;
        }
    }

    pub fn failed(&self, activity: Activity, failure: Failure) {
        self.inner()
            .failures
            .push((Instant::now(), activity, failure));
    }

    pub fn payment_begun(&self, key: &str) {
        self.inner().payments_begun.insert(key.to_string());
    }

    pub fn payment_confirmed(&self, key: &str, replayed: bool) {
        let mut inner = self.inner();
        inner.payments_confirmed.insert(key.to_string());
        inner.payment_replays += u64::from(replayed);
    }

    pub fn markers(&self) -> HashMap<i64, MarkerLog> {
        self.inner().markers.clone()
    }

    pub fn served(&self) -> HashMap<i64, u32> {
        self.inner().served.clone()
    }

    pub fn batches(&self) -> u64 {
        self.inner().batches
    }

    /// (begun, confirmed, confirmed as replays of an earlier attempt).
    pub fn payments(&self) -> (HashSet<String>, HashSet<String>, u64) {
        let inner = self.inner();
        (
            inner.payments_begun.clone(),
            inner.payments_confirmed.clone(),
            inner.payment_replays,
        )
    }

    /// Failed requests of `activity` within `[from, to)`.
    pub fn failures_between(&self, activity: Activity, from: Instant, to: Instant) -> Vec<Failure> {
        self.inner()
            .failures
            .iter()
            .filter(|(at, a, _)| *a == activity && *at >= from && *at < to)
            .map(|(_, _, f)| *f)
            .collect()
    }

    pub fn failures_total(&self, activity: Activity) -> Vec<Failure> {
        self.inner()
            .failures
            .iter()
            .filter(|(_, a, _)| *a == activity)
            .map(|(_, _, f)| *f)
            .collect()
    }

    /// The first ingest acknowledged at or after `after`.
    pub fn first_ack_after(&self, after: Instant) -> Option<Instant> {
        self.inner()
            .ingest_acks
            .iter()
            .copied()
            .filter(|at| *at >= after)
            .min()
    }
}
