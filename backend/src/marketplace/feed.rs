//! The marketplace's feed: each Pay-to-Play episode's round (or skip) stored once and published
//! on the public `marketplace` topic; the budgets of runs with their history; a run's ledger.
//!
//! Only the platform's runs (budget accounts without a team) go to the public feed; a team's
//! budgets and ledgers are shown to its members.

use axum::extract::{Path, Query, State};
use axum::routing::get;
use axum::{Json, Router};
use lachesis_shared::ledger::{MicroUsdc, StatementLine};
use lachesis_shared::marketplace::{BudgetView, MarketEvent};
use serde::Deserialize;
use sqlx::PgPool;

pub use self::store::{now, record};
use crate::app::AppError;
use crate::app::AppState;
use crate::auth::Viewer;
use crate::auth::store::team_reach;
use crate::ledger::AccountId;
use crate::ledger::queries;

mod store;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/marketplace/feed", get(feed))
        .route("/api/marketplace/budgets", get(budgets))
        .route("/api/marketplace/runs/{run}/ledger", get(run_ledger))
}

/// The budget account of a run's agent.
pub fn budget_account(run: &str) -> String {
    format!("budget/{run}/agent")
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FeedQuery {
    #[serde(default)]
    limit: Option<i64>,
    #[serde(default)]
    run: Option<String>,
}

/// The newest events (100 by default, at most 500), newest first.
pub async fn recent(
    db: &PgPool,
    run: Option<&str>,
    limit: i64,
) -> Result<Vec<MarketEvent>, AppError> {
    Ok(store::recent(db, run, limit.clamp(1, 500)).await?)
}

async fn feed(
    State(state): State<AppState>,
    Query(query): Query<FeedQuery>,
) -> Result<Json<Vec<MarketEvent>>, AppError> {
    recent(&state.db, query.run.as_deref(), query.limit.unwrap_or(100))
        .await
        .map(Json)
}

/// Budget accounts the caller may see: the platform's to anyone, a team's to its members.
async fn visible_budgets(
    state: &AppState,
    viewer: &Viewer,
    name: Option<&str>,
) -> Result<Vec<(AccountId, String)>, AppError> {
    // Anonymous callers reach no team: they see the platform's budgets only.
    let reach = team_reach(&state.db, viewer).await?;
    let teams = reach.team_ids().map(<[i64]>::to_vec);
    Ok(queries::budget_accounts(&state.db, name, teams).await?)
}

/// How many history points a budget shows at most (the newest).
const BUDGET_POINTS: i64 = 300;

async fn budgets(
    State(state): State<AppState>,
    viewer: Viewer,
) -> Result<Json<Vec<BudgetView>>, AppError> {
    let mut views = Vec::new();
    for (id, name) in visible_budgets(&state, &viewer, None).await? {
        views.push(budget_view(&state.db, id, &name).await?);
    }
    Ok(Json(views))
}

async fn budget_view(db: &PgPool, id: AccountId, name: &str) -> Result<BudgetView, AppError> {
    let totals = queries::budget_totals(db, id).await?;
    let points = queries::budget_history(db, id, BUDGET_POINTS).await?;
    let run = name
        .strip_prefix("budget/")
        .and_then(|rest| rest.rsplit_once('/'))
        .map_or(name, |(run, _)| run);
    Ok(BudgetView {
        run: run.to_string(),
        account: name.to_string(),
        funded: totals.funded,
        spent: totals.spent,
        available: MicroUsdc(totals.balance.0 - totals.held.0),
        points,
    })
}

/// The run's budget statement, newest first; a run the caller may not see is a 404.
async fn run_ledger(
    State(state): State<AppState>,
    viewer: Viewer,
    Path(run): Path<String>,
) -> Result<Json<Vec<StatementLine>>, AppError> {
    let name = budget_account(&run);
    let (id, _) = visible_budgets(&state, &viewer, Some(&name))
        .await?
        .into_iter()
        .next()
        .ok_or(AppError::NotFound("run budget"))?;
    Ok(Json(queries::statement_lines(&state.db, id, None).await?))
}
