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
    if !state.db_probe.answers(&state).await {
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

/// Whether Postgres answered lately. Readiness needs no credentials, so a flood of it must not
/// become a flood of queries holding pooled connections: one probe runs at a time, and its answer
/// stands for `FRESH` to every caller.
#[derive(Debug, Default)]
pub(crate) struct DbProbe {
    last: tokio::sync::Mutex<Option<(tokio::time::Instant, bool)>>,
}

impl DbProbe {
    const FRESH: std::time::Duration = std::time::Duration::from_millis(250);

    async fn answers(&self, state: &AppState) -> bool {
        self.answers_with(async {
            tokio::time::timeout(
                state.lifecycle.ready_timeout,
                sqlx::query("SELECT 1").execute(&state.db),
            )
            .await
            .is_ok_and(|r| r.is_ok())
        })
        .await
    }

    /// `probe`'s answer, or the last one while it is fresh (`probe` is then not run).
    async fn answers_with(&self, probe: impl Future<Output = bool>) -> bool {
        let mut last = self.last.lock().await;
        if let Some((at, answered)) = *last
            && at.elapsed() < Self::FRESH
        {
            return answered;
        }
        let answered = probe.await;
        *last = Some((tokio::time::Instant::now(), answered));
        answered
    }
}

/// A cached answer about health (by a proxy) is a wrong one.
fn uncached(mut response: Response) -> Response {
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::DbProbe;

    #[tokio::test(start_paused = true)]
    async fn a_flood_of_readiness_checks_runs_one_probe_per_quarter_second() {
        let probe = DbProbe::default();
        let runs = AtomicUsize::new(0);
        let probing = || async {
            runs.fetch_add(1, Ordering::SeqCst);
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            true
        };
        let answers =
            futures::future::join_all((0..500).map(|_| probe.answers_with(probing()))).await;
        assert!(answers.iter().all(|&a| a));
        assert_eq!(runs.load(Ordering::SeqCst), 1, "500 callers, one query");
        tokio::time::sleep(DbProbe::FRESH).await;
        assert!(probe.answers_with(probing()).await);
        assert_eq!(
            runs.load(Ordering::SeqCst),
            2,
            "a stale answer is asked again"
        );
    }
}
