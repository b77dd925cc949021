//! Serving an environment to the trajectory API, as atroposlib's `BaseEnv.serve` does
//! (`env_manager` + `handle_env` + `handle_send_to_api`): register, then every poll read
//! `/status-env`, stop past `total_steps`, pause (and backlog in-flight items) while the queue
//! holds `max_batches_offpolicy` batches, otherwise keep the allowed number of `collect` calls in
//! flight; each finished group is checked and posted. The decisions are the pure functions of
//! [`super::pacing`].
//!
//! The runner is a plain async fn, so it runs in its own process (`lachesis env serve`) or inside
//! `lachesis serve` alike; a `watch` channel set to `true` stops it.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use futures::future::{AbortHandle, Aborted, BoxFuture, abortable};
use futures::stream::FuturesUnordered;
use futures::{FutureExt, StreamExt};
use lachesis_shared::atropos::RegisterEnv;
use tokio::sync::watch;
use tokio::time::Instant;

use super::client::{ClientError, TrajectoryClient};
pub use super::pacing::{Limits, Plan, Verdict, check_group, plan, worker_budget};
use super::{EnvError, Environment, Item};
use crate::policy::Policy;

#[derive(Debug, Clone, PartialEq)]
pub struct RunnerConfig {
    /// `default` posts to the legacy paths, any other name under `/runs/{run}`.
    pub run: String,
    /// Sent as `Authorization: Bearer` when the API requires it.
    pub api_token: Option<String>,
    /// `desired_name` at registration; the environment's name when `None`.
    pub desired_name: Option<String>,
    /// atroposlib's `inference_weight`.
    pub weight: f64,
    pub min_batch_allocation: Option<f64>,
    /// Most `collect` calls in flight at once.
    pub max_workers: usize,
    /// Pause while the queue holds this many batches (0: never pause).
    pub max_batches_offpolicy: i64,
    /// Stop once the trainer's step passes this; `None` takes the trainer's `num_steps`, and a
    /// non-positive limit means "until shut down".
    pub total_steps: Option<i64>,
    /// Drop groups whose scores are all equal (they carry no GRPO signal); never applied to
    /// groups of one sequence, which atroposlib wrongly dropped (Atropos issue #34).
    pub ensure_scores_are_not_same: bool,
    /// Send each sequence's chat messages along (atroposlib's `include_messages`).
    pub include_messages: bool,
    /// A `collect` running longer than this is abandoned.
    pub worker_timeout: Duration,
    pub poll_interval: Duration,
    /// Wait between registration attempts while the trainer has not started.
    pub register_interval: Duration,
    /// Tries per API call (first included) on connection errors and 5xx.
    pub tries: usize,
    pub backoff: Duration,
    pub request_timeout: Duration,
    /// How long the trainer may leave the environment paused (its queue full, no groups taken)
    /// before the runner says it is no longer attached.
    pub detach_after: Duration,
}

/// A trainer that has taken no groups for a minute has, for a viewer, let the environment go.
pub const DEFAULT_DETACH_AFTER: Duration = Duration::from_secs(60);

