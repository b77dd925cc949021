//! The tools: what a caller may read through MCP, each answered from the same queries and with the
//! same reach checks as the dashboards' HTTP routes, so MCP shows a caller nothing `GET /api/runs`
//! would not.

use axum::http::request::Parts;
use lachesis_shared::mcp::{
    EnvNeeds, EnvironmentEntry, EnvironmentList, MAX_METRIC_POINTS, MAX_RECENT_GROUPS,
    RecentGroups, RunList, RunMetricsReport, ToolError,
};
use lachesis_shared::runs::RunMetrics;
use rmcp::handler::server::common::{AsRequestContext, Extension, FromContextPart};
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResult, Implementation, ServerCapabilities, ServerConfig};
use rmcp::{ErrorData, ServerHandler, tool, tool_handler, tool_router};
use serde::{Deserialize, Serialize};

use crate::app::{AppError, AppState};
use crate::auth::Viewer;
use crate::auth::store::{TeamReach, team_reach};
use crate::dashboard::store;
use crate::envs::registry::{REGISTRY, ServerNeeds};

/// History points per series when `run_metrics` is asked for no `limit`: enough for a trend, small
/// enough for a model's context.
const DEFAULT_METRIC_POINTS: i64 = 100;
/// Groups when `recent_groups` is asked for no `limit`.
const DEFAULT_RECENT_GROUPS: i64 = 10;

/// Every tool's name, sorted: what `tools/list` answers.
pub const TOOL_NAMES: [&str; 7] = [
    "arena_leaderboard",
    "evaluation",
    "list_environments",
    "list_runs",
    "recent_groups",
    "run_metrics",
    "start_evaluation",
];

/// One MCP session's handler; the caller is read from each request, never kept from the first.
#[derive(Clone)]
pub struct LachesisMcp {
    state: AppState,
    tool_router: ToolRouter<Self>,
}

/// The arguments of `run_metrics` and `recent_groups`: a run, and how much of its history.
#[derive(Debug, Deserialize, Serialize, rmcp::schemars::JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
#[serde(deny_unknown_fields)]
pub struct RunWindowArgs {
    /// The run's name, as `list_runs` shows it.
    pub run: String,
    /// `run_metrics`: the most points per series (groups, status samples, trainer reports), 1 to
    /// 1000, 100 when absent. `recent_groups`: how many of the newest groups, 1 to 50, 10 when
    /// absent.
    #[serde(default)]
    pub limit: Option<i64>,
}

/// `arena_leaderboard`'s arguments.
#[derive(Debug, Deserialize, Serialize, rmcp::schemars::JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
#[serde(deny_unknown_fields)]
pub struct LeaderboardArgs {
    /// The arena: `catbot` (the default).
    #[serde(default)]
    pub arena: Option<String>,
    /// Hold answer length fixed (length as a covariate): ratings of what was said, not how much.
    #[serde(default)]
    pub style_control: bool,
}

/// `start_evaluation`'s arguments.
#[derive(Debug, Deserialize, Serialize, rmcp::schemars::JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
#[serde(deny_unknown_fields)]
pub struct StartEvaluationArgs {
    /// The environment, as `list_environments` names it.
    pub environment: String,
    /// How many items of its evaluation set: 1 to 64 (the environment's own size when absent,
    /// for those that take one).
    #[serde(default)]
    pub eval_size: Option<usize>,
}

/// `evaluation`'s arguments.
#[derive(Debug, Deserialize, Serialize, rmcp::schemars::JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
#[serde(deny_unknown_fields)]
pub struct EvaluationArgs {
    /// The id `start_evaluation` answered.
    pub id: i64,
}

impl LachesisMcp {
    pub fn new(state: AppState) -> Self {
        Self {
            state,
            tool_router: Self::tool_router(),
        }
    }
}

#[tool_router]
impl LachesisMcp {
    #[tool(
        description = "The built-in RL environments: name, what they ask of the model and how \
                       they score it, and what they need from the server.",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn list_environments(&self) -> Result<CallToolResult, ErrorData> {
        let environments = REGISTRY
            .iter()
            .map(|env| EnvironmentEntry {
                name: env.name.to_string(),
                description: env.description.to_string(),
                needs: match env.needs {
                    ServerNeeds::Nothing => EnvNeeds::Nothing,
                    ServerNeeds::SceneStream => EnvNeeds::SceneStream,
                    ServerNeeds::LiveFeed => EnvNeeds::LiveFeed,
                    ServerNeeds::Ledger => EnvNeeds::Ledger,
                },
            })
            .collect();
        structured(&EnvironmentList { environments })
    }

