//! `GET /api/feedback/earnings`: what the signed-in person has been paid for their verdicts. A
//! person sees their own account only; nobody else's is reachable here.

use axum::extract::State;
use axum::routing::get;
use axum::{Json, Router};
use lachesis_shared::feedback::Earnings;

use crate::app::{AppError, AppState};
use crate::auth::Viewer;
use crate::ledger::annotators::earnings;

pub fn routes() -> Router<AppState> {
    Router::new().route("/api/feedback/earnings", get(mine))
}

async fn mine(State(state): State<AppState>, viewer: Viewer) -> Result<Json<Earnings>, AppError> {
    let user = super::annotator(&viewer)?;
    let earned = earnings(&state.db, user).await?;
    Ok(Json(Earnings {
        balance: earned.balance,
        payments: earned.payments,
    }))
}
