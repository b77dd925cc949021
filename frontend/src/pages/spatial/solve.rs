//! `/spatial/solve?difficulty=D&seed=S`: a person solves a generated task. Drag a movable object
//! to move it on the ground (Shift + drag, or the buttons, to lift it), turn it with the buttons,
//! and submit: the server runs the same physics and scorer as for the model, answers with the
//! verdict and the episode to replay, and keeps the attempt as a demonstration.

use std::collections::BTreeMap;

use lachesis_shared::spatial::{
    Action, AttemptResult, DIFFICULTIES, HumanAttempt, ObjectPose, Pose, Task, score,
};
use leptos::prelude::*;
use leptos::task::spawn_local;
use leptos_router::hooks::use_query_map;

use super::GoalList;
use super::replay::Replay;
use super::scene::model;
use super::viewer::SceneViewer;
use crate::api;

/// What the person did to one object, in the order they touched objects.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Edit {
    x: f32,
    z: f32,
    /// A release height, when they lifted it.
    lifted: Option<f32>,
    yaw: f32,
}

/// The height an object of `half` half-height rests at above `[x, z]`, over the other objects'
/// footprints: a preview of where the server's move will put it down.
fn rest_height(task: &Task, poses: &[ObjectPose], id: &str, x: f32, z: f32) -> f32 {
    let Some(me) = task.object(id) else {
        return 0.0;
    };
    let mut support: f32 = 0.0;
    for other in task.objects.iter().filter(|o| o.id != id) {
        let Some(p) = poses.iter().find(|p| p.id == other.id) else {
            continue;
        };
        let [ox, oy, oz] = p.pose.position;
        let reach = me.shape.footprint_radius() * 0.7 + other.shape.footprint_radius() * 0.7;
        if ((ox - x).powi(2) + (oz - z).powi(2)).sqrt() < reach {
            support = support.max(oy + other.shape.half_height());
        }
    }
    support + me.shape.half_height()
}

fn actions(task: &Task, order: &[String], edits: &BTreeMap<String, Edit>) -> Vec<Action> {
    let mut out = Vec::new();
    for id in order {
        let (Some(edit), Some(spec)) = (edits.get(id), task.object(id)) else {
            continue;
        };
        if (edit.yaw - spec.yaw_deg).abs() > 0.01 {
            out.push(Action::Rotate {
                object: id.clone(),
                yaw_deg: edit.yaw,
            });
        }
        out.push(Action::Move {
            object: id.clone(),
            x: edit.x,
            z: edit.z,
            y: edit.lifted,
        });
    }
    out
}