    #[tool(
        description = "The training runs you may read (your team's, and public ones), newest \
                       first: step, queue, groups received and the environments connected.",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn list_runs(&self, Caller(viewer): Caller) -> Result<CallToolResult, ErrorData> {
        answer(self.runs(&viewer).await)
    }

    #[tool(
        description = "A run's summary and recent history, oldest first: each group's scores, \
                       the sampled step and queue depth, and the trainer's reported metrics \
                       (loss, kl, ...).",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn run_metrics(
        &self,
        Caller(viewer): Caller,
        Parameters(args): Parameters<RunWindowArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        answer(self.metrics(&viewer, args).await)
    }

    #[tool(
        description = "A run's newest scored groups, newest first: scores, advantages, tokens and \
                       what each sequence said.",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn recent_groups(
        &self,
        Caller(viewer): Caller,
        Parameters(args): Parameters<RunWindowArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        answer(self.groups(&viewer, args).await)
    }

    #[tool(
        description = "An arena's public leaderboard: each contender's Bradley-Terry rating with \
                       its 95% bootstrap interval, its plausible ranks (a single rank only where \
                       the intervals separate it), counted and excluded votes, and observed win \
                       rates.",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn arena_leaderboard(
        &self,
        Parameters(args): Parameters<LeaderboardArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        let name = args.arena.as_deref().unwrap_or("catbot");
        let Some(arena) = lachesis_shared::arena::ArenaKind::parse(name) else {
            let shown: String = name.chars().take(40).collect();
            return answer::<()>(Err(AppError::Invalid(format!("no arena named {shown:?}"))));
        };
        let board = crate::arena::routes::board_of(&self.state, arena, args.style_control).await;
        answer(board.map(|fitted| fitted.view.clone()))
    }

    #[tool(
        description = "Starts one run of an environment's evaluation set against the server's                        model and answers its id at once; read the outcome with `evaluation`.                        Needs a token with the inference scope; one running per caller.",
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = false,
            open_world_hint = false
        )
    )]
    async fn start_evaluation(
        &self,
        Caller(viewer): Caller,
        Parameters(args): Parameters<StartEvaluationArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        answer(
            crate::evaluations::start(&self.state, &viewer, &args.environment, args.eval_size)
                .await,
        )
    }

    #[tool(
        description = "An evaluation `start_evaluation` began (yours or your team's): running,                        done with the environment's metrics and its first samples, or failed                        with the reason.",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn evaluation(
        &self,
        Caller(viewer): Caller,
        Parameters(args): Parameters<EvaluationArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        answer(crate::evaluations::get(&self.state, &viewer, args.id).await)
    }
}

impl LachesisMcp {
    /// As `GET /api/runs` answers the same caller: its teams' runs (its one run, for a run-scoped
    /// token) and public ones.
    async fn runs(&self, viewer: &Viewer) -> Result<RunList, AppError> {
        let seen = team_reach(&self.state.db, viewer).await?;
        Ok(RunList {
            runs: store::runs(&self.state.db, &seen, None).await?,
        })
    }

    /// The limit within its bounds, once the viewer may read the run.
    async fn window_limit(
        &self,
        viewer: &Viewer,
        args: &RunWindowArgs,
        (default, max): (i64, i64),
    ) -> Result<i64, AppError> {
        let limit = bounded(args.limit, default, max)?;
        crate::dashboard::readable_run(&self.state, viewer, &args.run).await?;
        Ok(limit)
    }

    async fn metrics(
        &self,
        viewer: &Viewer,
        args: RunWindowArgs,
    ) -> Result<RunMetricsReport, AppError> {
        let state = &self.state;
        let run = &args.run;
        let limit = self
            .window_limit(viewer, &args, (DEFAULT_METRIC_POINTS, MAX_METRIC_POINTS))
            .await?;
        let summary = store::runs(&state.db, &TeamReach::All, Some(run))
            .await?
            .pop()
            .ok_or(AppError::NotFound("run"))?;
        let mut groups = store::latest_groups(&state.db, run, None, None, limit).await?;
        groups.reverse();
        Ok(RunMetricsReport {
            run: summary,
            metrics: RunMetrics {
                groups,
                status: store::status_points(&state.db, run, limit).await?,
                trainer: store::trainer_points(&state.db, run, limit).await?,
            },
        })
    }

