//! The dashboards' queries: the runs a caller sees, and a run's history.

use lachesis_shared::runs::{EnvSummary, GroupSummary, RunStatusPoint, RunSummary, TrainerPoint};
use std::collections::BTreeMap;

use sqlx::PgPool;

use crate::auth::store::TeamReach;

type RunRow = (
    String,
    Option<String>,
    bool,
    i64,
    i64,
    i64,
    i64,
    Option<i64>,
);

/// The runs `seen` reaches, plus public runs (or just `run` of them), newest first. A run-scoped
/// token's reach is its run (and public ones).
pub async fn runs(
    db: &PgPool,
    seen: &TeamReach,
    run: Option<&str>,
) -> Result<Vec<RunSummary>, sqlx::Error> {
    let (all, teams, only_run) = match seen {
        TeamReach::All => (true, &[][..], None),
        TeamReach::Teams { teams, run } => (false, &teams[..], run.as_deref()),
        TeamReach::Anonymous => (false, &[][..], None),
    };
    let rows: Vec<RunRow> = sqlx::query_as(
        "SELECT r.id, t.name, r.public, (extract(epoch FROM r.created_at) * 1000)::bigint,
                r.current_step, coalesce(n.queued, 0), coalesce(n.received, 0),
                (extract(epoch FROM n.last_received_at) * 1000)::bigint
         FROM runs r LEFT JOIN teams t ON t.id = r.team_id
              LEFT JOIN run_totals n ON n.run_id = r.id
         WHERE ($1 OR r.public OR (r.team_id = ANY($2) AND ($3::text IS NULL OR r.id = $3)))
           AND ($4::text IS NULL OR r.id = $4)
         ORDER BY r.created_at DESC, r.id",
    )
    .bind(all)
    .bind(teams)
    .bind(only_run)
    .bind(run)
    .fetch_all(db)
    .await?;
    let ids: Vec<String> = rows.iter().map(|r| r.0.clone()).collect();
    let envs: Vec<(String, i32, String, i64, f64, bool)> = sqlx::query_as(
        "SELECT run_id, env_id, real_name, group_size, weight, connected FROM envs
         WHERE run_id = ANY($1) ORDER BY run_id, env_id",
    )
    .bind(&ids)
    .fetch_all(db)
    .await?;
    Ok(rows
        .into_iter()
        .map(
            |(id, team, public, created_at_ms, current_step, queue_size, groups, last)| {
                let envs = envs
                    .iter()
                    .filter(|e| e.0 == id)
                    .map(|e| EnvSummary {
                        env_id: i64::from(e.1),
                        name: e.2.clone(),
                        group_size: e.3,
                        weight: e.4,
                        connected: e.5,
                    })
                    .collect();
                RunSummary {
                    id,
                    team,
                    public,
                    created_at_ms,
                    current_step,
                    queue_size,
                    groups,
                    last_group_at_ms: last,
                    envs,
                }
            },
        )
        .collect())
}

type StatsRow = (
    i64,
    Option<i64>,
    i64,
    Option<i64>,
    Vec<f64>,
    Option<Vec<f64>>,
    i64,
);

const STATS_COLUMNS: &str =
    "s.group_id, s.env_id, (extract(epoch FROM s.received_at) * 1000)::bigint,
    s.weight_version, s.scores, s.advantages, s.tokens";

fn summary(run: &str, row: StatsRow) -> GroupSummary {
    let (id, env_id, at_ms, weight_version, scores, advantages, tokens) = row;
    GroupSummary {
        id,
        run: run.to_string(),
        env_id,
        at_ms,
        weight_version,
        scores,
        advantages,
        tokens,
    }
}

/// The last `limit` groups (optionally of one env, optionally older than `before`), newest first.
pub async fn latest_groups(
    db: &PgPool,
    run: &str,
    env: Option<i64>,
    before: Option<i64>,
    limit: i64,
) -> Result<Vec<GroupSummary>, sqlx::Error> {
    let rows: Vec<StatsRow> = sqlx::query_as(&format!(
        "SELECT {STATS_COLUMNS} FROM group_stats s
         WHERE s.run_id = $1 AND ($2::bigint IS NULL OR s.env_id = $2)
           AND ($3::bigint IS NULL OR s.group_id < $3)
         ORDER BY s.group_id DESC LIMIT $4"
    ))
    .bind(run)
    .bind(env)
    .bind(before)
    .bind(limit)
    .fetch_all(db)
    .await?;
    Ok(rows.into_iter().map(|row| summary(run, row)).collect())
}

/// The stored payloads (zstd JSON) of groups still in the queue table.
pub async fn payloads(db: &PgPool, ids: &[i64]) -> Result<Vec<(i64, Vec<u8>)>, sqlx::Error> {
    sqlx::query_as("SELECT id, payload FROM groups WHERE id = ANY($1)")
        .bind(ids)
        .fetch_all(db)
        .await
}

pub async fn status_points(
    db: &PgPool,
    run: &str,
    limit: i64,
) -> Result<Vec<RunStatusPoint>, sqlx::Error> {
    // The time of a NOT NULL timestamp is never NULL; inference cannot tell.
    let mut points = sqlx::query_as!(
        RunStatusPoint,
        r#"SELECT (extract(epoch FROM at) * 1000)::BIGINT AS "at_ms!", step, queue_size
           FROM run_status_samples WHERE run_id = $1 ORDER BY at DESC LIMIT $2"#,
        run,
        limit
    )
    .fetch_all(db)
    .await?;
    points.reverse();
    Ok(points)
}

pub async fn trainer_points(
    db: &PgPool,
    run: &str,
    limit: i64,
) -> Result<Vec<TrainerPoint>, sqlx::Error> {
    // The time of a NOT NULL timestamp is never NULL; inference cannot tell.
    let rows = sqlx::query!(
        r#"SELECT (extract(epoch FROM at) * 1000)::BIGINT AS "at_ms!", step,
                  metrics AS "metrics: sqlx::types::Json<BTreeMap<String, f64>>"
           FROM trainer_metrics WHERE run_id = $1 ORDER BY id DESC LIMIT $2"#,
        run,
        limit
    )
    .fetch_all(db)
    .await?;
    Ok(rows
        .into_iter()
        .rev()
        .map(|row| TrainerPoint {
            at_ms: row.at_ms,
            step: row.step,
            values: row.metrics.0,
        })
        .collect())
}
