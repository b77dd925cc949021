//! `GET /health/live` (the process answers) and `GET /health/ready` (this instance can take work
//! now). Unauthenticated, cheap, and secret-free: a load balancer or orchestrator polls them.

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use lachesis_shared::health::{Readiness, ReadinessCheck};

use super::AppState;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/health/live", get(live))
        .route("/health/ready", get(ready))
}

async fn live() -> Response {
    uncached(
        (
            StatusCode::OK,
            axum::Json(serde_json::json!({"live": true})),
        )
            .into_response(),
    )
}

/// 200 when Postgres answers within `--ready-timeout-ms`, this instance holds its ledger owner lock
/// and it is not shutting down; 503 naming what failed otherwise.
async fn ready(State(state): State<AppState>) -> Response {
    let mut failed = Vec::new();
    if state.drain.is_draining() {
        failed.push(ReadinessCheck::ShuttingDown);
    }
    let answered = tokio::time::timeout(
        state.lifecycle.ready_timeout,
        sqlx::query("SELECT 1").execute(&state.db),
    )
    .await;
    if !matches!(answered, Ok(Ok(_))) {
        failed.push(ReadinessCheck::Database);
    }
    if !state.ledger.owner_held() {
        failed.push(ReadinessCheck::LedgerOwner);
    }
    let status = if failed.is_empty() {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    let body = Readiness {
        ready: failed.is_empty(),
        failed,
    };
    uncached((status, axum::Json(body)).into_response())
}

/// A cached answer about health is a wrong one.
fn uncached(mut response: Response) -> Response {
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}
