//! The status sampler: once a second, for each run this instance saw activity on (a group posted,
//! a batch taken), record its step and queue depth in `run_status_samples` and push them to the
//! run's live subscribers. Idle runs cost nothing.

use std::collections::HashSet;
use std::sync::Mutex;
use std::time::Duration;

use lachesis_shared::live::{LiveEvent, Topic};
use lachesis_shared::runs::RunStatusPoint;
use sqlx::PgPool;
use tokio::sync::watch;
use tokio::task::JoinHandle;

const PERIOD: Duration = Duration::from_secs(1);

/// Runs touched since the last sample.
#[derive(Default)]
pub struct Activity {
    touched: Mutex<HashSet<String>>,
}

impl Activity {
    pub fn touch(&self, run: &str) {
        let mut touched = self.touched.lock().unwrap_or_else(|p| p.into_inner());
        if !touched.contains(run) {
            touched.insert(run.to_string());
        }
    }

    fn take(&self) -> Vec<String> {
        let mut touched = self.touched.lock().unwrap_or_else(|p| p.into_inner());
        touched.drain().collect()
    }
}

/// Samples until `shutdown`, supervised: a panic restarts it after a pause. A failed sample is
/// not a failure of the sampler (the next second tries again), only logged.
pub fn spawn(
    tasks: &crate::supervisor::Supervisor,
    db: PgPool,
    activity: std::sync::Arc<Activity>,
    shutdown: watch::Receiver<bool>,
) -> JoinHandle<()> {
    let sample_touched = |(db, activity): (PgPool, std::sync::Arc<Activity>)| async move {
        for run in activity.take() {
            if let Err(e) = sample(&db, &run).await {
                tracing::warn!(%run, error = %e, "status sample failed");
            }
        }
        Ok(())
    };
    tasks.spawn_every(
        "status-sampler",
        PERIOD,
        shutdown,
        (db, activity),
        sample_touched,
    )
}

/// Records and publishes one sample of `run`.
pub async fn sample(db: &PgPool, run: &str) -> Result<RunStatusPoint, sqlx::Error> {
    let mut tx = db.begin().await?;
    let (at_ms, step, queue_size): (i64, i64, i64) = sqlx::query_as(
        "INSERT INTO run_status_samples (run_id, step, queue_size)
         SELECT id, current_step,
                coalesce((SELECT queued FROM run_totals WHERE run_id = $1), 0)
         FROM runs WHERE id = $1
         RETURNING (extract(epoch FROM at) * 1000)::bigint, step, queue_size",
    )
    .bind(run)
    .fetch_one(&mut *tx)
    .await?;
    let point = RunStatusPoint {
        at_ms,
        step,
        queue_size,
    };
    let topic = Topic::Run {
        run: run.to_string(),
    };
    crate::live::publish(&mut *tx, &topic, &LiveEvent::Status(point)).await?;
    tx.commit().await?;
    Ok(point)
}
