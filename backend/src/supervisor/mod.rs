//! Supervision of the server's long-running tasks, so that nothing stays silently dead: the live
//! bridge, the status sampler, in-process environments and their showcases (each spawned through
//! [`Supervisor::spawn`]), and the embedded model's worker thread (which restarts itself and is
//! only watched here, [`Supervisor::watch_engine`]).
//!
//! A task that fails (returns an error or panics) is logged, counted and started again after a
//! pause that doubles with each failure in a row ([`Backoff`], the same rule the engine's worker
//! uses), up to a cap, and starts from the shortest pause again once it has run healthily for a
//! while. A task that returns `Ok` has finished (the server is stopping, or it has nothing left to
//! do) and stays stopped.
//!
//! Every task's state is kept for `GET /api/system/tasks` ([`routes`]) and `/metrics`
//! (`lachesis_task_restarts_total`, `lachesis_task_up`). Error texts are stored redacted
//! ([`redact`]): a failure to reach Postgres names the database URL.

pub mod config;
pub mod redact;
pub mod routes;

use std::any::Any;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use lachesis_shared::system::{TaskState, TaskStatus};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;

pub use config::RestartArgs;
pub use lachesis_inference::backoff::{Backoff, Streak};

/// The registry of supervised tasks. Cheap to clone.
#[derive(Clone)]
pub struct Supervisor {
    inner: Arc<Inner>,
}

type Probe = Box<dyn Fn() -> TaskStatus + Send + Sync>;

struct Inner {
    backoff: Backoff,
    tasks: Mutex<BTreeMap<String, Record>>,
    /// Tasks restarted by someone else (the engine's worker), read when asked.
    probes: Mutex<Vec<(String, Probe)>>,
}

struct Record {
    state: TaskState,
    restarts: u64,
    last_error: Option<String>,
    since: SystemTime,
    retry_at: Option<SystemTime>,
}

impl Default for Supervisor {
    fn default() -> Self {
        Self::new(Backoff::default())
    }
}

impl Supervisor {
    pub fn new(backoff: Backoff) -> Self {
        Self {
            inner: Arc::new(Inner {
                backoff,
                tasks: Mutex::default(),
                probes: Mutex::default(),
            }),
        }
    }

    pub fn backoff(&self) -> Backoff {
        self.inner.backoff
    }

    /// Runs `job` on a clone of `context` every `every`, the first time `every` after the start,
    /// until `shutdown` turns true, supervised as [`Supervisor::spawn`]. A job that fails is
    /// logged and the next tick tries again: a periodic sweep that fails once has not failed as a
    /// task.
    pub fn spawn_every<C, F, Fut>(
        &self,
        name: &str,
        every: Duration,
        shutdown: watch::Receiver<bool>,
        context: C,
        job: F,
    ) -> JoinHandle<()>
    where
        C: Clone + Send + 'static,
        F: Fn(C) -> Fut + Clone + Send + 'static,
        Fut: Future<Output = anyhow::Result<()>> + Send + 'static,
    {
        let task = name.to_owned();
        self.spawn(name, shutdown.clone(), move || {
            let (job, context, task) = (job.clone(), context.clone(), task.clone());
            let mut shutdown = shutdown.clone();
            async move {
                let mut tick = tokio::time::interval_at(Instant::now() + every, every);
                tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                loop {
                    tokio::select! {
                        _ = tick.tick() => {}
                        _ = shutdown.changed() => return Ok(()),
                    }
                    if let Err(e) = job(context.clone()).await {
                        let error = redact::text(&format!("{e:#}"));
                        tracing::warn!(task = %task, %error, "a periodic job failed");
                    }
                }
            }
        })
    }

    /// Runs the task `make` builds until it returns `Ok` or `shutdown` turns true, building and
    /// starting it again after each failure. A name already taken gets a number (`env:x#2`).
    /// Aborting the returned handle aborts the running attempt too.
    pub fn spawn<F, Fut>(
        &self,
        name: &str,
        mut shutdown: watch::Receiver<bool>,
        mut make: F,
    ) -> JoinHandle<()>
    where
        F: FnMut() -> Fut + Send + 'static,
        Fut: Future<Output = anyhow::Result<()>> + Send + 'static,
    {
        let name = self.register(name);
        let this = self.clone();
        tokio::spawn(async move {
            let mut streak = Streak::default();
            loop {
                let started = Instant::now();
                let mut attempt = AbortOnDrop(tokio::spawn(make()));
                let failure = match (&mut attempt.0).await {
                    Ok(Ok(())) => None,
                    Ok(Err(e)) => Some(format!("{e:#}")),
                    Err(e) if e.is_panic() => {
                        Some(format!("panicked: {}", panic_message(e.into_panic())))
                    }
                    // Cancelled: the runtime is shutting down.
                    Err(_) => None,
                };
                let Some(error) = failure else {
                    this.update(&name, |r| r.state = TaskState::Stopped);
                    tracing::debug!(task = %name, "server task stopped");
                    return;
                };
                let error = redact::text(&error);
                if *shutdown.borrow() {
                    tracing::warn!(task = %name, %error, "server task failed while stopping");
                    this.update(&name, |r| {
                        r.state = TaskState::Stopped;
                        r.last_error = Some(error);
                    });
                    return;
                }
                let wait = streak.failed(&this.inner.backoff, started.elapsed());
                let mut restarts = 0;
                this.update(&name, |r| {
                    r.state = TaskState::BackingOff;
                    r.restarts += 1;
                    r.last_error = Some(error.clone());
                    r.retry_at = Some(SystemTime::now() + wait);
                    restarts = r.restarts;
                });
                tracing::error!(
                    task = %name,
                    %error,
                    restarts,
                    wait_ms = wait.as_millis() as u64,
                    "server task failed; it starts again after a pause"
                );
                tokio::select! {
                    () = tokio::time::sleep(wait) => {}
                    () = signalled(&mut shutdown) => {
                        this.update(&name, |r| r.state = TaskState::Stopped);
                        return;
                    }
                }
                this.update(&name, |r| r.state = TaskState::Running);
                tracing::warn!(task = %name, restarts, "server task restarted");
            }
        })
    }

