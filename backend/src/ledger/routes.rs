//! `/api/ledger/...`: balances and statements, each team seeing only its own accounts (the
//! platform's and unowned accounts only with full rights).

use axum::extract::{Query, State};
use axum::routing::get;
use axum::{Json, Router};
use lachesis_shared::ledger::{AccountBalance, MicroUsdc, StatementLine};
use serde::Deserialize;
use sqlx::Row;

use crate::app::AppError;
use crate::app::AppState;
use crate::auth::Viewer;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/ledger/accounts", get(accounts))
        .route("/api/ledger/statement", get(statement))
}

/// The teams whose accounts the caller sees; `None` for all accounts.
pub(crate) async fn visible_teams(
    state: &AppState,
    viewer: &Viewer,
) -> Result<Option<Vec<i64>>, AppError> {
    match viewer {
        Viewer::Open | Viewer::Admin => Ok(None),
        Viewer::User { id, .. } => Ok(Some(
            sqlx::query_scalar("SELECT team_id FROM memberships WHERE user_id = $1")
                .bind(id)
                .fetch_all(&state.db)
                .await?,
        )),
        Viewer::Token { team_id, .. } => Ok(Some(vec![*team_id])),
        Viewer::Anonymous => Err(AppError::NotSignedIn),
    }
}

async fn accounts(
    State(state): State<AppState>,
    viewer: Viewer,
) -> Result<Json<Vec<AccountBalance>>, AppError> {
    let teams = visible_teams(&state, &viewer).await?;
    let rows = sqlx::query(
        "SELECT name, kind, balance, held FROM ledger_accounts
         WHERE $1::BIGINT[] IS NULL OR team_id = ANY($1) ORDER BY name",
    )
    .bind(teams)
    .fetch_all(&state.db)
    .await?;
    rows.iter()
        .map(|row| super::balance_from_row(row).map_err(|e| AppError::Internal(e.to_string())))
        .collect::<Result<_, AppError>>()
        .map(Json)
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
    let teams = visible_teams(&state, &viewer).await?;
    let account: Option<i64> = sqlx::query_scalar(
        "SELECT id FROM ledger_accounts WHERE name = $1 AND ($2::BIGINT[] IS NULL OR team_id = ANY($2))",
    )
    .bind(&query.account)
    .bind(teams)
    .fetch_optional(&state.db)
    .await?;
    let account = account.ok_or(AppError::NotFound("account"))?;
    statement_lines(&state.db, account, query.before)
        .await
        .map(Json)
}

/// The newest 200 lines of account `account`'s statement, before transaction `before`.
pub(crate) async fn statement_lines(
    db: &sqlx::PgPool,
    account: i64,
    before: Option<i64>,
) -> Result<Vec<StatementLine>, AppError> {
    let rows = sqlx::query(
        "SELECT t.id, t.kind, t.memo, t.chain_tx, e.amount,
                to_char(t.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"') AS at,
                (SELECT a.name FROM ledger_entries o JOIN ledger_accounts a ON a.id = o.account_id
                 WHERE o.tx_id = t.id AND o.account_id <> e.account_id LIMIT 1) AS counterparty
         FROM ledger_entries e JOIN ledger_transactions t ON t.id = e.tx_id
         WHERE e.account_id = $1 AND ($2::BIGINT IS NULL OR t.id < $2)
         ORDER BY t.id DESC LIMIT 200",
    )
    .bind(account)
    .bind(before)
    .fetch_all(db)
    .await?;
    rows.iter()
        .map(|row| {
            Ok(StatementLine {
                tx_id: row.try_get("id")?,
                kind: row.try_get("kind")?,
                memo: row.try_get("memo")?,
                amount: MicroUsdc(row.try_get("amount")?),
                counterparty: row
                    .try_get::<Option<String>, _>("counterparty")?
                    .unwrap_or_default(),
                chain_tx: row.try_get("chain_tx")?,
                at: row.try_get("at")?,
            })
        })
        .collect::<Result<_, AppError>>()
}
