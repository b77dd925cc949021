//! Environments hosted by `lachesis serve` (`--env NAME`): what the server gives an environment
//! ([`ServerParts`]), what it gets back ([`Hosted`]: the environment its runner serves and, for
//! some, a [`Showcase`] to keep attempting while no trainer is attached), and the one showcase
//! loop ([`showcase`]). The registry says how each environment is hosted; the server side (the
//! `app` module) implements [`ServerParts`] and runs the runners and showcases as supervised tasks
//! `env:NAME` and `showcase:NAME`, so this module names nothing of the server's.

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use lachesis_shared::live::{LiveEvent, Topic};
use tokio::sync::watch;

use super::pay_to_play::Marketplace;
use super::spatial::SceneSink;
use super::{EnvError, EnvOptions, Environment};
use crate::policy::Policy;

/// The usual pause between two showcase attempts: viewers see a steady stream, and a trainer's
/// rollouts, when one is attached, are slowed little by one completion now and then.
pub const SHOWCASE_PAUSE: Duration = Duration::from_secs(2);

/// One `--env` value: `NAME`, or `NAME:{"group_size": 4, "max_tokens": 64, ...}` (EnvOptions as JSON).
#[derive(Debug, Clone, PartialEq)]
pub struct EnvSpec {
    pub name: String,
    pub options: EnvOptions,
}

impl std::str::FromStr for EnvSpec {
    type Err = String;

    fn from_str(spec: &str) -> Result<Self, Self::Err> {
        let (name, options) = match spec.split_once(':') {
            Some((name, json)) => (
                name,
                serde_json::from_str(json).map_err(|e| {
                    format!("--env {name}: options are not valid EnvOptions JSON: {e}")
                })?,
            ),
            None => (spec, EnvOptions::default()),
        };
        if name.is_empty() {
            return Err("--env needs an environment name".into());
        }
        Ok(Self {
            name: name.to_owned(),
            options,
        })
    }
}

/// What the hosting server lends the environments it builds, beyond their options.
pub trait ServerParts {
    /// A sink that plays episodes on the live scene the browser's viewer watches (`/spatial`).
    fn live_scene(&self) -> LiveScene;
    /// The platform's Pay-to-Play marketplace: its ledger, its settler and judges that hear (and
    /// pay) only the platform's cards, the model answering for model cards.
    fn marketplace(&self) -> Marketplace;
    /// Where an environment publishes what its viewers on `topic` see.
    fn live_feed(&self, topic: Topic) -> Arc<dyn LiveFeed>;
}

/// Publishes live events on one topic, best effort: a lost event costs a viewer one line, never
/// the environment its episode.
pub trait LiveFeed: Send + Sync {
    fn publish(&self, event: LiveEvent) -> BoxFuture<'_, ()>;
}

/// The live scene lent to an environment: where its episodes play, and the topic viewers of that
/// scene subscribe to.
pub struct LiveScene {
    pub sink: Arc<dyn SceneSink>,
    pub topic: Topic,
}

/// An environment as the server hosts it.
pub struct Hosted {
    /// What the environment's runner serves to the trajectory API.
    pub env: Arc<dyn Environment>,
    /// Attempts shown while no trainer asks for groups and someone watches, so its page is alive.
    pub showcase: Option<Shown>,
}

/// A showcase and the live topic its attempts appear on (whose watchers it runs for).
pub struct Shown {
    pub show: Arc<dyn Showcase>,
    pub on: Topic,
}

impl Hosted {
    /// Served as it is, with nothing shown between groups.
    pub fn plain(env: Box<dyn Environment>) -> Self {
        Self {
            env: Arc::from(env),
            showcase: None,
        }
    }

    /// Served, and also showcased by the same instance while someone watches `on`.
    pub fn showcased<E: Environment + Showcase + 'static>(env: E, on: Topic) -> Self {
        let env = Arc::new(env);
        Self {
            env: env.clone(),
            showcase: Some(Shown { show: env, on }),
        }
    }
}

