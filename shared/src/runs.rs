//! Read models of the run dashboards: what `GET /api/runs...` answers and what the live hub pushes.
//!
//! Times are Unix milliseconds (`at_ms`), so both sides handle them as plain integers.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// One row of `GET /api/runs`: the runs the caller may read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunSummary {
    /// The run's name, as in `/api/runs/{run}/...`.
    pub id: String,
    /// The owning team's name; `None` for runs created while authentication was off.
    pub team: Option<String>,
    /// Readable by anyone, signed in or not.
    pub public: bool,
    /// When the run was created, in milliseconds since the Unix epoch.
    pub created_at_ms: i64,
    /// Batches handed to the trainer so far, which is its step.
    pub current_step: i64,
    /// Scored groups waiting to be batched.
    pub queue_size: i64,
    /// Scored groups received since the run began (kept across `/reset_data`).
    pub groups: i64,
    /// When the latest group arrived, in milliseconds since the Unix epoch; `None`: no group yet.
    pub last_group_at_ms: Option<i64>,
    /// The environments that registered with the run.
    pub envs: Vec<EnvSummary>,
}

/// An environment registered with a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EnvSummary {
    /// The id the run gave the environment at registration; groups carry it.
    pub env_id: i64,
    /// The name it registered under.
    pub name: String,
    /// Sequences per group it sends.
    pub group_size: i64,
    /// Its share when batches mix environments, relative to the others' weights.
    pub weight: f64,
    /// Still registered: it has not called `/disconnect_env`.
    pub connected: bool,
}

/// A scored group as the dashboards see it: its numbers, not its tokens.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GroupSummary {
    /// Increases with arrival within a server's database; the table's row key.
    pub id: i64,
    /// The run it was posted to.
    pub run: String,
    /// The environment that sent it; `None` when the sender gave no `env_id`.
    pub env_id: Option<i64>,
    /// When the server stored it, in milliseconds since the Unix epoch.
    pub at_ms: i64,
    /// The policy weights' version that generated it, as the environment reported; `None`: not
    /// reported.
    pub weight_version: Option<i64>,
    /// One reward per sequence, as the environment scored it.
    pub scores: Vec<f64>,
    /// Each sequence's mean per-token advantage; `None`: the group carries no advantages.
    pub advantages: Option<Vec<f64>>,
    /// Tokens over all sequences of the group (prompt and completion).
    pub tokens: i64,
}

impl GroupSummary {
    /// The average of `scores`; `None` for an empty group.
    pub fn mean_score(&self) -> Option<f64> {
        (!self.scores.is_empty())
            .then(|| self.scores.iter().sum::<f64>() / self.scores.len() as f64)
    }

    /// The lowest score; `None` for an empty group.
    pub fn min_score(&self) -> Option<f64> {
        self.scores.iter().copied().reduce(f64::min)
    }

    /// The highest score; `None` for an empty group.
    pub fn max_score(&self) -> Option<f64> {
        self.scores.iter().copied().reduce(f64::max)
    }
}

/// A group with what its sequences said, for the rollout table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GroupDetail {
    /// The group's numbers.
    pub summary: GroupSummary,
    /// One entry per sequence: its chat messages when the environment sent them, else its tokens
    /// decoded by the server's tokenizer, else `None` (no tokenizer loaded, or the group's payload
    /// was removed by `/reset_data`).
    pub texts: Vec<Option<String>>,
}

/// The run's step and queue depth at one moment.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RunStatusPoint {
    /// When the server sampled it, in milliseconds since the Unix epoch.
    pub at_ms: i64,
    /// The run's `current_step` then.
    pub step: i64,
    /// Groups queued for batching then.
    pub queue_size: i64,
}

/// What a trainer reported for one step: `loss`, `kl`, `clip_fraction`, or any other number.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrainerPoint {
    /// When the server received the report, in milliseconds since the Unix epoch.
    pub at_ms: i64,
    /// The training step the numbers belong to.
    pub step: i64,
    /// Metric name to value, as the trainer sent them.
    pub values: BTreeMap<String, f64>,
}

/// `POST /runs/{run}/trainer-metrics`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrainerReport {
    /// The training step the numbers belong to.
    pub step: i64,
    /// Metric name (`loss`, `kl`, ...) to value; the dashboard draws one line per name.
    pub values: BTreeMap<String, f64>,
}

/// `GET /api/runs/{run}/metrics`: the history the dashboard draws before live events extend it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RunMetrics {
    /// Oldest first; at most the last `limit` groups.
    pub groups: Vec<GroupSummary>,
    /// The sampled step and queue depth, oldest first.
    pub status: Vec<RunStatusPoint>,
    /// The trainer's reports, oldest first.
    pub trainer: Vec<TrainerPoint>,
}
