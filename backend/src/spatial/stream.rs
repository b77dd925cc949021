//! Streams the environment's attempts to the live scene at the speed they happened.
//!
//! Judging an attempt takes milliseconds; watching one takes seconds. The environment hands each
//! judged [`Episode`] to [`SceneStreamer::episode`], which never blocks: a small queue holds the
//! next episodes and drops new ones while it is full, so training never waits for viewers. A
//! player task publishes each episode on the scene's topic: a snapshot (the task, the start
//! poses, who acts and what they wrote), then one delta per recorded frame with the poses that
//! changed, paced at simulated time, the last one carrying the verdict. Every event also saves the
//! scene's full state, which a viewer loads over HTTP before applying deltas (or after missing
//! one: the hub coalesces scene events for slow readers, see `LiveEvent::is_state`).

use std::sync::Arc;
use std::time::Duration;

use lachesis_shared::live::{LiveEvent, Topic};
use lachesis_shared::spatial::{ObjectPose, SceneDelta, SceneEvent, SceneSnapshot};
use sqlx::PgPool;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use super::store;
use crate::envs::spatial::{Episode, SceneSink};

/// Episodes waiting to be shown; more are dropped.
const QUEUE: usize = 2;
/// The rapier world steps at 60 Hz.
const PHYSICS_HZ: f64 = 60.0;
/// How long the verdict stays on screen before the next episode.
const LINGER: Duration = Duration::from_millis(1500);
/// A pose component must change by more than this to be sent again.
const EPSILON: f32 = 1e-4;

pub struct SceneStreamer {
    queue: mpsc::Sender<Episode>,
}

/// The platform's live scene (`/spatial`) lent to an environment: episodes streamed through
/// `db`'s live bridge, so the viewers of every server on that database watch them.
pub fn live_scene(
    db: PgPool,
    shutdown: watch::Receiver<bool>,
) -> crate::envs::in_process::LiveScene {
    let (streamer, _player) = SceneStreamer::spawn(db, super::LIVE_SCENE.to_string(), shutdown);
    let sink: Arc<dyn SceneSink> = streamer;
    crate::envs::in_process::LiveScene {
        sink,
        topic: Topic::Scene {
            scene: super::LIVE_SCENE.to_string(),
        },
    }
}

impl SceneSink for SceneStreamer {
    fn episode(&self, episode: Episode) {
        if self.queue.try_send(episode).is_err() {
            tracing::trace!("scene streamer busy: episode not shown");
        }
    }
}

impl SceneStreamer {
    /// Starts the player for `scene`; it ends when every handle is dropped or on `shutdown`.
    pub fn spawn(
        db: PgPool,
        scene: String,
        mut shutdown: watch::Receiver<bool>,
    ) -> (Arc<Self>, JoinHandle<()>) {
        let (queue, mut episodes) = mpsc::channel::<Episode>(QUEUE);
        let player = tokio::spawn(async move {
            let mut seq = match store::load_scene(&db, &scene).await {
                Ok(Some(snapshot)) => snapshot.seq,
                _ => 0,
            };
            loop {
                let episode = tokio::select! {
                    next = episodes.recv() => match next {
                        Some(episode) => episode,
                        None => break,
                    },
                    _ = shutdown.wait_for(|stop| *stop) => break,
                };
                let played = tokio::select! {
                    result = play(&db, &scene, &mut seq, episode) => result,
                    _ = shutdown.wait_for(|stop| *stop) => break,
                };
                if let Err(e) = played {
                    tracing::warn!(error = %e, %scene, "scene not streamed");
                }
            }
        });
        (Arc::new(Self { queue }), player)
    }
}

fn changed(before: &[ObjectPose], after: &[ObjectPose]) -> Vec<ObjectPose> {
    after
        .iter()
        .filter(|now| {
            let then = before.iter().find(|b| b.id == now.id);
            then.is_none_or(|then| {
                let p = then.pose.position.iter().zip(now.pose.position);
                let r = then.pose.rotation.iter().zip(now.pose.rotation);
                p.chain(r).any(|(a, b)| (a - b).abs() > EPSILON)
            })
        })
        .cloned()
        .collect()
}

async fn publish(
    db: &PgPool,
    scene: &str,
    state: &SceneSnapshot,
    event: SceneEvent,
) -> Result<(), sqlx::Error> {
    store::save_scene(db, scene, state).await?;
    let topic = Topic::Scene {
        scene: scene.to_string(),
    };
    crate::live::publish(db, &topic, &LiveEvent::Scene(Box::new(event))).await
}

async fn play(
    db: &PgPool,
    scene: &str,
    seq: &mut u64,
    episode: Episode,
) -> Result<(), sqlx::Error> {
    let mut frames = episode.recording.frames.into_iter();
    let Some(first) = frames.next() else {
        return Ok(());
    };
    *seq += 1;
    let mut state = SceneSnapshot {
        seq: *seq,
        task: episode.task,
        poses: first,
        caption: episode.caption,
        attempt: Some(episode.attempt),
        verdict: None,
    };
    publish(db, scene, &state, SceneEvent::Snapshot(state.clone())).await?;
    let period =
        Duration::from_secs_f64(f64::from(episode.recording.steps_per_frame.max(1)) / PHYSICS_HZ);
    let mut frames = frames.peekable();
    while let Some(frame) = frames.next() {
        tokio::time::sleep(period).await;
        let last = frames.peek().is_none();
        let poses = changed(&state.poses, &frame);
        if poses.is_empty() && !last {
            continue;
        }
        let base_seq = *seq;
        *seq += 1;
        state.seq = *seq;
        state.poses = frame;
        if last {
            state.verdict = Some(episode.verdict.clone());
        }
        let delta = SceneDelta {
            base_seq,
            seq: *seq,
            poses,
            verdict: state.verdict.clone(),
        };
        publish(db, scene, &state, SceneEvent::Delta(delta)).await?;
    }
    if state.verdict.is_none() {
        // A single-frame episode (an unreadable answer): the verdict in one more delta.
        let base_seq = *seq;
        *seq += 1;
        state.seq = *seq;
        state.verdict = Some(episode.verdict);
        let delta = SceneDelta {
            base_seq,
            seq: *seq,
            poses: Vec::new(),
            verdict: state.verdict.clone(),
        };
        publish(db, scene, &state, SceneEvent::Delta(delta)).await?;
    }
    tokio::time::sleep(LINGER).await;
    Ok(())
}