#[component]
pub fn SpatialSolvePage() -> impl IntoView {
    let query = use_query_map();
    let difficulty = RwSignal::new(
        query
            .with_untracked(|q| q.get("difficulty").and_then(|v| v.parse().ok()))
            .unwrap_or(1u8)
            .clamp(1, 4),
    );
    let seed = RwSignal::new(
        query
            .with_untracked(|q| q.get("seed").and_then(|v| v.parse().ok()))
            .unwrap_or_else(|| (js_sys::Math::random() * 1e9) as u64),
    );
    let task = RwSignal::new(None::<Task>);
    let shown = RwSignal::new(Vec::<ObjectPose>::new());
    let order = RwSignal::new(Vec::<String>::new());
    let edits = RwSignal::new(BTreeMap::<String, Edit>::new());
    let selected = RwSignal::new(None::<String>);
    let result = RwSignal::new(None::<AttemptResult>);
    let error = RwSignal::new(None::<String>);
    let busy = RwSignal::new(false);

    let load = move || {
        let (d, s) = (difficulty.get_untracked(), seed.get_untracked());
        spawn_local(async move {
            match api::spatial_task(d, s).await {
                Ok(t) => {
                    shown.set(t.start_poses());
                    order.set(Vec::new());
                    edits.set(BTreeMap::new());
                    selected.set(t.movable.first().cloned());
                    result.set(None);
                    error.set(None);
                    task.set(Some(t));
                }
                Err(e) => error.set(Some(e.to_string())),
            }
        });
    };
    load();

    // The draft: start poses with the person's edits applied.
    let apply = move |id: &str, edit: Edit| {
        let Some(t) = task.get_untracked() else {
            return;
        };
        result.set(None);
        if !order.with_untracked(|o| o.iter().any(|i| i == id)) {
            order.update(|o| o.push(id.to_string()));
        }
        edits.update(|e| {
            e.insert(id.to_string(), edit);
        });
        shown.update(|poses| {
            let y = edit
                .lifted
                .unwrap_or_else(|| rest_height(&t, poses, id, edit.x, edit.z));
            if let Some(p) = poses.iter_mut().find(|p| p.id == id) {
                p.pose = Pose::from_yaw([edit.x, y, edit.z], edit.yaw);
            }
        });
    };
    let current = move |id: &str| -> Option<Edit> {
        let t = task.get_untracked()?;
        edits.with_untracked(|e| e.get(id).copied()).or_else(|| {
            let spec = t.object(id)?;
            Some(Edit {
                x: spec.position[0],
                z: spec.position[2],
                lifted: None,
                yaw: spec.yaw_deg,
            })
        })
    };
    let on_drag = Callback::new(move |(id, [x, y, z]): (String, [f32; 3])| {
        let Some(mut edit) = current(&id) else {
            return;
        };
        let rest = task
            .get_untracked()
            .and_then(|t| t.object(&id).map(|o| o.shape.half_height()))
            .unwrap_or(0.0);
        edit.x = x;
        edit.z = z;
        edit.lifted = (y > rest + 0.05).then_some(y);
        selected.set(Some(id.clone()));
        apply(&id, edit);
    });
    let nudge = move |d_yaw: f32, d_lift: f32| {
        let Some(id) = selected.get_untracked() else {
            return;
        };
        let Some(mut edit) = current(&id) else {
            return;
        };
        edit.yaw += d_yaw;
        if d_lift != 0.0 {
            let base = shown.with_untracked(|p| {
                p.iter()
                    .find(|p| p.id == id)
                    .map_or(0.0, |p| p.pose.position[1])
            });
            edit.lifted = Some((base + d_lift).clamp(0.0, 4.0));
        }
        apply(&id, edit);
    };
    let submit = move |_| {
        let Some(t) = task.get_untracked() else {
            return;
        };
        let attempt = HumanAttempt {
            seed: t.seed,
            difficulty: t.difficulty,
            actions: actions(&t, &order.get_untracked(), &edits.get_untracked()),
        };
        if attempt.actions.is_empty() {
            error.set(Some("Move an object first.".into()));
            return;
        }
        busy.set(true);
        spawn_local(async move {
            match api::spatial_attempt(&attempt).await {
                Ok(r) => {
                    error.set(None);
                    if let Some(last) = r.recording.frames.last() {
                        shown.set(last.clone());
                    }
                    result.set(Some(r));
                }
                Err(e) => error.set(Some(e.to_string())),
            }
            busy.set(false);
        });
    };
    let reset = move |_| {
        if let Some(t) = task.get_untracked() {
            shown.set(t.start_poses());
        }
        order.set(Vec::new());
        edits.set(BTreeMap::new());
        result.set(None);
    };
    let new_task = move |_| {
        seed.set((js_sys::Math::random() * 1e9) as u64);
        load();
    };

    let scene = Signal::derive(move || {
        let sel = selected.get();
        task.with(|t| {
            t.as_ref().map_or_else(Default::default, |t| {
                let verdict = result.with(|r| r.as_ref().map(|r| r.verdict.clone()));
                shown.with(|poses| model(t, poses, verdict.as_ref(), true, sel.as_deref()))
            })
        })
    });
    let preview = move || {
        task.with(|t| t.as_ref().map(|t| shown.with(|p| score(t, p).score)))
            .unwrap_or(0.0)
    };
    let frames = Signal::derive(move || {
        result.with(|r| {
            r.as_ref()
                .map(|r| r.recording.frames.clone())
                .unwrap_or_default()
        })
    });

    view! {
        <h1>"Solve a spatial task"</h1>
        <div class="spatial-toolbar">
            <label>
                "Difficulty "
                <select on:change=move |e| {
                    difficulty.set(event_target_value(&e).parse().unwrap_or(1));
                    load();
                } prop:value=move || difficulty.get().to_string()>
                    {DIFFICULTIES
                        .map(|d| view! { <option value=d.to_string()>{d}</option> })
                        .collect_view()}
                </select>
            </label>
            <span class="muted" data-testid="task-id">
                {move || task.with(|t| t.as_ref().map(|t| t.id.clone()))}
            </span>
            <button on:click=new_task>"New task"</button>
            <button on:click=reset>"Reset"</button>
            <button on:click=move |_| nudge(-15.0, 0.0)>"⟲ 15°"</button>
            <button on:click=move |_| nudge(15.0, 0.0)>"⟳ 15°"</button>
            <button on:click=move |_| nudge(0.0, 0.25)>"Lift"</button>
            <button on:click=move |_| nudge(0.0, -0.25)>"Lower"</button>
            <button class="primary" data-testid="submit" on:click=submit disabled=move || busy.get()>
                "Submit"
            </button>
        </div>
        <p class="muted">
            "Drag a movable object to move it (Shift + drag lifts it); drag the background to turn \
             the camera, scroll to zoom. Selected: "
            <strong>{move || selected.get().unwrap_or_default()}</strong>
            {move || format!(" · preview score {:.2}", preview())}
            <span data-testid="preview-score" hidden=true>{move || format!("{:.3}", preview())}</span>
        </p>
        {move || error.get().map(|e| view! { <p class="error" role="alert">{e}</p> })}
        {move || result.get().map(|r| view! {
            <p class="verdict" data-testid="verdict-score">
                {format!("Score {:.2}", r.verdict.score)}
                {(!r.rested).then_some(" (the world had not come to rest)")}
            </p>
        })}
        <SceneViewer model=scene on_drag=on_drag />
        <Replay frames=frames show=Callback::new(move |f| shown.set(f)) />
        {move || task.get().map(|t| {
            let movable = t.movable.join(", ");
            view! {
                <p>"You may move: " <strong>{movable}</strong></p>
                <GoalList task=t verdict=result.get().map(|r| r.verdict) />
            }
        })}
    }
}
