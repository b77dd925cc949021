//! `/spatial/bench?objects=N`: N objects (500 by default) drawn every frame while the camera
//! turns; the frames per second over the last second appear in `[data-testid=fps]`.

use lachesis_shared::spatial::{Pose, Shape};
use leptos::prelude::*;
use leptos_router::hooks::use_query_map;

use super::render::Drawn;
use super::viewer::{SceneModel, SceneViewer};

fn objects(n: usize) -> Vec<Drawn> {
    let side = (n as f32).sqrt().ceil() as usize;
    (0..n)
        .map(|i| {
            let (row, column) = (i / side, i % side);
            let spacing = 7.6 / side as f32;
            let size = spacing * 0.6;
            let shape = match i % 3 {
                0 => Shape::Cube { size },
                1 => Shape::Sphere { radius: size / 2.0 },
                _ => Shape::Cylinder {
                    radius: size / 2.0,
                    height: size,
                },
            };
            let x = -3.8 + spacing * (column as f32 + 0.5);
            let z = -3.8 + spacing * (row as f32 + 0.5);
            Drawn {
                shape,
                color: [
                    0.3 + 0.7 * (i % 7) as f32 / 7.0,
                    0.3 + 0.7 * (i % 5) as f32 / 5.0,
                    0.6,
                ],
                pose: Pose::from_yaw([x, size / 2.0, z], (i * 13 % 90) as f32),
                highlighted: false,
            }
        })
        .collect()
}

#[component]
pub fn SpatialBenchPage() -> impl IntoView {
    let query = use_query_map();
    let n = query
        .with_untracked(|q| q.get("objects").and_then(|v| v.parse().ok()))
        .unwrap_or(500usize)
        .min(5000);
    let model = SceneModel {
        objects: objects(n),
        ..SceneModel::default()
    };
    let fps = RwSignal::new(0.0);
    view! {
        <h1>"Viewer frame rate"</h1>
        <p>
            {format!("{n} objects, redrawn every frame: ")}
            <strong data-testid="fps" data-objects=n.to_string()>{move || format!("{:.1}", fps.get())}</strong>
            " frames/s"
        </p>
        <SceneViewer model=Signal::stored(model) fps=fps />
    }
}
