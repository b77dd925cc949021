//! Requests the way NVCF holds them: each runs as a job; an answer ready within the caller's
//! `NVCF-POLL-SECONDS` comes back at once (200), otherwise the caller gets 202 with the job's id
//! and asks `GET /v1/status/{id}` until it is done. Finished answers are kept until fetched or
//! until they expire; the number of unfinished jobs is bounded.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use axum::http::StatusCode;
use serde_json::Value;
use tokio::sync::watch;

use crate::envs::protein_binder::nim::shapes::Problem;

/// A job's outcome: the answer's body, or an error status with its problem.
pub type Outcome = Result<Value, (StatusCode, Problem)>;

struct Job {
    outcome: watch::Receiver<Option<Outcome>>,
    created: Instant,
    /// Who computes it, for the answer's `x-lachesis-backend` header.
    backend: &'static str,
}

/// The job table.
pub struct Jobs {
    table: Mutex<HashMap<String, Job>>,
    max_pending: usize,
    ttl: Duration,
}

/// What a caller gets now.
pub enum Answer {
    Ready(Outcome),
    Pending(String),
}

impl Jobs {
    pub fn new(max_pending: usize, ttl: Duration) -> Self {
        Self {
            table: Mutex::new(HashMap::new()),
            max_pending,
            ttl,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Job>> {
        self.table
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Starts `work` as a job, or refuses when too many are unfinished.
    pub fn start<F>(&self, backend: &'static str, work: F) -> Result<String, usize>
    where
        F: Future<Output = Outcome> + Send + 'static,
    {
        let mut table = self.lock();
        let ttl = self.ttl;
        table.retain(|_, job| job.created.elapsed() < ttl);
        let pending = table
            .values()
            .filter(|job| job.outcome.borrow().is_none())
            .count();
        if pending >= self.max_pending {
            return Err(self.max_pending);
        }
        let id = uuid_like();
        let (sender, receiver) = watch::channel(None);
        tokio::spawn(async move {
            let outcome = work.await;
            let _ = sender.send(Some(outcome));
        });
        table.insert(
            id.clone(),
            Job {
                outcome: receiver,
                created: Instant::now(),
                backend,
            },
        );
        Ok(id)
    }

    /// Waits up to `hold` for job `id`; a finished job is handed over and forgotten. `None`: no
    /// such job (never started, already fetched, or expired).
    pub async fn wait(&self, id: &str, hold: Duration) -> Option<(Answer, &'static str)> {
        let (mut receiver, backend) = {
            let table = self.lock();
            let job = table.get(id)?;
            (job.outcome.clone(), job.backend)
        };
        let finished = tokio::time::timeout(hold, receiver.wait_for(Option::is_some)).await;
        match finished {
            Ok(Ok(outcome)) => {
                let outcome = outcome.clone()?;
                self.lock().remove(id);
                Some((Answer::Ready(outcome), backend))
            }
            Ok(Err(_)) => {
                self.lock().remove(id);
                Some((
                    Answer::Ready(Err((
                        StatusCode::INTERNAL_SERVER_ERROR,
                        Problem {
                            kind: "about:blank".into(),
                            title: "Internal Server Error".into(),
                            status: 500,
                            detail: "the job stopped without an answer".into(),
                            request_id: Some(id.to_string()),
                        },
                    ))),
                    backend,
                ))
            }
            Err(_) => Some((Answer::Pending(id.to_string()), backend)),
        }
    }
}

/// A request id in NVCF's shape (a version-4 UUID's layout), from the OS's randomness.
fn uuid_like() -> String {
    let bytes: [u8; 16] = rand::random();
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}