    async fn groups(&self, viewer: &Viewer, args: RunWindowArgs) -> Result<RecentGroups, AppError> {
        let state = &self.state;
        let run = &args.run;
        let limit = self
            .window_limit(viewer, &args, (DEFAULT_RECENT_GROUPS, MAX_RECENT_GROUPS))
            .await?;
        let summaries = store::latest_groups(&state.db, run, None, None, limit).await?;
        Ok(RecentGroups {
            run: run.clone(),
            groups: crate::dashboard::with_texts(state, summaries).await?,
        })
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for LachesisMcp {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("lachesis", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "Lachesis hosts RL environments for language models. Read-only tools: \
                 list_environments, list_runs, then run_metrics and recent_groups for a run \
                 list_runs named; arena_leaderboard for an arena's ratings. start_evaluation \
                 runs an environment's evaluation set on the server's model (a token with the \
                 inference scope), and evaluation reads its outcome.",
            )
    }
}

/// A tool's caller: the one `super::require_caller` identified for this HTTP request. Missing
/// only if the service were mounted without that middleware: refused rather than served as anyone.
struct Caller(Viewer);

impl<C: AsRequestContext> FromContextPart<C> for Caller {
    fn from_context_part(context: &mut C) -> Result<Self, ErrorData> {
        let Extension(parts) = Extension::<Parts>::from_context_part(context)?;
        parts
            .extensions
            .get::<Viewer>()
            .cloned()
            .map(Caller)
            .ok_or_else(|| ErrorData::internal_error("the MCP caller was not identified", None))
    }
}

/// `limit` within 1..=`max`, `default` when absent.
fn bounded(limit: Option<i64>, default: i64, max: i64) -> Result<i64, AppError> {
    match limit {
        None => Ok(default),
        Some(n) if (1..=max).contains(&n) => Ok(n),
        Some(n) => Err(AppError::Invalid(format!(
            "limit must be 1 to {max}, got {n}"
        ))),
    }
}

/// A tool's answer: its value as `structuredContent`, or what went wrong as a tool error the
/// caller's model can read (a run it may not see is "not found", as over HTTP). A database that
/// fails is a protocol error, its details logged and not shown.
fn answer<T: Serialize>(outcome: Result<T, AppError>) -> Result<CallToolResult, ErrorData> {
    let error = match outcome {
        Ok(value) => return structured(&value),
        Err(e) => e,
    };
    let kind = match &error {
        AppError::NotFound(_) => "not_found",
        AppError::Invalid(_) => "invalid",
        AppError::Forbidden(_) | AppError::NotSignedIn => "forbidden",
        AppError::Conflict(_) => "conflict",
        AppError::Busy { .. } => "busy",
        AppError::Database(e) if crate::db::is_unavailable(e) => "unavailable",
        AppError::Database(e) => {
            tracing::error!(error = %e, "MCP tool: database error");
            return Err(ErrorData::internal_error("database error", None));
        }
        other => {
            tracing::error!(error = %other, "MCP tool failed");
            return Err(ErrorData::internal_error("internal error", None));
        }
    };
    let body = ToolError {
        error: kind.to_string(),
        message: error.to_string(),
    };
    let value =
        serde_json::to_value(&body).map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
    Ok(CallToolResult::structured_error(value))
}

fn structured<T: Serialize>(value: &T) -> Result<CallToolResult, ErrorData> {
    serde_json::to_value(value)
        .map(CallToolResult::structured)
        .map_err(|e| ErrorData::internal_error(e.to_string(), None))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_are_bounded_and_defaulted() {
        assert_eq!(bounded(None, 10, 50).unwrap(), 10);
        assert_eq!(bounded(Some(50), 10, 50).unwrap(), 50);
        for bad in [0, -1, 51, i64::MAX] {
            assert!(matches!(
                bounded(Some(bad), 10, 50),
                Err(AppError::Invalid(_))
            ));
        }
    }

    #[test]
    fn refusals_are_tool_errors_and_internal_failures_are_not_shown() {
        let result = answer::<()>(Err(AppError::NotFound("run"))).unwrap();
        assert_eq!(result.is_error, Some(true));
        let body: ToolError = serde_json::from_value(result.structured_content.unwrap()).unwrap();
        assert_eq!(body.error, "not_found");
        let hidden = answer::<()>(Err(AppError::Internal("secret path".into()))).unwrap_err();
        assert!(!hidden.message.contains("secret"));
    }

    #[test]
    fn every_tool_but_start_evaluation_is_listed_read_only() {
        let tools = LachesisMcp::tool_router().list_all();
        let mut names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
        names.sort_unstable();
        assert_eq!(names, TOOL_NAMES);
        for tool in &tools {
            let hints = tool.annotations.as_ref().expect("annotated");
            let reads = tool.name != "start_evaluation";
            assert_eq!(hints.read_only_hint, Some(reads), "{}", tool.name);
        }
    }
}
