//! Spatial reasoning pages: watch the model attempt tasks live (`/spatial`), solve one yourself
//! by dragging objects (`/spatial/solve`), and the viewer's frame-rate bench (`/spatial/bench`).

mod bench;
mod live;
mod render;
mod replay;
mod scene;
mod solve;
mod viewer;

pub use bench::SpatialBenchPage;
pub use live::SpatialLivePage;
pub use solve::SpatialSolvePage;

use lachesis_shared::spatial::{Task, Verdict, describe_goal};
use leptos::prelude::*;

/// The goals as a list, each with the verdict's credit when there is one.
#[component]
fn GoalList(task: Task, verdict: Option<Verdict>) -> impl IntoView {
    let items = task
        .goals
        .iter()
        .enumerate()
        .map(|(i, goal)| {
            let judged = verdict.as_ref().and_then(|v| v.goals.get(i)).cloned();
            let class = match &judged {
                Some(g) if g.satisfied => "goal ok",
                Some(_) => "goal todo",
                None => "goal",
            };
            let weight = (task.goals.iter().any(|g| g.weight != 1.0))
                .then(|| format!(" (weight {})", goal.weight));
            view! {
                <li class=class data-testid=format!("goal-text-{i}")>
                    {describe_goal(&goal.constraint)}
                    {weight}
                    {judged.map(|g| view! {
                        <div class="muted">{format!("credit {:.2}: {}", g.credit, g.detail)}</div>
                    })}
                </li>
            }
        })
        .collect_view();
    view! { <ol class="goals">{items}</ol> }
}
