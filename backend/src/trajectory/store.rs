//! The trajectory API's state in Postgres. Every acknowledged change is committed before the handler
//! answers, so a crash loses nothing the client was told about. Batches live in `batches`.

use lachesis_shared::atropos::{EnvRegistered, RegisterEnv, Registration, StatusEnv};
use lachesis_shared::runs::{GroupSummary, TrainerPoint, TrainerReport};
use sqlx::{PgConnection, PgPool};

use super::canonical::CheckedGroup;
use super::error::ApiError;
use super::figures::{self, EnvFigures, QueuedByEnv};
use super::packing;

/// The run row, as the handlers need it.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct RunRow {
    pub registered: bool,
    pub wandb_group: Option<String>,
    pub wandb_project: Option<String>,
    pub batch_size: i64,
    pub max_token_len: i64,
    pub checkpoint_dir: String,
    pub save_checkpoint_interval: i64,
    pub num_steps: i64,
    pub started: bool,
    pub current_step: i64,
}

const RUN_COLUMNS: &str = "registered, wandb_group, wandb_project, batch_size, max_token_len, checkpoint_dir, \
     save_checkpoint_interval, num_steps, started, current_step";

pub async fn ensure_run(db: &PgPool, run: &str) -> Result<(), ApiError> {
    sqlx::query("INSERT INTO runs (id) VALUES ($1) ON CONFLICT (id) DO NOTHING")
        .bind(run)
        .execute(db)
        .await?;
    Ok(())
}

pub async fn load_run(conn: &mut PgConnection, run: &str, lock: bool) -> Result<RunRow, ApiError> {
    // NO KEY UPDATE serialises batch formation yet leaves inserts (whose foreign key takes KEY SHARE
    // on this row) running.
    let sql = format!(
        "SELECT {RUN_COLUMNS} FROM runs WHERE id = $1{}",
        if lock { " FOR NO KEY UPDATE" } else { "" }
    );
    Ok(sqlx::query_as::<_, RunRow>(&sql)
        .bind(run)
        .fetch_one(conn)
        .await?)
}

/// `/register`: the first registration sets the run up; later ones only count another requester.
pub async fn register_trainer(db: &PgPool, run: &str, reg: &Registration) -> Result<(), ApiError> {
    sqlx::query(
        "UPDATE runs SET
            registered = TRUE, wandb_group = $2, wandb_project = $3, batch_size = $4, max_token_len = $5,
            checkpoint_dir = $6, save_checkpoint_interval = $7, num_steps = $8, current_step = $9,
            started = FALSE, requesters = requesters + 1
         WHERE id = $1 AND NOT registered",
    )
    .bind(run)
    .bind(&reg.wandb_group)
    .bind(&reg.wandb_project)
    .bind(reg.batch_size)
    .bind(reg.max_token_len)
    .bind(&reg.checkpoint_dir)
    .bind(reg.save_checkpoint_interval)
    .bind(reg.num_steps)
    .bind(reg.starting_step)
    .execute(db)
    .await?;
    sqlx::query("UPDATE runs SET requesters = requesters + 1 WHERE id = $1 AND registered")
        .bind(run)
        .execute(db)
        .await?;
    Ok(())
}

/// `/register-env`: `None` while the trainer has not pulled its first batch.
pub async fn register_env(
    db: &PgPool,
    run: &str,
    env: &RegisterEnv,
) -> Result<Option<EnvRegistered>, ApiError> {
    let mut tx = db.begin().await?;
    let row = load_run(&mut tx, run, true).await?;
    if !row.started {
        return Ok(None);
    }
    let (env_count, same_name): (i64, i64) = sqlx::query_as(
        "SELECT count(*), count(*) FILTER (WHERE desired_name = $2) FROM envs WHERE run_id = $1",
    )
    .bind(run)
    .bind(&env.desired_name)
    .fetch_one(&mut *tx)
    .await?;
    let real_name = format!("{}_{}", env.desired_name, same_name);
    sqlx::query(
        "INSERT INTO envs (run_id, env_id, desired_name, real_name, max_context_len, weight, group_size,
                           min_batch_allocation)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
    )
    .bind(run)
    .bind(env_count as i32)
    .bind(&env.desired_name)
    .bind(&real_name)
    .bind(env.max_token_length)
    .bind(env.weight)
    .bind(env.group_size)
    .bind(env.min_batch_allocation)
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(Some(EnvRegistered {
        status: "success".into(),
        env_id: env_count,
        wandb_name: real_name,
        checkpoint_dir: row.checkpoint_dir,
        starting_step: row.current_step,
        checkpoint_interval: row.save_checkpoint_interval,
        num_steps: row.num_steps,
    }))
}

