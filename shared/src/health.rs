//! `GET /health/ready`'s answer: ready, or which checks failed (the status is 503 then).

use serde::{Deserialize, Serialize};

/// The readiness probe's body, sent with 200 when ready and 503 otherwise.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Readiness {
    /// Every check passed: a load balancer may route work here.
    pub ready: bool,
    /// Empty when ready.
    pub failed: Vec<ReadinessCheck>,
}

/// What must hold for an instance to take work.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReadinessCheck {
    /// Postgres answered a trivial query within `--ready-timeout-ms`.
    Database,
    /// This instance holds its ledger owner lock, so its payments are told apart from a crash's.
    LedgerOwner,
    /// SIGTERM arrived: the instance is draining and takes no new work.
    ShuttingDown,
}
