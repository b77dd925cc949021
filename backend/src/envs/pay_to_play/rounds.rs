//! Rounds that finish once they start paying. A round pays its judges (or the people who ranked
//! its answers), hears them, records their evaluations and puts itself on the feed; a caller that
//! stops waiting halfway (the runner aborting work over its budget or stopping once the trainer
//! has its steps, a showcase cut off by shutdown) must not leave money paid for a round nobody
//! records. So each round runs on a task of its own, and the caller only awaits it.
//!
//! A round is known by its episode's key while it runs: a replay of the episode (the runner gives
//! an aborted item out again) waits for the running round instead of judging it twice. Draining
//! asks every running round to stop waiting for people and waits for them all.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};

use futures::FutureExt;
use futures::future::{BoxFuture, Shared};
use tokio::sync::watch;

use crate::envs::{Collected, EnvError};

type Outcome = Result<Collected, String>;

#[derive(Clone)]
struct Running {
    done: Shared<BoxFuture<'static, Outcome>>,
    /// Turns `true` when the round should stop waiting for people.
    close: Arc<watch::Sender<bool>>,
}

/// The rounds running now, by episode key.
#[derive(Default)]
pub(super) struct Rounds {
    running: Arc<Mutex<HashMap<String, Running>>>,
}

impl Rounds {
    /// The round running under `key`, to await, if there is one.
    pub fn running(&self, key: &str) -> Option<BoxFuture<'static, Result<Collected, EnvError>>> {
        let running = self.lock().get(key).cloned()?;
        Some(outcome(running.done).boxed())
    }

    /// Starts the round `work` makes under `key` on a task of its own (or joins the one already
    /// running under it) and returns its outcome to await. `work` is given a receiver that turns
    /// `true` when the round is asked to close.
    pub fn start<F>(
        &self,
        key: String,
        work: impl FnOnce(watch::Receiver<bool>) -> F,
    ) -> BoxFuture<'static, Result<Collected, EnvError>>
    where
        F: Future<Output = Result<Collected, EnvError>> + Send + 'static,
    {
        let mut running = self.lock();
        if let Some(round) = running.get(&key) {
            return outcome(round.done.clone()).boxed();
        }
        let (close, closing) = watch::channel(false);
        let round = work(closing);
        let rounds = self.running.clone();
        let finished_key = key.clone();
        let task = tokio::spawn(async move {
            let outcome = round.await.map_err(|e| e.to_string());
            rounds
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .remove(&finished_key);
            outcome
        });
        let done = async move {
            task.await
                .unwrap_or_else(|e| Err(format!("the round's task failed: {e}")))
        }
        .boxed()
        .shared();
        running.insert(
            key,
            Running {
                done: done.clone(),
                close: Arc::new(close),
            },
        );
        outcome(done).boxed()
    }

    /// Asks every running round to close (people's rounds pay the verdicts already given and stop
    /// waiting for more) and waits until they have all finished. Returns how many there were.
    pub async fn drain(&self) -> usize {
        let running: Vec<Running> = self.lock().values().cloned().collect();
        for round in &running {
            round.close.send_replace(true);
        }
        let count = running.len();
        futures::future::join_all(running.into_iter().map(|round| round.done)).await;
        count
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Running>> {
        // A panic while holding the map cannot leave it half-written (one insert or remove).
        self.running
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

async fn outcome(done: Shared<BoxFuture<'static, Outcome>>) -> Result<Collected, EnvError> {
    done.await.map_err(EnvError::Other)
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use super::*;

    fn collected(n: usize) -> Collected {
        Collected {
            group: None,
            backlog: vec![serde_json::json!({ "n": n })],
        }
    }

    #[tokio::test]
    async fn a_round_whose_caller_stops_waiting_finishes_and_a_replay_joins_it() {
        let rounds = Rounds::default();
        let started = Arc::new(AtomicUsize::new(0));
        let (release, released) = watch::channel(false);
        let work = |started: Arc<AtomicUsize>, mut released: watch::Receiver<bool>| {
            move |_closing| async move {
                let n = started.fetch_add(1, Ordering::SeqCst) + 1;
                let _ = released.wait_for(|r| *r).await;
                Ok(collected(n))
            }
        };
        let first = rounds.start("k".into(), work(started.clone(), released.clone()));
        // The caller gives up before the round ends.
        assert!(
            tokio::time::timeout(Duration::from_millis(50), first)
                .await
                .is_err()
        );
        let replay = rounds.running("k").expect("the round still runs");
        // Starting the same key again joins it too: nothing runs twice.
        let again = rounds.start("k".into(), work(started.clone(), released.clone()));
        release.send_replace(true);
        assert_eq!(replay.await.unwrap(), collected(1));
        assert_eq!(again.await.unwrap(), collected(1));
        assert_eq!(started.load(Ordering::SeqCst), 1);
        // Finished, the key is free: a later replay is a new round.
        tokio::task::yield_now().await;
        assert!(rounds.running("k").is_none());
    }

    #[tokio::test]
    async fn draining_closes_every_running_round_and_waits_for_it() {
        let rounds = Rounds::default();
        let closed = Arc::new(AtomicUsize::new(0));
        let mut waiting = Vec::new();
        for key in ["a", "b"] {
            let closed = closed.clone();
            // Dropped at once: nobody awaits these rounds but the drain.
            waiting.push(rounds.start(key.into(), move |mut closing| async move {
                let _ = closing.wait_for(|c| *c).await;
                closed.fetch_add(1, Ordering::SeqCst);
                Err(EnvError::Other("closed".into()))
            }));
        }
        drop(waiting);
        assert_eq!(rounds.drain().await, 2);
        assert_eq!(closed.load(Ordering::SeqCst), 2);
        assert_eq!(rounds.drain().await, 0, "nothing left running");
    }
}
