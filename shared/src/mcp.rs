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
