//! The environments this server hosts (`--env`): each one a runner task posting to the server's
//! own address, answered by the embedded model in the same process. They register like any worker
//! and wait for a trainer, then produce groups until the server shuts down; those with a showcase
//! also keep attempting while no trainer is attached.
//!
//! The registry says how each environment is built from what the server lends ([`ServerParts`],
//! implemented here), so nothing here knows one environment from another. Runners and showcases
//! are supervised (`crate::supervisor`): one that fails is logged, counted and started again after
//! a pause, as tasks `env:NAME` and `showcase:NAME`.

use std::sync::Arc;

use anyhow::Context;
use lachesis_shared::live::Topic;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::AppState;
use crate::envs::EnvError;
use crate::envs::in_process::{EnvSpec, LiveFeed, LiveScene, ServerParts, Showcase, showcase};
use crate::envs::pay_to_play::Marketplace;
use crate::envs::registry;
use crate::envs::runner::{self, RunnerConfig};
use crate::live::bridge::BridgeFeed;
use crate::marketplace::judges::Judges;
use crate::policy::{EmbeddedPolicy, Policy};

/// What this server lends the environments it hosts.
struct Parts<'a> {
    state: &'a AppState,
    policy: Arc<dyn Policy>,
    shutdown: watch::Receiver<bool>,
}

impl ServerParts for Parts<'_> {
    fn live_feed(&self, topic: Topic) -> Arc<dyn LiveFeed> {
        Arc::new(BridgeFeed::new(self.state.db.clone(), topic))
    }

    fn live_scene(&self) -> LiveScene {
        crate::spatial::live_scene(self.state.db.clone(), self.shutdown.clone())
    }

    fn marketplace(&self) -> Marketplace {
        let state = self.state;
        Marketplace {
            ledger: state.ledger.clone(),
            settler: state.settler.clone(),
            // The embedded model runs the model cards; the platform's budget never pays a team's.
            judges: Judges::new(Some(self.policy.clone()))
                .platform_cards_only()
                .with_secrets(state.hosting.secrets_key.clone())
                .with_limits(state.hosting.judge)
                .with_probation(state.hosting.probation),
            queue_items: state.hosting.feedback_queue_items,
        }
    }
}

/// Starts one supervised runner per spec against `api`, and its showcase when it has one. Fails at
/// once for unknown environments or when no embedded model is loaded, so a misconfigured server
/// does not start.
pub fn spawn(
    specs: &[EnvSpec],
    api: &str,
    api_token: Option<String>,
    state: &AppState,
    shutdown: &watch::Receiver<bool>,
) -> anyhow::Result<Vec<JoinHandle<()>>> {
    if specs.is_empty() {
        return Ok(Vec::new());
    }
    let engine = state.engine.as_ref().context(
        "in-process environments (--env) answer with the embedded model: load one with --model",
    )?;
    let policy: Arc<dyn Policy> = Arc::new(EmbeddedPolicy::new(engine.clone()));
    let parts = Parts {
        state,
        policy: policy.clone(),
        shutdown: shutdown.clone(),
    };
    let mut handles = Vec::new();
    for spec in specs {
        let name = spec.name.clone();
        let descriptor = registry::find(&name)
            .ok_or_else(|| EnvError::UnknownEnv { name: name.clone() })
            .with_context(|| format!("--env {name}"))?;
        let hosted = descriptor
            .host(&spec.options, &parts)
            .with_context(|| format!("--env {name}"))?;
        // Whether a trainer has taken this environment on; its showcase waits meanwhile.
        let attached = Arc::new(watch::channel(false).0);
        if let Some(shown) = hosted.showcase {
            let wanted = wanted(
                &state.live,
                shown.on,
                attached.subscribe(),
                shutdown.clone(),
            );
            let show: Arc<dyn Showcase> = Arc::new(Counted {
                show: shown.show,
                metrics: state.metrics.clone(),
                env: name.clone(),
            });
            let (policy, stop, named) = (policy.clone(), shutdown.clone(), name.clone());
            let task = format!("showcase:{name}");
            handles.push(state.tasks.spawn(&task, shutdown.clone(), move || {
                let (show, policy, stop, named, wanted) = (
                    show.clone(),
                    policy.clone(),
                    stop.clone(),
                    named.clone(),
                    wanted.clone(),
                );
                async move { showcase(&named, show, policy, stop, wanted).await }
            }));
        }
        let config = RunnerConfig {
            api_token: api_token.clone(),
            // Until the server stops, whatever the trainer's step count.
            total_steps: Some(0),
            detach_after: state.hosting.trainer_idle,
            ..RunnerConfig::default()
        };
        let (api, env, policy, stop) =
            (api.to_owned(), hosted.env, policy.clone(), shutdown.clone());
        let task = format!("env:{name}");
        handles.push(state.tasks.spawn(&task, shutdown.clone(), move || {
            let (api, env, policy) = (api.clone(), env.clone(), policy.clone());
            let (config, stop, name) = (config.clone(), stop.clone(), name.clone());
            let attached = attached.clone();
            async move {
                let report =
                    runner::run_attached(&api, env.as_ref(), policy, config, stop, &attached)
                        .await?;
                tracing::info!(env = %name, ?report, "in-process environment stopped");
                Ok(())
            }
        }));
    }
    Ok(handles)
}

/// `true` while someone on this instance watches `topic` and no trainer has taken the environment
/// on: when its showcase should be attempting. Kept up to date by a task until shutdown.
fn wanted(
    hub: &crate::live::Hub,
    topic: Topic,
    mut attached: watch::Receiver<bool>,
    mut shutdown: watch::Receiver<bool>,
) -> watch::Receiver<bool> {
    let mut watchers = hub.watched_changed();
    let hub = hub.clone();
    let want =
        move |attached: &watch::Receiver<bool>| hub.is_watched(&topic) && !*attached.borrow();
    let (sender, wanted) = watch::channel(want(&attached));
    tokio::spawn(async move {
        loop {
            tokio::select! {
                changed = watchers.changed() => if changed.is_err() { break },
                changed = attached.changed() => if changed.is_err() { break },
                _ = shutdown.wait_for(|stop| *stop) => break,
            }
            sender.send_if_modified(|current| {
                let now = want(&attached);
                std::mem::replace(current, now) != now
            });
        }
    });
    wanted
}

/// A showcase whose attempts are counted in `/metrics` (`lachesis_showcase_attempts_total`), so an
/// operator sees what an idle server spends on them.
struct Counted {
    show: Arc<dyn Showcase>,
    metrics: Arc<crate::metrics::Metrics>,
    env: String,
}

impl Showcase for Counted {
    fn prepare(&self) -> futures::future::BoxFuture<'_, Result<(), EnvError>> {
        self.show.prepare()
    }

    fn show_one<'a>(
        &'a self,
        policy: &'a dyn Policy,
    ) -> futures::future::BoxFuture<'a, Result<std::time::Duration, EnvError>> {
        self.metrics.showcase_attempt(&self.env);
        self.show.show_one(policy)
    }
}