/// An environment's "show one": an attempt made only to be watched (nothing is trained on it).
pub trait Showcase: Send + Sync {
    /// Whatever must be ready before the first attempt; most need nothing.
    fn prepare(&self) -> BoxFuture<'_, Result<(), EnvError>> {
        Box::pin(futures::future::ready(Ok(())))
    }

    /// One attempt with `policy`, shown where the environment shows it; returns how long to pause
    /// before the next.
    fn show_one<'a>(&'a self, policy: &'a dyn Policy) -> BoxFuture<'a, Result<Duration, EnvError>>;
}

/// Keeps `show` attempting until shutdown, one attempt at a time with its pause in between, so a
/// new viewer sees attempts before any trainer is attached (a runner collects groups only once
/// one has registered). Attempts start only while `wanted` holds `true`: the server says so while
/// someone watches where the attempts are shown and no trainer has taken the environment on, so
/// an idle server spends nothing on them and a trainer's rollouts are never slowed by them. A failed preparation or attempt (the model busy with a trainer's
/// rollouts, the database away) ends it: its supervisor starts it again after a pause that grows
/// while the failures go on.
pub async fn showcase(
    name: &str,
    show: Arc<dyn Showcase>,
    policy: Arc<dyn Policy>,
    mut shutdown: watch::Receiver<bool>,
    mut wanted: watch::Receiver<bool>,
) -> anyhow::Result<()> {
    tokio::select! {
        // Nothing is prepared (no account opened) for a page nobody has looked at yet.
        open = wanted.wait_for(|want| *want) => if open.is_err() { return Ok(()) },
        _ = shutdown.wait_for(|stop| *stop) => return Ok(()),
    }
    tokio::select! {
        prepared = show.prepare() => prepared
            .map_err(|e| anyhow::anyhow!("{name} showcase could not start: {e}"))?,
        _ = shutdown.wait_for(|stop| *stop) => return Ok(()),
    }
    loop {
        tokio::select! {
            // A dropped sender: nothing will want attempts again.
            open = wanted.wait_for(|want| *want) => if open.is_err() { return Ok(()) },
            _ = shutdown.wait_for(|stop| *stop) => return Ok(()),
        }
        let pause = tokio::select! {
            result = show.show_one(policy.as_ref()) => result
                .map_err(|e| anyhow::anyhow!("{name} showcase attempt failed: {e}"))?,
            _ = shutdown.wait_for(|stop| *stop) => return Ok(()),
        };
        tokio::select! {
            _ = tokio::time::sleep(pause) => {}
            _ = shutdown.wait_for(|stop| *stop) => return Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;
    use crate::policy::{PolicyError, PolicyRequest, Rollout};

    /// Shows `fail_at` attempts at most (failing the last), counting preparations and attempts.
    struct Counting {
        prepared: AtomicUsize,
        shown: AtomicUsize,
        fail_at: usize,
    }

    impl Showcase for Counting {
        fn prepare(&self) -> BoxFuture<'_, Result<(), EnvError>> {
            self.prepared.fetch_add(1, Ordering::SeqCst);
            Box::pin(futures::future::ready(Ok(())))
        }

        fn show_one<'a>(&'a self, _: &'a dyn Policy) -> BoxFuture<'a, Result<Duration, EnvError>> {
            let n = self.shown.fetch_add(1, Ordering::SeqCst) + 1;
            let result = if n == self.fail_at {
                Err(EnvError::Other("the model is busy".into()))
            } else {
                Ok(Duration::from_secs(5))
            };
            Box::pin(futures::future::ready(result))
        }
    }

    struct Silent;

    impl Policy for Silent {
        fn name(&self) -> String {
            "silent".into()
        }

        fn complete(&self, _: PolicyRequest) -> BoxFuture<'_, Result<Vec<Rollout>, PolicyError>> {
            Box::pin(futures::future::ready(Ok(Vec::new())))
        }
    }

    fn counting(fail_at: usize) -> Arc<Counting> {
        Arc::new(Counting {
            prepared: AtomicUsize::new(0),
            shown: AtomicUsize::new(0),
            fail_at,
        })
    }

    /// The showcase loop on `show`, with its shutdown and "wanted" switches.
    fn start(
        show: &Arc<Counting>,
        wanted_at_first: bool,
    ) -> (
        watch::Sender<bool>,
        watch::Sender<bool>,
        tokio::task::JoinHandle<anyhow::Result<()>>,
    ) {
        let (stop, shutdown) = watch::channel(false);
        let (want, wanted) = watch::channel(wanted_at_first);
        let running = tokio::spawn(showcase(
            "demo",
            show.clone(),
            Arc::new(Silent),
            shutdown,
            wanted,
        ));
        (stop, want, running)
    }

    #[tokio::test(start_paused = true)]
    async fn the_showcase_prepares_once_attempts_with_pauses_and_stops_on_shutdown() {
        let show = counting(usize::MAX);
        let (stop, _want, running) = start(&show, true);
        // Attempts at 0 s, 5 s and 10 s; the pause after the third is cut short by the shutdown.
        tokio::time::sleep(Duration::from_secs(12)).await;
        stop.send(true).unwrap();
        running.await.unwrap().expect("a clean stop");
        assert_eq!(show.prepared.load(Ordering::SeqCst), 1);
        assert_eq!(show.shown.load(Ordering::SeqCst), 3);
    }

    #[tokio::test(start_paused = true)]
    async fn the_showcase_attempts_only_while_wanted() {
        let show = counting(usize::MAX);
        let (stop, want, running) = start(&show, false);
        // Nobody watching: an hour passes with nothing prepared and nothing attempted.
        tokio::time::sleep(Duration::from_secs(3600)).await;
        assert_eq!(show.prepared.load(Ordering::SeqCst), 0);
        assert_eq!(show.shown.load(Ordering::SeqCst), 0);
        // Watched from 3600 s: attempts at 3600 s and 3605 s; unwanted at 3607 s, so the one due
        // at 3610 s waits, and nothing more happens for another hour.
        want.send_replace(true);
        tokio::time::sleep(Duration::from_secs(7)).await;
        want.send_replace(false);
        tokio::time::sleep(Duration::from_secs(3600)).await;
        assert_eq!(show.prepared.load(Ordering::SeqCst), 1);
        assert_eq!(show.shown.load(Ordering::SeqCst), 2);
        // Wanted again: the next attempt starts at once.
        want.send_replace(true);
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert_eq!(show.shown.load(Ordering::SeqCst), 3);
        stop.send(true).unwrap();
        running.await.unwrap().expect("a clean stop");
    }

    #[tokio::test(start_paused = true)]
    async fn a_failed_attempt_ends_the_showcase_naming_the_environment() {
        let show = counting(2);
        let (_stop, shutdown) = watch::channel(false);
        let (_want, wanted) = watch::channel(true);
        let error = showcase("demo", show.clone(), Arc::new(Silent), shutdown, wanted)
            .await
            .expect_err("the second attempt fails");
        assert_eq!(
            error.to_string(),
            "demo showcase attempt failed: the model is busy"
        );
        assert_eq!(show.shown.load(Ordering::SeqCst), 2);
    }

    #[test]
    fn specs_name_an_environment_and_optional_options() {
        let plain: EnvSpec = "arithmetic".parse().unwrap();
        assert_eq!(plain.name, "arithmetic");
        let tuned: EnvSpec = r#"arithmetic:{"group_size": 2, "max_tokens": 16}"#.parse().unwrap();
        assert_eq!(tuned.options.group_size, Some(2));
        assert_eq!(tuned.options.max_tokens, Some(16));
        assert!("arithmetic:{\"group_sise\": 2}".parse::<EnvSpec>().is_err());
        assert!(":{}".parse::<EnvSpec>().is_err());
    }
}
