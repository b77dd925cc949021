//! `/spatial`: the model's attempts, live. The page subscribes to the `live` scene, loads its
//! snapshot over HTTP, then applies deltas whose `base_seq` is the sequence it holds; a gap (the
//! hub coalesced events for a slow tab) reloads the snapshot. The frames of the episode on screen
//! are kept for step-by-step replay.

use lachesis_shared::live::{LiveEvent, Topic};
use lachesis_shared::spatial::{ObjectPose, SceneEvent, SceneSnapshot};
use leptos::prelude::*;
use leptos::task::spawn_local;
use leptos_router::components::A;

use super::GoalList;
use super::replay::Replay;
use super::scene::model;
use super::viewer::SceneViewer;
use crate::api;
use crate::live::{Notice, use_topic};

const SCENE: &str = "live";

#[component]
pub fn SpatialLivePage() -> impl IntoView {
    let snapshot = RwSignal::new(None::<SceneSnapshot>);
    let frames = RwSignal::new(Vec::<Vec<ObjectPose>>::new());
    let shown = RwSignal::new(None::<Vec<ObjectPose>>);
    let error = RwSignal::new(None::<String>);
    let loaded = RwSignal::new(false);

    let reload = move || {
        spawn_local(async move {
            match api::spatial_scene(SCENE).await {
                Ok(s) => {
                    frames.set(s.iter().map(|s| s.poses.clone()).collect());
                    shown.set(None);
                    snapshot.set(s);
                    error.set(None);
                }
                Err(e) => error.set(Some(e.to_string())),
            }
            loaded.set(true);
        });
    };

    use_topic(
        Topic::Scene {
            scene: SCENE.into(),
        },
        move |notice| match notice {
            Notice::Resync => reload(),
            Notice::Lost => {}
            Notice::Event(LiveEvent::Scene(event)) => match *event {
                SceneEvent::Snapshot(s) => {
                    frames.set(vec![s.poses.clone()]);
                    shown.set(None);
                    snapshot.set(Some(s));
                }
                SceneEvent::Delta(delta) => {
                    let held = snapshot.with_untracked(|s| s.as_ref().map(|s| s.seq));
                    match held {
                        Some(seq) if seq == delta.base_seq => {
                            snapshot.update(|s| {
                                if let Some(s) = s.as_mut() {
                                    for changed in delta.poses {
                                        if let Some(p) =
                                            s.poses.iter_mut().find(|p| p.id == changed.id)
                                        {
                                            p.pose = changed.pose;
                                        }
                                    }
                                    s.seq = delta.seq;
                                    s.verdict = delta.verdict.or(s.verdict.take());
                                    frames.update(|f| f.push(s.poses.clone()));
                                }
                            });
                        }
                        // Already included in the snapshot we hold.
                        Some(seq) if delta.seq <= seq => {}
                        // A gap: something was coalesced away.
                        _ => reload(),
                    }
                }
            },
            Notice::Event(_) => {}
        },
    );

    let scene = Signal::derive(move || {
        snapshot.with(|s| {
            s.as_ref().map_or_else(Default::default, |s| {
                let poses = shown.get().unwrap_or_else(|| s.poses.clone());
                model(&s.task, &poses, s.verdict.as_ref(), false, None)
            })
        })
    });
    let replay_frames = Signal::derive(move || {
        // Replay once the attempt is judged; while it plays out, the live poses are shown.
        let judged = snapshot.with(|s| s.as_ref().is_some_and(|s| s.verdict.is_some()));
        if judged { frames.get() } else { Vec::new() }
    });

    view! {
        <h1>"Spatial reasoning, live"</h1>
        <p class="muted">
            "The model's attempts at generated tasks, as the physics plays them out. "
            <A href="/spatial/solve">"Solve one yourself"</A>
            "."
        </p>
        {move || error.get().map(|e| view! { <p class="error" role="alert">{e}</p> })}
        {move || (loaded.get() && snapshot.with(Option::is_none)).then(|| view! {
            <p class="card muted" data-testid="scene-waiting">
                "No attempt yet: start the server with "
                <code>"--env spatial"</code>
                " (make run does) and wait for the model's first answer."
            </p>
        })}
        {move || snapshot.get().map(|s| {
            let solve = format!("/spatial/solve?difficulty={}&seed={}", s.task.difficulty, s.task.seed);
            view! {
                <div class="scene-caption">
                    <strong data-testid="scene-caption">{s.caption.clone()}</strong>
                    " on task "
                    <A href=solve>{s.task.id.clone()}</A>
                    {s.verdict.as_ref().map(|v| view! {
                        <span class="verdict" data-testid="live-score">{format!(" · score {:.2}", v.score)}</span>
                    })}
                </div>
                <pre class="attempt">{s.attempt.clone().unwrap_or_default()}</pre>
            }
        })}
        <SceneViewer model=scene />
        <Replay frames=replay_frames show=Callback::new(move |f| shown.set(Some(f))) />
        {move || snapshot.get().map(|s| view! { <GoalList task=s.task verdict=s.verdict /> })}
    }
}
