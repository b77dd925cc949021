//! `/api/ledger/...`: balances and statements, each team seeing only its own accounts (the
//! platform's and unowned accounts only with full rights).

use axum::extract::{Query, State};
use axum::routing::get;
use axum::{Json, Router};
use lachesis_shared::ledger::{AccountBalance, StatementLine};
use serde::Deserialize;

use super::{LedgerError, queries};
use crate::app::AppError;
use crate::app::AppState;
use crate::auth::Viewer;
use crate::auth::store::{TeamReach, team_reach};

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/ledger/accounts", get(accounts))
        .route("/api/ledger/statement", get(statement))
}

/// The teams whose accounts the caller sees; anonymous callers see none of the ledger.
async fn visible_teams(state: &AppState, viewer: &Viewer) -> Result<TeamReach, AppError> {
    match team_reach(&state.db, viewer).await? {
        TeamReach::Anonymous => Err(AppError::NotSignedIn),
        reach => Ok(reach),
    }
}

async fn accounts(
    State(state): State<AppState>,
    viewer: Viewer,
) -> Result<Json<Vec<AccountBalance>>, AppError> {
    let reach = visible_teams(&state, &viewer).await?;
    queries::team_balances(&state.db, reach.team_ids())
        .await
        .map(Json)
        .map_err(|e| match e {
            LedgerError::Db(e) => AppError::Database(e),
            other => AppError::Internal(other.to_string()),
        })
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct StatementQuery {
    account: String,
    /// Lines before this transaction id (for paging back); newest first.
    #[serde(default)]
    before: Option<i64>,
}

/// The newest 200 lines of one account's statement. Accounts the caller may not see are a 404,
/// like accounts that do not exist.
async fn statement(
    State(state): State<AppState>,
    viewer: Viewer,
    Query(query): Query<StatementQuery>,
) -> Result<Json<Vec<StatementLine>>, AppError> {
    let reach = visible_teams(&state, &viewer).await?;
    let account = queries::team_account(&state.db, &query.account, reach.team_ids())
        .await?
        .ok_or(AppError::NotFound("account"))?;
    Ok(Json(
        queries::statement_lines(&state.db, account, query.before).await?,
    ))
}