/// `/disconnect-env`: false when no such env exists.
pub async fn disconnect_env(db: &PgPool, run: &str, env_id: i64) -> Result<bool, ApiError> {
    let Ok(env_id) = i32::try_from(env_id) else {
        return Ok(false);
    };
    let done = sqlx::query("UPDATE envs SET connected = FALSE WHERE run_id = $1 AND env_id = $2")
        .bind(run)
        .bind(env_id)
        .execute(db)
        .await?;
    Ok(done.rows_affected() == 1)
}

/// Where an ingested group went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ingested {
    Queued,
    /// Held back until partners complete its env's group size; the env's buffered sequence count.
    Buffered {
        buffer_size: i64,
    },
}

/// Stores one scored group: queued directly, or buffered when its size differs from its env's
/// registered group size (released into the queue once buffered groups sum to that size).
pub async fn ingest(
    conn: &mut PgConnection,
    run: &str,
    group: &CheckedGroup,
) -> Result<Ingested, ApiError> {
    let payload = encode_payload(&group.json);
    let n_seqs = i32::try_from(group.n_seqs).unwrap_or(i32::MAX);
    // Only an id that fits the envs table's integer can name a registered env.
    let env_id = group.env_id.and_then(|id| i32::try_from(id).ok());
    // Fast path, one statement: queue it unless its env expects another group size, keep its
    // numbers for the dashboards, and tell the live hub (delivered on commit).
    let notice = live_notice(run, group);
    let queued: Option<(i64, i64)> = sqlx::query_as(&format!(
        "WITH g AS (
             INSERT INTO groups (run_id, env_id, n_seqs, weight_version, state, queue_pos, payload)
             SELECT $1, $2, $3, $4, 'queued', nextval('groups_queue_pos'), $5
             WHERE NOT EXISTS (SELECT 1 FROM envs WHERE run_id = $1 AND env_id = $6 AND group_size <> $3)
             RETURNING id, received_at),
         {STATS_AND_NOTICE}"
    ))
    .bind(run)
    .bind(group.env_id)
    .bind(n_seqs)
    .bind(group.weight_version)
    .bind(&payload)
    .bind(env_id)
    .bind(&group.stats.scores)
    .bind(&group.stats.advantages)
    .bind(group.stats.tokens)
    .bind(crate::live::bridge::CHANNEL)
    .bind(&notice)
    .fetch_optional(&mut *conn)
    .await?;
    if queued.is_some() {
        return Ok(Ingested::Queued);
    }
    let env_id = env_id.expect("only a registered env can send a group to the buffer");
    buffer_group(conn, run, env_id, group, &payload, &notice).await
}

/// The rest of an ingest statement after the `g` CTE (the inserted group's id and arrival):
/// its `group_stats` row ($1 run, $2 env, $4 weight version, $7-$9 the numbers), and the live
/// notice ($10 channel, $11 the event with id and time 0, filled in here by text replacement: a
/// JSON round trip through Postgres would respace it and could overflow NOTIFY's limit). Folding
/// the notice into the statement saves a round trip per group.
const STATS_AND_NOTICE: &str = "s AS (
         INSERT INTO group_stats (group_id, run_id, env_id, received_at, weight_version, scores, advantages, tokens)
         SELECT id, $1, $2, received_at, $4, $7, $8, $9 FROM g
         RETURNING group_id, (extract(epoch FROM received_at) * 1000)::bigint AS at_ms)
     SELECT s.group_id, s.at_ms FROM s
     LEFT JOIN LATERAL (
         SELECT pg_notify($10, replace(replace($11::text,
                    '\"id\":0,', '\"id\":' || s.group_id || ','),
                    '\"at_ms\":0,', '\"at_ms\":' || s.at_ms || ','))
         WHERE $11::text IS NOT NULL) AS n ON true";

/// The live event for a group about to be stored, id and time zero (the statement sets them);
/// `None` when even a trimmed event cannot fit a notification. Large ids and times take at most
/// 32 more bytes than the zeros, which the margin keeps within NOTIFY's limit. `"id":0,` and
/// `"at_ms":0,` occur once each: run names cannot hold quotes, and no other key ends so.
fn live_notice(run: &str, group: &CheckedGroup) -> Option<String> {
    let topic = lachesis_shared::live::Topic::Run {
        run: run.to_string(),
    };
    let event = lachesis_shared::live::LiveEvent::Group(summary(run, group, 0, 0));
    let notice = crate::live::bridge::payload(&topic, &event)?;
    (notice.len() + 32 <= crate::live::bridge::MAX_PAYLOAD_BYTES).then_some(notice)
}

fn summary(run: &str, group: &CheckedGroup, id: i64, at_ms: i64) -> GroupSummary {
    GroupSummary {
        id,
        run: run.to_string(),
        env_id: group.env_id,
        at_ms,
        weight_version: group.weight_version,
        scores: group.stats.scores.clone(),
        advantages: group.stats.advantages.clone(),
        tokens: group.stats.tokens,
    }
}

