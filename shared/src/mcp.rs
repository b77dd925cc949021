//! What Lachesis's MCP server (`/mcp`) answers in each tool result's `structuredContent`. MCP asks
//! for an object there, so lists travel inside one; the run types are the dashboards' own.

use serde::{Deserialize, Serialize};

use crate::runs::{GroupDetail, RunMetrics, RunSummary};

/// The most groups `recent_groups` returns in one call (each carries its texts).
pub const MAX_RECENT_GROUPS: i64 = 50;
/// The most history points per series `run_metrics` returns in one call.
pub const MAX_METRIC_POINTS: i64 = 1_000;

/// What an environment needs from the server that hosts it, beyond a policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EnvNeeds {
    /// Nothing: it also runs from the CLI against any trajectory API.
    Nothing,
    /// The live 3D scene stream its showcase draws on.
    SceneStream,
    /// The live feed its showcase publishes episodes on.
    LiveFeed,
    /// The ledger, to pay its judges: it runs only inside `lachesis serve`.
    Ledger,
}

/// One built-in environment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EnvironmentEntry {
    /// The name `lachesis env run` and `--env` take.
    pub name: String,
    /// What it asks of the model and how it scores the answer.
    pub description: String,
    /// What it needs from the server.
    pub needs: EnvNeeds,
}

/// `list_environments`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EnvironmentList {
    /// The built-in environments, in the order the registry lists them.
    pub environments: Vec<EnvironmentEntry>,
}

/// `list_runs`: the runs the caller may read, newest first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunList {
    /// As `GET /api/runs` lists them for the same caller.
    pub runs: Vec<RunSummary>,
}

/// `run_metrics`: one run's summary and its recent history.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunMetricsReport {
    /// The run as `list_runs` shows it.
    pub run: RunSummary,
    /// Groups, status samples and trainer reports, oldest first, each at most `limit` long.
    pub metrics: RunMetrics,
}

/// `recent_groups`: a run's latest scored groups with their texts, newest first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecentGroups {
    /// The run they belong to.
    pub run: String,
    /// At most [`MAX_RECENT_GROUPS`].
    pub groups: Vec<GroupDetail>,
}

/// The `structuredContent` of a tool result with `isError: true`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolError {
    /// `not_found`, `invalid`, `forbidden` or `unavailable`.
    pub error: String,
    /// For people.
    pub message: String,
}

/// The most evaluation samples kept and returned (the first ones, in the evaluation set's order).
pub const MAX_EVALUATION_SAMPLES: usize = 16;

/// Where an evaluation stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EvaluationStatus {
    /// Started and not finished.
    Running,
    /// Finished: the metrics and samples are in.
    Done,
    /// Stopped by an error, by its time limit, or by the end of the process running it.
    Failed,
}

/// `start_evaluation` and `evaluation`: one run of an environment's evaluation set against the
/// server's embedded model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EvaluationView {
    /// What `evaluation` takes to look it up.
    pub id: i64,
    /// The environment evaluated.
    pub environment: String,
    /// Where it stands.
    pub status: EvaluationStatus,
    /// The environment's evaluation metrics (as `metrics.json`'s `results`), once done.
    pub metrics: std::collections::BTreeMap<String, f64>,
    /// The first [`MAX_EVALUATION_SAMPLES`] samples, once done.
    pub samples: Vec<serde_json::Value>,
    /// Why it failed.
    pub error: Option<String>,
    /// Seconds since it started, or that it ran.
    pub seconds: f64,
}
