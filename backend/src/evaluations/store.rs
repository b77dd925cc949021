//! The `evaluations` table: one row per evaluation, written when it starts and when it ends.

use std::collections::BTreeMap;

use lachesis_shared::mcp::{EvaluationStatus, EvaluationView};
use serde_json::Value;
use sqlx::PgPool;

/// Who may read an evaluation: the admin reads all, a team's tokens their team's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Readers {
    All,
    Team(i64),
}

/// A new running row, unless `caller` already has one running (the partial unique index says
/// so): `None` then. The caller's rows left running past their deadline by a process that died
/// are marked failed first, so they never block it.
pub async fn start(
    db: &PgPool,
    environment: &str,
    team_id: Option<i64>,
    caller: &str,
    timeout_s: i64,
) -> Result<Option<i64>, sqlx::Error> {
    let mut tx = db.begin().await?;
    sqlx::query(
        "UPDATE evaluations SET status = 'failed', finished_at = now(), \
             error = 'interrupted: the process running it stopped' \
         WHERE caller = $1 AND status = 'running' AND deadline_at < now()",
    )
    .bind(caller)
    .execute(&mut *tx)
    .await?;
    let id: Option<i64> = sqlx::query_scalar(
        "INSERT INTO evaluations (environment, team_id, caller, status, deadline_at) \
         VALUES ($1, $2, $3, 'running', now() + make_interval(secs => $4)) \
         ON CONFLICT (caller) WHERE status = 'running' DO NOTHING \
         RETURNING id",
    )
    .bind(environment)
    .bind(team_id)
    .bind(caller)
    .bind(timeout_s as f64)
    .fetch_optional(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(id)
}

/// Records the outcome of a running evaluation (a row already finished is left as it is).
pub async fn finish(
    db: &PgPool,
    id: i64,
    outcome: Result<(&BTreeMap<String, f64>, &[Value]), &str>,
) -> Result<(), sqlx::Error> {
    let (status, metrics, samples, error) = match outcome {
        Ok((metrics, samples)) => (
            "done",
            Some(serde_json::to_value(metrics).unwrap_or(Value::Null)),
            Some(Value::Array(samples.to_vec())),
            None,
        ),
        Err(reason) => (
            "failed",
            None,
            None,
            Some(reason.chars().take(2000).collect::<String>()),
        ),
    };
    sqlx::query(
        "UPDATE evaluations SET status = $2, metrics = $3, samples = $4, error = $5, \
             finished_at = now() \
         WHERE id = $1 AND status = 'running'",
    )
    .bind(id)
    .bind(status)
    .bind(metrics)
    .bind(samples)
    .bind(error)
    .execute(db)
    .await?;
    Ok(())
}

type Row = (
    i64,
    String,
    String,
    Option<Value>,
    Option<Value>,
    Option<String>,
    f64,
    bool,
);

/// One evaluation, if `readers` may see it (one it may not is as absent as one that never was).
pub async fn get(
    db: &PgPool,
    id: i64,
    readers: Readers,
) -> Result<Option<EvaluationView>, sqlx::Error> {
    let team = match readers {
        Readers::All => None,
        Readers::Team(team) => Some(team),
    };
    let row: Option<Row> = sqlx::query_as(
        "SELECT id, environment, status, metrics, samples, error, \
             EXTRACT(EPOCH FROM (coalesce(finished_at, now()) - started_at))::float8, \
             status = 'running' AND deadline_at < now() \
         FROM evaluations WHERE id = $1 AND ($2::bigint IS NULL OR team_id = $2)",
    )
    .bind(id)
    .bind(team)
    .fetch_optional(db)
    .await?;
    Ok(row.map(view))
}

fn view(
    (id, environment, status, metrics, samples, error, seconds, abandoned): Row,
) -> EvaluationView {
    let (status, error) = match status.as_str() {
        "done" => (EvaluationStatus::Done, error),
        "running" if abandoned => (
            EvaluationStatus::Failed,
            Some("interrupted: the process running it stopped".to_string()),
        ),
        "running" => (EvaluationStatus::Running, error),
        _ => (EvaluationStatus::Failed, error),
    };
    EvaluationView {
        id,
        environment,
        status,
        metrics: metrics
            .and_then(|m| serde_json::from_value(m).ok())
            .unwrap_or_default(),
        samples: match samples {
            Some(Value::Array(list)) => list,
            _ => Vec::new(),
        },
        error,
        seconds,
    }
}