    /// Lists the embedded engine's worker, which restarts itself after a panic (with the same
    /// backoff) on its own thread.
    pub fn watch_engine(&self, engine: &lachesis_inference::Engine) {
        let engine = engine.clone();
        self.probe("inference-worker", move || {
            let health = engine.health();
            TaskStatus {
                name: String::new(),
                state: match health.backing_off_until {
                    Some(_) => TaskState::BackingOff,
                    None => TaskState::Running,
                },
                restarts: health.restarts,
                last_error: health.last_failure.as_deref().map(redact::text),
                since_ms: unix_ms(health.since),
                retry_at_ms: health.backing_off_until.map(unix_ms),
            }
        });
    }

    /// Lists a task supervised elsewhere: `read` tells its state when asked (its name is set here).
    pub fn probe(&self, name: &str, read: impl Fn() -> TaskStatus + Send + Sync + 'static) {
        lock(&self.inner.probes).push((name.to_owned(), Box::new(read)));
    }

    /// Every task, supervised here or watched, sorted by name.
    pub fn snapshot(&self) -> Vec<TaskStatus> {
        let mut all: Vec<TaskStatus> = lock(&self.inner.tasks)
            .iter()
            .map(|(name, record)| TaskStatus {
                name: name.clone(),
                state: record.state,
                restarts: record.restarts,
                last_error: record.last_error.clone(),
                since_ms: unix_ms(record.since),
                retry_at_ms: match record.state {
                    TaskState::BackingOff => record.retry_at.map(unix_ms),
                    _ => None,
                },
            })
            .collect();
        for (name, read) in lock(&self.inner.probes).iter() {
            all.push(TaskStatus {
                name: name.clone(),
                ..read()
            });
        }
        all.sort_by(|a, b| a.name.cmp(&b.name));
        all
    }

    fn register(&self, wanted: &str) -> String {
        let mut tasks = lock(&self.inner.tasks);
        let name = (1..)
            .map(|n| match n {
                1 => wanted.to_owned(),
                n => format!("{wanted}#{n}"),
            })
            .find(|name| !tasks.contains_key(name))
            .unwrap_or_else(|| wanted.to_owned());
        tasks.insert(
            name.clone(),
            Record {
                state: TaskState::Running,
                restarts: 0,
                last_error: None,
                since: SystemTime::now(),
                retry_at: None,
            },
        );
        name
    }

    /// Changes a task's record; `since` moves when its state does.
    fn update(&self, name: &str, change: impl FnOnce(&mut Record)) {
        if let Some(record) = lock(&self.inner.tasks).get_mut(name) {
            let before = record.state;
            change(record);
            if record.state != before {
                record.since = SystemTime::now();
            }
        }
    }
}

// The registry's sections never panic midway, so a poisoned lock holds whole values.
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

/// Aborts the attempt when the supervising task is dropped or aborted.
struct AbortOnDrop(JoinHandle<anyhow::Result<()>>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Resolves when `shutdown` turns true; never when its sender is gone (no signal will come).
async fn signalled(shutdown: &mut watch::Receiver<bool>) {
    if shutdown.wait_for(|stop| *stop).await.is_err() {
        std::future::pending::<()>().await;
    }
}

fn panic_message(panic: Box<dyn Any + Send>) -> String {
    match panic.downcast::<String>() {
        Ok(message) => *message,
        Err(panic) => panic.downcast_ref::<&str>().map_or_else(
            || "a panic without a message".to_owned(),
            |s| (*s).to_owned(),
        ),
    }
}

fn unix_ms(at: SystemTime) -> i64 {
    at.duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or(Duration::ZERO)
        .as_millis()
        .try_into()
        .unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests;
