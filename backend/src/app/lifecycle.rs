//! How an instance comes and goes: the limits on waiting for Postgres and on shutting down
//! (flags), and the drain that SIGTERM starts. Draining, an instance answers every new request 503
//! (`/health/*` excepted, so `/health/ready` reports it), lets the requests in its hands finish
//! until close to the deadline, then hands the rest back with a 503 and `Retry-After`: a client
//! retries them elsewhere, and nothing it was not told succeeded is lost.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use tokio::time::Instant;

use super::AppState;
use crate::hosting::error::HostingError;

/// Flags and environment variables (`None`: not given, the default applies).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct LifecycleArgs {
    /// Milliseconds a request waits for a database connection before it is answered 503 with
    /// Retry-After (Postgres away or restarting, or every pooled connection busy).
    #[arg(long, env = "LACHESIS_DB_ACQUIRE_TIMEOUT_MS")]
    pub db_acquire_timeout_ms: Option<u64>,
    /// Milliseconds `/health/ready` gives Postgres to answer before reporting it down.
    #[arg(long, env = "LACHESIS_READY_TIMEOUT_MS")]
    pub ready_timeout_ms: Option<u64>,
    /// Seconds from SIGTERM to exit: requests in flight finish within it or are answered 503, and
    /// the process exits even if one is stuck.
    #[arg(long, env = "LACHESIS_SHUTDOWN_TIMEOUT_S")]
    pub shutdown_timeout_s: Option<u64>,
}

/// The resolved limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lifecycle {
    pub db_acquire_timeout: Duration,
    pub ready_timeout: Duration,
    pub shutdown_timeout: Duration,
}

impl Default for Lifecycle {
    fn default() -> Self {
        Self {
            db_acquire_timeout: crate::db::DEFAULT_ACQUIRE_TIMEOUT,
            // A probe's own timeout is commonly 1 s: readiness answers within it.
            ready_timeout: Duration::from_millis(800),
            // Kubernetes' default grace period before SIGKILL.
            shutdown_timeout: Duration::from_secs(30),
        }
    }
}

impl Lifecycle {
    pub fn resolve(args: &LifecycleArgs) -> anyhow::Result<Self> {
        let d = Self::default();
        // Zero would refuse everything; beyond an hour is a unit mistake.
        let within = |name: &str, value: Option<u64>, max: u64| match value {
            Some(v) if v == 0 || v > max => {
                Err(anyhow::anyhow!("{name} must be between 1 and {max}"))
            }
            given => Ok(given),
        };
        let acquire = within(
            "--db-acquire-timeout-ms",
            args.db_acquire_timeout_ms,
            3_600_000,
        )?;
        let ready = within("--ready-timeout-ms", args.ready_timeout_ms, 3_600_000)?;
        let shutdown = within("--shutdown-timeout-s", args.shutdown_timeout_s, 3_600)?;
        Ok(Self {
            db_acquire_timeout: acquire.map_or(d.db_acquire_timeout, Duration::from_millis),
            ready_timeout: ready.map_or(d.ready_timeout, Duration::from_millis),
            shutdown_timeout: shutdown.map_or(d.shutdown_timeout, Duration::from_secs),
        })
    }
}

/// Whether the instance is draining, and the requests still in its hands.
pub struct Drain {
    draining: AtomicBool,
    in_flight: AtomicUsize,
    idle: tokio::sync::Notify,
    handed_back: tokio::sync::watch::Sender<bool>,
}

impl Default for Drain {
    fn default() -> Self {
        Self {
            draining: AtomicBool::new(false),
            in_flight: AtomicUsize::new(0),
            idle: tokio::sync::Notify::new(),
            handed_back: tokio::sync::watch::Sender::new(false),
        }
    }
}

/// A request in the instance's hands, counted until dropped (answered or cancelled).
struct InFlight(Arc<Drain>);

impl Drop for InFlight {
    fn drop(&mut self) {
        if self.0.in_flight.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.0.idle.notify_waiters();
        }
    }
}

impl Drain {
    pub fn is_draining(&self) -> bool {
        self.draining.load(Ordering::SeqCst)
    }

