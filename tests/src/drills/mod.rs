//! Fault drills, in the manner of Jepsen and TigerBeetle's fault injection: several `lachesis
//! serve` processes on one private Postgres behind a round-robin proxy, a workload through the
//! proxy (ingest, batch pulls, ledger payments, WebSocket watchers), a fault injected under load,
//! then checks that nothing acknowledged was lost or doubled and that every watcher saw every
//! event or was told it lagged.
//!
//! - [`postgres`]: the drills' own cluster (they stop and restart it).
//! - [`fleet`]: the server processes, readiness probes, SIGKILL and SIGTERM.
//! - [`proxy`]: the round-robin TCP proxy.
//! - [`workload`], [`payments`], [`watchers`], [`journal`]: the load and what it saw.
//! - [`checks`]: the invariants.
//! - [`drill`]: one drill from start to report.
//!
//! `cargo test -p lachesis-tests --test drills` runs a short version of each drill;
//! `LACHESIS_DRILL_SECONDS=N` (what `make drills` sets) runs each for about N seconds, with the
//! fault repeated.

pub mod checks;
pub mod drill;
pub mod fleet;
pub mod journal;
pub mod payments;
pub mod postgres;
pub mod proxy;
pub mod watchers;
pub mod workload;

use std::time::Duration;

pub use drill::{Drill, Report, Stage};

/// How long the load runs around each fault, and how often the fault is repeated.
#[derive(Debug, Clone, Copy)]
pub struct Plan {
    /// Load before the first fault and after each one.
    pub phase: Duration,
    /// How many times a drill injects its fault.
    pub rounds: usize,
    /// How long a fault that is held (Postgres down) lasts: longer than the servers' wait for a
    /// pooled connection (5 s), so requests are refused during it, not merely delayed.
    pub outage: Duration,
}

impl Plan {
    /// The short CI plan, or the long one when `LACHESIS_DRILL_SECONDS` is set.
    pub fn from_env() -> Self {
        match std::env::var("LACHESIS_DRILL_SECONDS")
            .ok()
            .and_then(|s| s.parse::<u64>().ok())
        {
            Some(seconds) if seconds > 0 => Self {
                phase: Duration::from_secs(4),
                rounds: usize::try_from(seconds / 12).unwrap_or(1).max(1),
                outage: Duration::from_secs(8),
            },
            _ => Self {
                phase: Duration::from_millis(1500),
                rounds: 1,
                outage: Duration::from_secs(6),
            },
        }
    }
}

/// A random number for names (no `rand` dependency needed for that).
pub(crate) fn random_u64() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos(),
    );
    h.finish()
}

/// Seconds with one decimal, for the figures.
pub fn secs(d: Duration) -> String {
    format!("{:.2} s", d.as_secs_f64())
}