impl Default for RunnerConfig {
    /// atroposlib's defaults where it has one.
    fn default() -> Self {
        Self {
            run: crate::trajectory::DEFAULT_RUN.to_string(),
            api_token: None,
            desired_name: None,
            weight: 1.0,
            min_batch_allocation: None,
            max_workers: 8,
            max_batches_offpolicy: 3,
            total_steps: None,
            ensure_scores_are_not_same: true,
            include_messages: false,
            worker_timeout: Duration::from_secs(600),
            poll_interval: Duration::from_millis(100),
            register_interval: Duration::from_secs(1),
            tries: 3,
            backoff: Duration::from_millis(500),
            request_timeout: Duration::from_secs(120),
            detach_after: DEFAULT_DETACH_AFTER,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum RunnerError {
    #[error(transparent)]
    Api(#[from] ClientError),
    #[error(transparent)]
    Env(#[from] EnvError),
    #[error("{0}")]
    Config(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    TotalSteps,
    Shutdown,
    ItemsExhausted,
}

/// What a run did, for logs and tests.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunReport {
    pub env_id: Option<i64>,
    pub stopped_by: Option<StopReason>,
    pub groups_sent: u64,
    pub dropped_same_scores: u64,
    pub dropped_too_long: u64,
    pub dropped_wrong_size: u64,
    pub empty_collects: u64,
    pub collect_errors: u64,
    pub send_errors: u64,
    pub timeouts: u64,
}

/// How one worker ended.
enum Outcome {
    Sent,
    Dropped(Verdict),
    Empty,
    CollectFailed(EnvError),
    SendFailed(ClientError),
    TimedOut,
}

/// Serves `env` to the trajectory API at `api` until `total_steps`, exhaustion, or `shutdown`
/// turns `true` (a dropped sender is taken as "no signal will come").
pub async fn run(
    api: &str,
    env: &dyn Environment,
    policy: Arc<dyn Policy>,
    config: RunnerConfig,
    shutdown: watch::Receiver<bool>,
) -> Result<RunReport, RunnerError> {
    run_attached(api, env, policy, config, shutdown, &watch::channel(false).0).await
}

/// [`run`], saying in `attached` whether a trainer has taken this environment on: `true` from its
/// registration while the trainer takes groups, `false` once it has left the environment paused
/// for `detach_after` (a trainer that finished or died), `true` again when groups flow, and
/// `false` when the runner ends, however it ends.
pub async fn run_attached(
    api: &str,
    env: &dyn Environment,
    policy: Arc<dyn Policy>,
    config: RunnerConfig,
    mut shutdown: watch::Receiver<bool>,
    attached: &watch::Sender<bool>,
) -> Result<RunReport, RunnerError> {
    struct Detach<'a>(&'a watch::Sender<bool>);
    impl Drop for Detach<'_> {
        fn drop(&mut self) {
            self.0.send_replace(false);
        }
    }
    let _detach = Detach(attached);
    let client = TrajectoryClient::new(
        api,
        &config.run,
        config.api_token.clone(),
        config.tries,
        config.backoff,
        config.request_timeout,
    )?;
    let env_config = env.config();
    let mut report = RunReport::default();
    env.setup().await?;

    let registration = RegisterEnv {
        max_token_length: env_config.max_token_length as i64,
        desired_name: config.desired_name.clone().unwrap_or_else(|| env.name()),
        weight: config.weight,
        group_size: env_config.group_size as i64,
        min_batch_allocation: config.min_batch_allocation,
    };
    let registered = loop {
        if let Some(registered) = client.register_env(&registration).await? {
            break registered;
        }
        tracing::info!(api = client.base(), "waiting for the trainer to start");
        tokio::select! {
            _ = tokio::time::sleep(config.register_interval) => {}
            _ = signalled(&mut shutdown) => {
                report.stopped_by = Some(StopReason::Shutdown);
                return Ok(report);
            }
        }
    };
    let env_id = registered.env_id;
    report.env_id = Some(env_id);
    attached.send_replace(true);
    tracing::info!(env_id, name = %registered.wandb_name, "environment registered");

    let mut info = client.info().await?;
    let mut limits = Limits {
        group_size: env_config.group_size as i64,
        batch_size: info.batch_size,
        max_batches_offpolicy: config.max_batches_offpolicy,
        min_batch_allocation: config.min_batch_allocation,
        max_workers: config.max_workers,
        total_steps: config.total_steps.unwrap_or(registered.num_steps),
    };
    if limits.batch_size > 0 && limits.group_size > limits.batch_size {
        return Err(RunnerError::Config(format!(
            "group_size ({}) must not exceed the trainer's batch_size ({})",
            limits.group_size, limits.batch_size
        )));
    }

    let policy: &dyn Policy = &*policy;
    let client = &client;
    let config = &config;
    type Done = (u64, Result<(Outcome, Vec<Item>), Aborted>);
    let mut workers: FuturesUnordered<BoxFuture<'_, Done>> = FuturesUnordered::new();
    let mut in_flight: HashMap<u64, (Item, AbortHandle)> = HashMap::new();
    let mut backlog: Vec<Item> = Vec::new();
    let (mut next_id, mut exhausted, mut status_failures) = (0u64, false, 0u32);
    let mut paused_since: Option<Instant> = None;

    let stopped_by = 'serve: loop {
        if *shutdown.borrow() {
            break StopReason::Shutdown;
        }
        if limits.batch_size <= 0 {
            info = client.info().await.unwrap_or(info);
            limits.batch_size = info.batch_size;
        }
        let status = match client.status_env(env_id).await {
            Ok(status) => {
                status_failures = 0;
                Some(status)
            }
            Err(e) if status_failures < 10 => {
                status_failures += 1;
                tracing::warn!(error = %e, "reading /status-env failed");
                None
            }
            Err(e) => return Err(e.into()),
        };
        let decision = status.map_or(Plan::Workers(in_flight.len()), |s| plan(&s, &limits));
        let now = Instant::now();
        // Paused, or allowed no work at all: either way the trainer is not taking groups now.
        let idle = matches!(decision, Plan::Pause | Plan::Workers(0));
        let (still_attached, since) = attachment(idle, paused_since, now, config.detach_after);
        paused_since = since;
        attached.send_if_modified(|a| std::mem::replace(a, still_attached) != still_attached);
        let budget = match decision {
            Plan::Stop => break StopReason::TotalSteps,
            Plan::Pause => 0,
            Plan::Workers(n) => n,
        };
        // Over budget: the newest work goes back to the backlog, as atroposlib cancels it.
        let mut ids: Vec<u64> = in_flight.keys().copied().collect();
        ids.sort_unstable();
        for id in ids.into_iter().skip(budget).rev() {
            if let Some((item, handle)) = in_flight.remove(&id) {
                handle.abort();
                backlog.push(item);
            }
        }
        while in_flight.len() < budget {
            let item = match backlog.pop() {
                Some(item) => item,
                None if exhausted => break,
                None => match env.next_item().await {
                    Ok(Some(item)) => item,
                    Ok(None) => {
                        exhausted = true;
                        break;
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "next_item failed");
                        break;
                    }
                },
            };
            let id = next_id;
            next_id += 1;
            let group_size = limits.group_size.max(1) as usize;
            let work = handle_item(
                env,
                policy,
                client,
                config,
                group_size,
                env_id,
                info.max_token_len,
                item.clone(),
            );
            let (work, handle) = abortable(work);
            in_flight.insert(id, (item, handle));
            workers.push(work.map(move |done| (id, done)).boxed());
        }
        if exhausted && in_flight.is_empty() && backlog.is_empty() {
            break StopReason::ItemsExhausted;
        }

        let deadline = Instant::now() + config.poll_interval;
        loop {
            tokio::select! {
                Some((id, done)) = workers.next(), if !workers.is_empty() => {
                    in_flight.remove(&id);
                    if let Ok((outcome, items)) = done {
                        backlog.extend(items);
                        tally(&mut report, outcome);
                    }
                }
                _ = tokio::time::sleep_until(deadline) => break,
                _ = signalled(&mut shutdown) => break 'serve StopReason::Shutdown,
            }
        }
    };

    drop(workers);
    // Work cut off above that already spent money (a round that paid its judges) finishes and
    // records itself before the runner returns, given as long as a worker would be.
    if tokio::time::timeout(config.worker_timeout, env.drain())
        .await
        .is_err()
    {
        tracing::warn!("work cut off by the stop did not finish within the worker timeout");
    }
    report.stopped_by = Some(stopped_by);
    if let Err(e) = client.disconnect_env(env_id).await {
        tracing::debug!(error = %e, "disconnect-env failed");
    }
    tracing::info!(?report, "environment runner stopped");
    Ok(report)
}

/// Whether the trainer still holds the environment, given whether the runner is paused now and
/// since when it has been: the pause's start (kept while paused) comes back with the answer.
fn attachment(
    paused: bool,
    since: Option<Instant>,
    now: Instant,
    detach_after: Duration,
) -> (bool, Option<Instant>) {
    if !paused {
        return (true, None);
    }
    let since = since.unwrap_or(now);
    (now.duration_since(since) < detach_after, Some(since))
}

/// One worker: collect, check, send (atroposlib's `handle_env`).
#[allow(clippy::too_many_arguments)]
async fn handle_item(
    env: &dyn Environment,
    policy: &dyn Policy,
    client: &TrajectoryClient,
    config: &RunnerConfig,
    group_size: usize,
    env_id: i64,
    max_token_len: i64,
    item: Item,
) -> (Outcome, Vec<Item>) {
    // Read before the rollouts: a swap during them leaves the group on the older weights (or a
    // mix), and the older version is the honest label for staleness.
    let weight_version = policy.weight_version();
    let collected =
        match tokio::time::timeout(config.worker_timeout, env.collect(item, policy)).await {
            Err(_) => return (Outcome::TimedOut, Vec::new()),
            Ok(Err(e)) => return (Outcome::CollectFailed(e), Vec::new()),
            Ok(Ok(collected)) => collected,
        };
    let Some(group) = collected.group else {
        return (Outcome::Empty, collected.backlog);
    };
    let mut data = group.to_scored_data(Some(env_id), config.include_messages);
    data.weight_version = data.weight_version.or(weight_version);
    let verdict = check_group(
        &data,
        group_size,
        config.ensure_scores_are_not_same,
        max_token_len,
    );
    if verdict != Verdict::Send {
        return (Outcome::Dropped(verdict), collected.backlog);
    }
    let outcome = match client.scored_data(&data).await {
        Ok(_) => Outcome::Sent,
        Err(e) => Outcome::SendFailed(e),
    };
    (outcome, collected.backlog)
}

fn tally(report: &mut RunReport, outcome: Outcome) {
    match outcome {
        Outcome::Sent => report.groups_sent += 1,
        Outcome::Empty => report.empty_collects += 1,
        Outcome::TimedOut => {
            tracing::warn!("a collect timed out");
            report.timeouts += 1;
        }
        Outcome::CollectFailed(e) => {
            tracing::warn!(error = %e, "collect failed");
            report.collect_errors += 1;
        }
        Outcome::SendFailed(e) => {
            tracing::error!(error = %e, "sending a group failed after retries");
            report.send_errors += 1;
        }
        Outcome::Dropped(Verdict::SameScores) => {
            tracing::debug!("all scores equal, group dropped");
            report.dropped_same_scores += 1;
        }
        Outcome::Dropped(verdict @ Verdict::TooLong { .. }) => {
            tracing::warn!(?verdict, "group dropped");
            report.dropped_too_long += 1;
        }
        Outcome::Dropped(verdict) => {
            tracing::warn!(?verdict, "group dropped");
            report.dropped_wrong_size += 1;
        }
    }
}

/// Resolves once the signal is `true`; never, if the sender is gone without saying so.
async fn signalled(shutdown: &mut watch::Receiver<bool>) {
    if shutdown.wait_for(|&stop| stop).await.is_err() {
        std::future::pending::<()>().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_runner_can_be_spawned_in_process() {
        // `lachesis serve` spawns it on the runtime: its future must be Send and own what it needs.
        fn assert_send<T: Send + 'static>(_: T) {}
        let env = crate::envs::build("arithmetic", &crate::envs::EnvOptions::default()).unwrap();
        let policy: Arc<dyn Policy> = Arc::new(
            crate::envs::arithmetic::baseline::BaselinePolicy::new(0.5, 1, None),
        );
        let (_stop, shutdown) = watch::channel(false);
        assert_send(async move {
            run(
                "http://127.0.0.1:9",
                env.as_ref(),
                policy,
                RunnerConfig::default(),
                shutdown,
            )
            .await
        });
    }

    #[test]
    fn the_default_config_is_atropos_s() {
        let c = RunnerConfig::default();
        assert_eq!(c.max_batches_offpolicy, 3);
        assert_eq!(c.tries, 3);
        assert!(c.ensure_scores_are_not_same);
        assert_eq!(c.worker_timeout, Duration::from_secs(600));
    }

    #[test]
    fn a_trainer_that_leaves_the_environment_paused_lets_it_go_until_groups_flow_again() {
        let minute = Duration::from_secs(60);
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        // Taking groups: attached, no pause remembered.
        assert_eq!(attachment(false, None, at(0), minute), (true, None));
        // Paused: still attached until a minute of pause has passed, counted from its start.
        assert_eq!(attachment(true, None, at(10), minute), (true, Some(at(10))));
        assert_eq!(
            attachment(true, Some(at(10)), at(69), minute),
            (true, Some(at(10)))
        );
        assert_eq!(
            attachment(true, Some(at(10)), at(70), minute),
            (false, Some(at(10)))
        );
        assert_eq!(
            attachment(true, Some(at(10)), at(500), minute),
            (false, Some(at(10)))
        );
        // Groups flow again: attached at once, and a later pause counts afresh.
        assert_eq!(
            attachment(false, Some(at(10)), at(501), minute),
            (true, None)
        );
        assert_eq!(
            attachment(true, None, at(502), minute),
            (true, Some(at(502)))
        );
    }
}
