//! The marketplace's feed: each Pay-to-Play episode's round (or skip) stored once and published
//! on the public `marketplace` topic; the budgets of runs with their history; a run's ledger.
//!
//! Only the platform's runs (budget accounts without a team) go to the public feed; a team's
//! budgets and ledgers are shown to its members.

use axum::extract::{Path, Query, State};
use axum::routing::get;
use axum::{Json, Router};
use lachesis_shared::ledger::{MicroUsdc, StatementLine};
use lachesis_shared::live::{LiveEvent, Topic};
use lachesis_shared::marketplace::{BudgetView, MarketEvent};
use serde::Deserialize;
use sqlx::PgPool;

use crate::app::AppError;
use crate::app::AppState;
use crate::auth::Viewer;
use crate::ledger::AccountId;
use crate::ledger::queries;
use crate::ledger::routes::{statement_lines, visible_teams};

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

/// Stores the event and publishes it on commit; an episode already stored (a replay) is neither
/// stored nor published again. Returns whether it was new.
pub async fn record(db: &PgPool, event: &MarketEvent) -> Result<bool, sqlx::Error> {
    let episode = match event {
        MarketEvent::Round(round) => &round.episode,
        MarketEvent::Skipped(skipped) => &skipped.episode,
    };
    let json = serde_json::to_value(event).map_err(|e| sqlx::Error::Encode(Box::new(e)))?;
    let mut tx = db.begin().await?;
    let stored = sqlx::query(
        "INSERT INTO market_events (run, episode, event) VALUES ($1, $2, $3)
         ON CONFLICT (episode) DO NOTHING",
    )
    .bind(event.run())
    .bind(episode)
    .bind(json)
    .execute(&mut *tx)
    .await?
    .rows_affected()
        == 1;
    if stored {
        let live = LiveEvent::Market(event.clone());
        crate::live::bridge::publish(&mut *tx, &Topic::Marketplace, &live).await?;
    }
    tx.commit().await?;
    Ok(stored)
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
    let rows: Vec<serde_json::Value> = sqlx::query_scalar(
        "SELECT event FROM market_events WHERE $1::TEXT IS NULL OR run = $1
         ORDER BY id DESC LIMIT $2",
    )
    .bind(run)
    .bind(limit.clamp(1, 500))
    .fetch_all(db)
    .await?;
    rows.into_iter()
        .map(|v| serde_json::from_value(v).map_err(|e| AppError::Internal(e.to_string())))
        .collect()
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
    let teams = match viewer {
        Viewer::Anonymous => Some(Vec::new()),
        _ => visible_teams(state, viewer).await?,
    };
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
    statement_lines(&state.db, id.0, None).await.map(Json)
}

/// The database's clock as RFC 3339 (UTC, milliseconds), the form every `at` of the API takes.
pub async fn now(db: &PgPool) -> Result<String, sqlx::Error> {
    sqlx::query_scalar(
        "SELECT to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"')",
    )
    .fetch_one(db)
    .await
}