    /// New requests are answered 503 from now on.
    pub fn begin(&self) {
        self.draining.store(true, Ordering::SeqCst);
    }

    pub fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::SeqCst)
    }

    fn enter(self: &Arc<Self>) -> InFlight {
        self.in_flight.fetch_add(1, Ordering::SeqCst);
        InFlight(self.clone())
    }

    /// Waits until no request is in flight (`true`) or `until` passes (`false`).
    pub async fn wait_idle(&self, until: Instant) -> bool {
        loop {
            let idle = self.idle.notified();
            tokio::pin!(idle);
            // Registered before the count is read, so a last request leaving in between wakes us.
            idle.as_mut().enable();
            if self.in_flight() == 0 {
                return true;
            }
            tokio::select! {
                () = idle => {}
                () = tokio::time::sleep_until(until) => return self.in_flight() == 0,
            }
        }
    }

    /// Answers every request still in flight 503 now; their handlers are dropped, so a
    /// transaction they had open rolls back.
    pub fn hand_back(&self) {
        self.handed_back.send_replace(true);
    }
}

fn is_health(path: &str) -> bool {
    path.starts_with("/health/")
}

/// Counts requests in flight; while draining, refuses new ones and, at the deadline, answers those
/// left. Health checks pass untouched.
pub async fn track(State(state): State<AppState>, req: Request, next: Next) -> Response {
    if is_health(req.uri().path()) {
        return next.run(req).await;
    }
    let drain = state.drain.clone();
    // Counted before the check: a drain that begins in between either sees this request or is
    // seen by it (both are SeqCst).
    let _in_flight = drain.enter();
    if drain.is_draining() {
        return HostingError::ShuttingDown.into_response();
    }
    let mut handed_back = drain.handed_back.subscribe();
    let handed_back = async move { handed_back.wait_for(|handed| *handed).await.is_ok() };
    tokio::select! {
        response = next.run(req) => response,
        true = handed_back => HostingError::ShuttingDown.into_response(),
    }
}

/// The phases of a shutdown within its deadline: requests get all but a tail of it; the tail is
/// for closing connections and tasks, then for releasing holds and closing the pool.
#[derive(Debug, Clone, Copy)]
pub struct Deadline {
    pub requests: Instant,
    pub tasks: Instant,
    pub end: Instant,
}

impl Deadline {
    pub fn from_now(limit: Duration) -> Self {
        let start = Instant::now();
        let tail = (limit / 4).min(Duration::from_secs(3));
        Self {
            requests: start + limit - tail,
            tasks: start + limit - tail / 2,
            end: start + limit,
        }
    }
}

/// Serves until `shutdown` resolves, then drains (`on_drain` stops what else takes work): new
/// requests are answered 503 while those in flight may finish until `Deadline::requests`; any left
/// then are answered 503, and the listener and connections are closed by `Deadline::tasks`.
pub async fn serve_until_drained(
    listener: tokio::net::TcpListener,
    service: axum::extract::connect_info::IntoMakeServiceWithConnectInfo<
        axum::Router,
        std::net::SocketAddr,
    >,
    state: &AppState,
    shutdown: impl Future<Output = ()> + Send + 'static,
    on_drain: impl FnOnce(),
) -> anyhow::Result<Deadline> {
    let (stop_serving, serving_stopped) = tokio::sync::oneshot::channel::<()>();
    // The listener stays open while draining, so `/health/ready` can say so; a request waiting on
    // a stuck handler never holds the exit, since the deadline aborts what is left.
    let mut serving = tokio::spawn(
        axum::serve(listener, service)
            .with_graceful_shutdown(async move {
                let _ = serving_stopped.await;
            })
            .into_future(),
    );
    tokio::select! {
        () = shutdown => {}
        stopped = &mut serving => {
            stopped??;
            return Ok(Deadline::from_now(Duration::ZERO));
        }
    }
    let deadline = Deadline::from_now(state.lifecycle.shutdown_timeout);
    let drain = &state.drain;
    drain.begin();
    tracing::info!(
        in_flight = drain.in_flight(),
        deadline_s = state.lifecycle.shutdown_timeout.as_secs(),
        "draining: new requests are answered 503"
    );
    on_drain();
    if !drain.wait_idle(deadline.requests).await {
        tracing::warn!(
            in_flight = drain.in_flight(),
            "shutdown deadline: the requests still in flight are answered 503"
        );
        drain.hand_back();
    }
    let _ = stop_serving.send(());
    match tokio::time::timeout_at(deadline.tasks, &mut serving).await {
        Ok(stopped) => stopped??,
        Err(_) => {
            tracing::warn!("shutdown deadline: connections still open are closed");
            serving.abort();
        }
    }
    Ok(deadline)
}

