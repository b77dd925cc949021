//! Batch formation and serving in Postgres: `/batch` locks the run's row, serves the oldest formed
//! batch, and when none is left forms every batch the queue allows with the pure rules of
//! `packing`, so no group is ever handed out twice, also across server instances.

use sqlx::{PgConnection, PgPool};

use super::error::ApiError;
use super::packing::{self, EnvShare, QueuedGroup};
use super::store::{decode_payload, load_run};

/// The outcome of a `/batch` call.
pub enum BatchOutcome {
    NotRegistered,
    Empty,
    /// The groups' payloads in batch order, and the distinct weight versions among them.
    Batch {
        payloads: Vec<Vec<u8>>,
        weight_versions: Vec<i64>,
    },
}

/// `/batch`: serves the oldest formed batch; when none is left, forms every batch the queue allows
/// (advancing the step by their number, as atroposlib does) and serves the first.
pub async fn next_batch(db: &PgPool, run: &str) -> Result<(BatchOutcome, Vec<usize>), ApiError> {
    let mut tx = db.begin().await?;
    let row = load_run(&mut tx, run, true).await?;
    if !row.registered {
        return Ok((BatchOutcome::NotRegistered, Vec::new()));
    }
    if !row.started {
        sqlx::query("UPDATE runs SET started = TRUE WHERE id = $1")
            .bind(run)
            .execute(&mut *tx)
            .await?;
    }
    let mut formed_sizes = Vec::new();
    let mut batch_id = claim_oldest_batch(&mut tx, run).await?;
    if batch_id.is_none() {
        let formed = form_all_batches(&mut tx, run, row.batch_size).await?;
        formed_sizes = formed.iter().map(|(_, n)| *n).collect();
        if !formed.is_empty() {
            batch_id = claim_oldest_batch(&mut tx, run).await?;
        }
    }
    let Some(batch_id) = batch_id else {
        tx.commit().await?;
        return Ok((BatchOutcome::Empty, formed_sizes));
    };
    let rows: Vec<(Vec<u8>, Option<i64>)> = sqlx::query_as(
        "SELECT payload, weight_version FROM groups WHERE batch_id = $1 ORDER BY batch_pos",
    )
    .bind(batch_id)
    .fetch_all(&mut *tx)
    .await?;
    tx.commit().await?;
    let rows = rows
        .into_iter()
        .map(|(payload, version)| decode_payload(&payload).map(|json| (json, version)))
        .collect::<Result<Vec<_>, _>>()?;
    let mut weight_versions: Vec<i64> = rows.iter().filter_map(|(_, v)| *v).collect();
    weight_versions.sort_unstable();
    weight_versions.dedup();
    let payloads = rows.into_iter().map(|(p, _)| p).collect();
    Ok((
        BatchOutcome::Batch {
            payloads,
            weight_versions,
        },
        formed_sizes,
    ))
}

/// Marks the run's oldest unserved batch as served and returns it, in one statement.
async fn claim_oldest_batch(tx: &mut PgConnection, run: &str) -> Result<Option<i64>, ApiError> {
    Ok(sqlx::query_scalar(
        "UPDATE batches SET served_at = now()
         WHERE id = (SELECT id FROM batches WHERE run_id = $1 AND served_at IS NULL ORDER BY id LIMIT 1)
         RETURNING id",
    )
    .bind(run)
    .fetch_optional(tx)
    .await?)
}

/// Forms and stores every batch the run's queue allows; returns (batch id, groups in it) in order.
async fn form_all_batches(
    tx: &mut PgConnection,
    run: &str,
    batch_size: i64,
) -> Result<Vec<(i64, usize)>, ApiError> {
    let queue: Vec<QueuedGroup> = sqlx::query_as::<_, (i64, Option<i64>, i32)>(
        "SELECT id, env_id, n_seqs FROM groups WHERE run_id = $1 AND state = 'queued' ORDER BY queue_pos",
    )
    .bind(run)
    .fetch_all(&mut *tx)
    .await?
    .into_iter()
    .map(|(id, env_id, n)| QueuedGroup { id, env_id, n_seqs: n.max(0) as usize })
    .collect();
    let envs: Vec<EnvShare> = sqlx::query_as::<_, (i32, bool, Option<f64>)>(
        "SELECT env_id, connected, min_batch_allocation FROM envs WHERE run_id = $1 ORDER BY env_id",
    )
    .bind(run)
    .fetch_all(&mut *tx)
    .await?
    .into_iter()
    .map(|(env_id, connected, min_batch_allocation)| EnvShare {
        env_id: i64::from(env_id),
        connected,
        min_batch_allocation,
    })
    .collect();
    // The packing search is CPU work over the whole queue (a subset-sum table of queued groups by
    // pack size, which `--max-group-size` bounds): off the async workers.
    let batch_size = usize::try_from(batch_size).unwrap_or(0);
    let (batches, _rest) =
        tokio::task::spawn_blocking(move || packing::form_batches(queue, batch_size, &envs))
            .await
            .map_err(|e| sqlx::Error::Protocol(format!("batch packing failed: {e}")))?;
    if batches.is_empty() {
        return Ok(Vec::new());
    }
    let seq_counts: Vec<i32> = batches
        .iter()
        .map(|b| b.iter().map(|g| g.n_seqs).sum::<usize>() as i32)
        .collect();
    let batch_ids: Vec<i64> = sqlx::query_scalar(
        "INSERT INTO batches (id, run_id, seq_count)
         SELECT nextval('batches_id_seq'), $1, c FROM unnest($2::int[]) WITH ORDINALITY AS u(c, ord)
         ORDER BY ord RETURNING id",
    )
    .bind(run)
    .bind(&seq_counts)
    .fetch_all(&mut *tx)
    .await?;
    let mut sorted_ids = batch_ids.clone();
    sorted_ids.sort_unstable();
    let (mut group_ids, mut owners, mut positions) = (Vec::new(), Vec::new(), Vec::new());
    for (batch, &batch_id) in batches.iter().zip(&sorted_ids) {
        for (pos, group) in batch.iter().enumerate() {
            group_ids.push(group.id);
            owners.push(batch_id);
            positions.push(pos as i32);
        }
    }
    sqlx::query(
        "UPDATE groups g SET state = 'batched', batch_id = u.batch_id, batch_pos = u.pos
         FROM unnest($1::bigint[], $2::bigint[], $3::int[]) AS u(id, batch_id, pos)
         WHERE g.id = u.id AND g.state = 'queued'",
    )
    .bind(&group_ids)
    .bind(&owners)
    .bind(&positions)
    .execute(&mut *tx)
    .await?;
    sqlx::query("UPDATE runs SET current_step = current_step + $2 WHERE id = $1")
        .bind(run)
        .bind(batches.len() as i64)
        .execute(&mut *tx)
        .await?;
    Ok(sorted_ids
        .into_iter()
        .zip(batches.iter().map(Vec::len))
        .collect())
}