async fn buffer_group(
    conn: &mut PgConnection,
    run: &str,
    env_id: i32,
    group: &CheckedGroup,
    payload: &[u8],
    notice: &Option<String>,
) -> Result<Ingested, ApiError> {
    let n_seqs = i32::try_from(group.n_seqs).unwrap_or(i32::MAX);
    // The env row lock serialises this env's buffer across requests and server instances.
    let mut tx = sqlx::Connection::begin(&mut *conn).await?;
    let (group_size,): (i64,) =
        sqlx::query_as("SELECT group_size FROM envs WHERE run_id = $1 AND env_id = $2 FOR UPDATE")
            .bind(run)
            .bind(env_id)
            .fetch_one(&mut *tx)
            .await?;
    // $6 (the fast path's env check) is not needed here; it is bound and referenced only so that
    // both statements share STATS_AND_NOTICE's parameter numbers.
    sqlx::query(&format!(
        "WITH g AS (
             INSERT INTO groups (run_id, env_id, n_seqs, weight_version, state, payload)
             SELECT $1, $2, $3, $4, 'buffered', $5 WHERE $6::int IS NOT NULL
             RETURNING id, received_at),
         {STATS_AND_NOTICE}"
    ))
    .bind(run)
    .bind(env_id)
    .bind(n_seqs)
    .bind(group.weight_version)
    .bind(payload)
    .bind(env_id)
    .bind(&group.stats.scores)
    .bind(&group.stats.advantages)
    .bind(group.stats.tokens)
    .bind(crate::live::bridge::CHANNEL)
    .bind(notice)
    .execute(&mut *tx)
    .await?;
    let buffered: Vec<(i64, i32)> = sqlx::query_as(
        "SELECT id, n_seqs FROM groups WHERE run_id = $1 AND env_id = $2 AND state = 'buffered' ORDER BY id",
    )
    .bind(run)
    .bind(env_id)
    .fetch_all(&mut *tx)
    .await?;
    let sizes: Vec<usize> = buffered.iter().map(|&(_, n)| n.max(0) as usize).collect();
    let target = usize::try_from(group_size).unwrap_or(0);
    let picked = packing::find_groups_summing_to_target(&sizes, target);
    let released: Vec<i64> = picked.iter().map(|&i| buffered[i].0).collect();
    if !released.is_empty() {
        // Released groups join the queue in buffer order, each with its own queue position.
        sqlx::query(
            "UPDATE groups g SET state = 'queued', queue_pos = r.pos
             FROM (SELECT id, nextval('groups_queue_pos') AS pos
                   FROM unnest($1::bigint[]) WITH ORDINALITY AS u(id, ord) ORDER BY ord) r
             WHERE g.id = r.id",
        )
        .bind(&released)
        .execute(&mut *tx)
        .await?;
    }
    let remaining: i64 = buffered
        .iter()
        .filter(|(id, _)| !released.contains(id))
        .map(|&(_, n)| i64::from(n))
        .sum();
    tx.commit().await?;
    Ok(Ingested::Buffered {
        buffer_size: remaining,
    })
}

/// `/status`: the step and the number of queued groups.
pub async fn status(db: &PgPool, run: &str) -> Result<(i64, i64), ApiError> {
    // A coalesce is never NULL; inference cannot tell.
    let row = sqlx::query!(
        r#"SELECT current_step,
                  coalesce((SELECT queued FROM run_totals WHERE run_id = $1), 0) AS "queued!"
           FROM runs WHERE id = $1"#,
        run
    )
    .fetch_one(db)
    .await?;
    Ok((row.current_step, row.queued))
}

/// `/status-env`, which also raises the env's group size to the largest it has queued.
pub async fn status_env(db: &PgPool, run: &str, env_id: i64) -> Result<StatusEnv, ApiError> {
    let mut conn = db.acquire().await?;
    let run_row = load_run(&mut conn, run, false).await?;
    // A widened NOT NULL column is never NULL; inference cannot tell.
    let envs = sqlx::query_as!(
        EnvFigures,
        r#"SELECT env_id::BIGINT AS "env_id!", max_context_len, weight, group_size,
                  min_batch_allocation, connected
           FROM envs WHERE run_id = $1 ORDER BY env_id"#,
        run
    )
    .fetch_all(&mut *conn)
    .await?;
    let env = envs
        .iter()
        .find(|e| e.env_id == env_id)
        .cloned()
        .ok_or(ApiError::UnknownEnv(env_id))?;
    // The sum and the largest of a group's NOT NULL sizes are never NULL (a group has a row);
    // inference cannot tell.
    let queue = sqlx::query_as!(
        QueuedByEnv,
        r#"SELECT env_id, sum(n_seqs)::BIGINT AS "sequences!", max(n_seqs)::BIGINT AS "largest_group!"
           FROM groups WHERE run_id = $1 AND state = 'queued' GROUP BY env_id"#,
        run
    )
    .fetch_all(&mut *conn)
    .await?;
    let batch_size = if run_row.registered {
        run_row.batch_size
    } else {
        0
    };
    let (figures, group_size) =
        figures::status_env(&env, &envs, &queue, run_row.current_step, batch_size);
    if group_size > env.group_size {
        sqlx::query(
            "UPDATE envs SET group_size = $3 WHERE run_id = $1 AND env_id = $2 AND group_size < $3",
        )
        .bind(run)
        .bind(env_id as i32)
        .bind(group_size)
        .execute(&mut *conn)
        .await?;
    }
    Ok(figures)
}

