//! Read models of the run dashboards: what `GET /api/runs...` answers and what the live hub pushes.
//!
//! Times are Unix milliseconds (`at_ms`), so both sides handle them as plain integers.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// One row of `GET /api/runs`: the runs the caller may read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunSummary {
    pub id: String,
    /// The owning team's name; `None` for runs created while authentication was off.
    pub team: Option<String>,
    /// Readable by anyone, signed in or not.
    pub public: bool,
    pub created_at_ms: i64,
    pub current_step: i64,
    pub queue_size: i64,
    /// Scored groups received since the run began (kept across `/reset_data`).
    pub groups: i64,
    pub last_group_at_ms: Option<i64>,
    pub envs: Vec<EnvSummary>,
}

/// An environment registered with a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EnvSummary {
    pub env_id: i64,
    pub name: String,
    pub group_size: i64,
    pub weight: f64,
    pub connected: bool,
}

/// A scored group as the dashboards see it: its numbers, not its tokens.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GroupSummary {
    /// Increases with arrival within a server's database; the table's row key.
    pub id: i64,
    pub run: String,
    pub env_id: Option<i64>,
    pub at_ms: i64,
    pub weight_version: Option<i64>,
    pub scores: Vec<f64>,
    pub advantages: Option<Vec<f64>>,
    /// Tokens over all sequences of the group (prompt and completion).
    pub tokens: i64,
}

impl GroupSummary {
    pub fn mean_score(&self) -> Option<f64> {
        (!self.scores.is_empty())
            .then(|| self.scores.iter().sum::<f64>() / self.scores.len() as f64)
    }

    pub fn min_score(&self) -> Option<f64> {
        self.scores.iter().copied().reduce(f64::min)
    }

    pub fn max_score(&self) -> Option<f64> {
        self.scores.iter().copied().reduce(f64::max)
    }
}

/// A group with what its sequences said, for the rollout table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GroupDetail {
    pub summary: GroupSummary,
    /// One entry per sequence: its chat messages when the environment sent them, else its tokens
    /// decoded by the server's tokenizer, else `None` (no tokenizer loaded, or the group's payload
    /// was removed by `/reset_data`).
    pub texts: Vec<Option<String>>,
}

/// The run's step and queue depth at one moment.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RunStatusPoint {
    pub at_ms: i64,
    pub step: i64,
    pub queue_size: i64,
}

/// What a trainer reported for one step: `loss`, `kl`, `clip_fraction`, or any other number.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrainerPoint {
    pub at_ms: i64,
    pub step: i64,
    pub values: BTreeMap<String, f64>,
}

/// `POST /runs/{run}/trainer-metrics`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrainerReport {
    pub step: i64,
    pub values: BTreeMap<String, f64>,
}

/// `GET /api/runs/{run}/metrics`: the history the dashboard draws before live events extend it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RunMetrics {
    /// Oldest first; at most the last `limit` groups.
    pub groups: Vec<GroupSummary>,
    pub status: Vec<RunStatusPoint>,
    pub trainer: Vec<TrainerPoint>,
}