/// Releases the simulated holds this instance still has open (see
/// [`crate::ledger::Ledger::release_own_holds`]); what is left to the deadline is recovered at the
/// next start instead.
pub async fn release_holds(ledger: &crate::ledger::Ledger, until: Instant) {
    match tokio::time::timeout_at(until, ledger.release_own_holds()).await {
        Ok(Ok(0)) => {}
        Ok(Ok(released)) => tracing::info!(released, "this instance's open holds released"),
        Ok(Err(e)) => tracing::warn!(error = %e, "open holds left to the next start's recovery"),
        Err(_) => tracing::warn!("shutdown deadline: open holds left to the next start's recovery"),
    }
}

/// Closes the pool; a connection a cut-off task still holds is not waited for past `until`.
pub async fn close_pool(db: &sqlx::PgPool, until: Instant) {
    if tokio::time::timeout_at(until, db.close()).await.is_err() {
        tracing::warn!("shutdown deadline: database connections still in use are dropped");
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: LifecycleArgs,
    }

    #[test]
    fn flags_are_parsed_and_defaults_apply() {
        let given = Cli::try_parse_from([
            "x",
            "--db-acquire-timeout-ms",
            "250",
            "--ready-timeout-ms",
            "300",
            "--shutdown-timeout-s",
            "7",
        ])
        .unwrap();
        let resolved = Lifecycle::resolve(&given.args).unwrap();
        assert_eq!(resolved.db_acquire_timeout, Duration::from_millis(250));
        assert_eq!(resolved.ready_timeout, Duration::from_millis(300));
        assert_eq!(resolved.shutdown_timeout, Duration::from_secs(7));
        let defaults = Lifecycle::resolve(&LifecycleArgs::default()).unwrap();
        assert_eq!(defaults, Lifecycle::default());
        assert_eq!(defaults.db_acquire_timeout, Duration::from_secs(5));
        assert_eq!(defaults.shutdown_timeout, Duration::from_secs(30));
        for bad in [
            LifecycleArgs {
                shutdown_timeout_s: Some(0),
                ..LifecycleArgs::default()
            },
            LifecycleArgs {
                db_acquire_timeout_ms: Some(u64::MAX),
                ..LifecycleArgs::default()
            },
        ] {
            assert!(Lifecycle::resolve(&bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn requests_get_most_of_the_deadline() {
        let d = Deadline::from_now(Duration::from_secs(30));
        assert_eq!(d.end - d.requests, Duration::from_secs(3));
        assert!(d.requests < d.tasks && d.tasks < d.end);
        let short = Deadline::from_now(Duration::from_secs(1));
        assert_eq!(short.end - short.requests, Duration::from_millis(250));
    }

    #[tokio::test]
    async fn a_drain_waits_for_requests_in_flight() {
        let drain = Arc::new(Drain::default());
        let request = drain.enter();
        drain.begin();
        assert!(drain.is_draining());
        let soon = Instant::now() + Duration::from_millis(20);
        assert!(!drain.wait_idle(soon).await, "a request is still in flight");
        let waiter = {
            let drain = drain.clone();
            tokio::spawn(async move {
                drain
                    .wait_idle(Instant::now() + Duration::from_secs(60))
                    .await
            })
        };
        drop(request);
        assert!(waiter.await.unwrap());
        assert_eq!(drain.in_flight(), 0);
    }
}