/// `/latest_example`: the group that most recently entered the queue.
pub async fn latest_example(db: &PgPool, run: &str) -> Result<Option<Vec<u8>>, ApiError> {
    let payload: Option<Vec<u8>> = sqlx::query_scalar(
        "SELECT payload FROM groups WHERE run_id = $1 AND queue_pos IS NOT NULL ORDER BY queue_pos DESC LIMIT 1",
    )
    .bind(run)
    .fetch_optional(db)
    .await?;
    payload.map(|p| decode_payload(&p)).transpose()
}

/// The stored form of a group: its canonical JSON, zstd-compressed at level 1. Write-ahead log
/// and TOAST work in Postgres grow with the bytes stored, and level 1 halves them for a tenth of a
/// millisecond per group (LZ4 saved only 30% on real logprobs).
pub fn encode_payload(json: &[u8]) -> Vec<u8> {
    thread_local! {
        // A compression context per worker thread: creating one per group showed in profiles.
        static COMPRESSOR: std::cell::RefCell<Option<zstd::bulk::Compressor<'static>>> =
            const { std::cell::RefCell::new(None) };
    }
    COMPRESSOR.with_borrow_mut(|slot| {
        let compressor = slot
            .get_or_insert_with(|| zstd::bulk::Compressor::new(1).expect("zstd accepts level 1"));
        compressor
            .compress(json)
            .expect("compressing an in-memory buffer cannot fail")
    })
}

/// The JSON of a stored group.
pub fn decode_payload(stored: &[u8]) -> Result<Vec<u8>, ApiError> {
    let mut out = Vec::new();
    zstd::stream::copy_decode(stored, &mut out)
        .map_err(|err| ApiError::CorruptPayload(err.to_string()))?;
    Ok(out)
}

/// `/reset_data`: forgets the run's registration, envs, queue, buffers and batches.
pub async fn reset(db: &PgPool, run: &str) -> Result<(), ApiError> {
    let mut tx = db.begin().await?;
    load_run(&mut tx, run, true).await?;
    sqlx::query("DELETE FROM groups WHERE run_id = $1")
        .bind(run)
        .execute(&mut *tx)
        .await?;
    sqlx::query("DELETE FROM batches WHERE run_id = $1")
        .bind(run)
        .execute(&mut *tx)
        .await?;
    sqlx::query("DELETE FROM envs WHERE run_id = $1")
        .bind(run)
        .execute(&mut *tx)
        .await?;
    sqlx::query(
        "UPDATE runs SET registered = FALSE, wandb_group = NULL, wandb_project = NULL, batch_size = -1,
            max_token_len = -1, checkpoint_dir = '', save_checkpoint_interval = -1, num_steps = -1,
            started = FALSE, current_step = 0, requesters = 0
         WHERE id = $1",
    )
    .bind(run)
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(())
}

/// Queue depth and buffered groups per run, for `/metrics`.
pub async fn depth_by_run(db: &PgPool) -> Result<Vec<(String, i64, i64)>, ApiError> {
    Ok(sqlx::query_as(
        "SELECT r.id, coalesce(n.queued, 0), coalesce(n.buffered, 0)
         FROM runs r LEFT JOIN run_totals n ON n.run_id = r.id ORDER BY r.id",
    )
    .fetch_all(db)
    .await?)
}

/// Stores a trainer's report for a step.
pub async fn record_trainer_metrics(
    conn: &mut PgConnection,
    run: &str,
    report: &TrainerReport,
) -> Result<TrainerPoint, ApiError> {
    let metrics = serde_json::to_value(&report.values).expect("finite floats encode");
    let (at_ms,): (i64,) = sqlx::query_as(
        "INSERT INTO trainer_metrics (run_id, step, metrics) VALUES ($1, $2, $3)
         RETURNING (extract(epoch FROM at) * 1000)::bigint",
    )
    .bind(run)
    .bind(report.step)
    .bind(sqlx::types::Json(metrics))
    .fetch_one(conn)
    .await?;
    Ok(TrainerPoint {
        at_ms,
        step: report.step,
        values: report.values.clone(),
    })
}
