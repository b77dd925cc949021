//! The marketplace routes of the HTTP API, over the app's request helpers (errors, 401 hook).

use lachesis_shared::ledger::StatementLine;
use lachesis_shared::marketplace::{AgentCard, BudgetView, MarketEvent};

use crate::api::{self, ApiResult, encode};

pub async fn cards() -> ApiResult<Vec<AgentCard>> {
    api::get("/api/marketplace/cards").await
}

/// The newest `limit` feed entries, newest first.
pub async fn feed(limit: usize) -> ApiResult<Vec<MarketEvent>> {
    api::get(&format!("/api/marketplace/feed?limit={limit}")).await
}

pub async fn budgets() -> ApiResult<Vec<BudgetView>> {
    api::get("/api/marketplace/budgets").await
}

/// The statement of a run's budget account, newest first.
pub async fn ledger(run: &str) -> ApiResult<Vec<StatementLine>> {
    api::get(&format!("/api/marketplace/runs/{}/ledger", encode(run))).await
}
