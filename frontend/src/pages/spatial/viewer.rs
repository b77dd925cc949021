//! The 3D viewer component: a canvas drawn by [`Renderer`] in a `requestAnimationFrame` loop,
//! HTML labels placed over the objects, an orbit camera (drag the background, wheel to zoom),
//! and dragging of movable objects on a horizontal plane (Shift + drag lifts).

use std::cell::RefCell;
use std::rc::Rc;

use lachesis_shared::spatial::ARENA_HALF_SIZE;
use leptos::html::Canvas;
use leptos::prelude::*;
use web_sys::PointerEvent;

use super::render::{Drawn, Orbit, Renderer, START, Visual};
use crate::webgl::{self, Frame, OrbitCanvas};

/// A text placed over a point of the scene.
#[derive(Debug, Clone, PartialEq)]
pub struct Label {
    /// `data-testid` of the label: `label-<object>` or `goal-<n>`.
    pub key: String,
    pub text: String,
    pub at: [f32; 3],
}

/// An object the pointer may grab, with the radius used to pick it.
#[derive(Debug, Clone, PartialEq)]
pub struct Grabbable {
    pub id: String,
    pub center: [f32; 3],
    pub radius: f32,
    /// Half its height: it is never dragged below resting on the ground.
    pub half_height: f32,
}

/// What the scene shows; the viewer redraws when it changes.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SceneModel {
    pub objects: Vec<Drawn>,
    pub visuals: Vec<Visual>,
    pub labels: Vec<Label>,
    pub grabbable: Vec<Grabbable>,
}

/// A drag in progress. The pointer moves the object over the ground plane: the point under the
/// pointer on the ground keeps its offset from the object's centre, so nothing jumps when grabbed
/// and a point on the ground dragged onto another lands there exactly.
#[derive(Debug, Clone)]
struct Grab {
    id: String,
    offset: [f32; 2],
    height: f32,
    half_height: f32,
    last_y: f32,
}

#[derive(Default)]
struct Pointer {
    grab: Option<Grab>,
    orbiting: Option<(f32, f32)>,
}

fn ray_hits_sphere(origin: [f32; 3], dir: [f32; 3], center: [f32; 3], radius: f32) -> Option<f32> {
    let oc = [
        origin[0] - center[0],
        origin[1] - center[1],
        origin[2] - center[2],
    ];
    let b = oc[0] * dir[0] + oc[1] * dir[1] + oc[2] * dir[2];
    let c = oc[0] * oc[0] + oc[1] * oc[1] + oc[2] * oc[2] - radius * radius;
    let disc = b * b - c;
    (disc >= 0.0).then(|| -b - disc.sqrt()).filter(|t| *t > 0.0)
}

/// Where the ray meets the horizontal plane at `height`.
fn ray_at_height(origin: [f32; 3], dir: [f32; 3], height: f32) -> Option<[f32; 2]> {
    if dir[1].abs() < 1e-5 {
        return None;
    }
    let t = (height - origin[1]) / dir[1];
    (t > 0.0).then(|| [origin[0] + t * dir[0], origin[2] + t * dir[2]])
}

#[component]
pub fn SceneViewer(
    model: Signal<SceneModel>,
    /// Called while an object is dragged, with its new centre.
    #[prop(optional)]
    on_drag: Option<Callback<(String, [f32; 3])>>,
    /// Called when a drag ends.
    #[prop(optional)]
    on_drop: Option<Callback<String>>,
    /// Redraw every frame and report frames per second here (the benchmark page).
    #[prop(optional)]
    fps: Option<RwSignal<f64>>,
) -> impl IntoView {
    let canvas = NodeRef::<Canvas>::new();
    let renderer: StoredValue<Option<Rc<RefCell<Renderer>>>, LocalStorage> =
        StoredValue::new_local(None);
    let orbit = StoredValue::new_local(START);
    let pointer = StoredValue::new_local(Pointer::default());
    let dirty = StoredValue::new_local(true);
    let error = RwSignal::new(None::<String>);
    let placed = RwSignal::new(Vec::<(String, String, f32, f32)>::new());

    // The model changed: hand it to the renderer and ask for a frame.
    Effect::new(move |_| {
        let m = model.get();
        if let Some(r) = renderer.get_value() {
            let mut r = r.borrow_mut();
            r.set_objects(&m.objects);
            r.set_visuals(&m.visuals);
        }
        dirty.set_value(true);
    });

    webgl::mount(canvas, &["EXT_color_buffer_float"], error, move |context| {
        let mut r = Renderer::new(context);
        let m = model.get_untracked();
        r.set_objects(&m.objects);
        r.set_visuals(&m.visuals);
        renderer.set_value(Some(Rc::new(RefCell::new(r))));
        draw_frames(renderer, orbit, dirty, model, placed, fps)
    });

    let device_point = move |e: &PointerEvent| -> (f32, f32) {
        let ratio = web_sys::window().map_or(1.0, |w| w.device_pixel_ratio()) as f32;
        (e.offset_x() as f32 * ratio, e.offset_y() as f32 * ratio)
    };

    let pointer_down = move |e: PointerEvent| {
        let Some(r) = renderer.get_value() else {
            return;
        };
        let (x, y) = device_point(&e);
        let (origin, dir) = r.borrow().ray(x, y);
        let hit = model.with_untracked(|m| {
            m.grabbable
                .iter()
                .filter_map(|g| ray_hits_sphere(origin, dir, g.center, g.radius).map(|t| (t, g)))
                .min_by(|a, b| a.0.total_cmp(&b.0))
                .and_then(|(_, g)| {
                    let [gx, gz] = ray_at_height(origin, dir, 0.0)?;
                    Some(Grab {
                        id: g.id.clone(),
                        offset: [g.center[0] - gx, g.center[2] - gz],
                        height: g.center[1],
                        half_height: g.half_height,
                        last_y: y,
                    })
                })
        });
        pointer.update_value(|p| {
            if hit.is_some() {
                p.grab = hit;
            } else {
                p.orbiting = Some((x, y));
            }
        });
        webgl::capture_pointer(&e);
    };

    let pointer_move = move |e: PointerEvent| {
        let Some(r) = renderer.get_value() else {
            return;
        };
        let (x, y) = device_point(&e);
        let mut moved = None;
        pointer.update_value(|p| {
            if let Some(grab) = p.grab.as_mut() {
                if e.shift_key() {
                    grab.height =
                        (grab.height + (grab.last_y - y) * 0.01).clamp(grab.half_height, 4.0);
                }
                grab.last_y = y;
                let (origin, dir) = r.borrow().ray(x, y);
                if let Some([gx, gz]) = ray_at_height(origin, dir, 0.0) {
                    let limit = ARENA_HALF_SIZE - 0.05;
                    let x = (gx + grab.offset[0]).clamp(-limit, limit);
                    let z = (gz + grab.offset[1]).clamp(-limit, limit);
                    moved = Some((grab.id.clone(), [x, grab.height, z]));
                }
            } else if let Some((ox, oy)) = p.orbiting {
                orbit.update_value(|o| o.turn(-(x - ox) * 0.3, (y - oy) * 0.2));
                p.orbiting = Some((x, y));
                dirty.set_value(true);
            }
        });
        if let (Some(moved), Some(on_drag)) = (moved, on_drag) {
            on_drag.run(moved);
        }
    };

    let pointer_up = move |_e: PointerEvent| {
        let mut dropped = None;
        pointer.update_value(|p| {
            dropped = p.grab.take().map(|g| g.id);
            p.orbiting = None;
        });
        if let (Some(id), Some(on_drop)) = (dropped, on_drop) {
            on_drop.run(id);
        }
    };

    view! {
        <div class="scene-view">
            <OrbitCanvas
                canvas
                orbit
                dirty
                down=pointer_down
                moved=pointer_move
                up=pointer_up
                attr:data-testid="scene-canvas"
            />
            <For
                each=move || placed.get()
                key=|(key, text, x, y)| (key.clone(), text.clone(), x.to_bits(), y.to_bits())
                let((key, text, x, y))
            >
                <span
                    class=if key.starts_with("label-") { "scene-label object" } else { "scene-label goal" }
                    data-testid=key
                    data-x=x.to_string()
                    data-y=y.to_string()
                    style=format!("left:{x}px;top:{y}px")
                >
                    {text}
                </span>
            </For>
            {move || error.get().map(|e| view! { <p class="error">{e}</p> })}
        </div>
    }
}

/// Draws whenever something changed (every frame when measuring fps).
fn draw_frames(
    renderer: StoredValue<Option<Rc<RefCell<Renderer>>>, LocalStorage>,
    orbit: StoredValue<Orbit, LocalStorage>,
    dirty: StoredValue<bool, LocalStorage>,
    model: Signal<SceneModel>,
    placed: RwSignal<Vec<(String, String, f32, f32)>>,
    fps: Option<RwSignal<f64>>,
) -> impl FnMut(&Frame) {
    let mut counted = (0u32, None::<f64>);
    move |frame: &Frame| {
        let Frame {
            now,
            width,
            height,
            ratio,
            resized,
        } = *frame;
        if resized {
            dirty.set_value(true);
        }
        let measuring = fps.is_some();
        if (dirty.get_value() || measuring) && width > 0 && height > 0 {
            dirty.set_value(false);
            if let Some(r) = renderer.get_value() {
                let mut r = r.borrow_mut();
                if measuring {
                    orbit.update_value(|o| o.turn(0.2, 0.0));
                }
                r.set_view(&orbit.get_value(), width, height);
                r.render();
                let labels = model.with_untracked(|m| {
                    m.labels
                        .iter()
                        .filter(|l| r.in_front(l.at))
                        .map(|l| {
                            let (x, y) = r.screen_of(l.at);
                            let css =
                                |v: f32| ((f64::from(v) / ratio) * 10.0).round() as f32 / 10.0;
                            (l.key.clone(), l.text.clone(), css(x), css(y))
                        })
                        .collect::<Vec<_>>()
                });
                if !measuring && placed.with_untracked(|p| *p != labels) {
                    placed.set(labels);
                }
            }
        }
        if let Some(fps) = fps {
            counted.0 += 1;
            let start = *counted.1.get_or_insert(now);
            if now - start >= 1000.0 {
                fps.set(f64::from(counted.0) * 1000.0 / (now - start));
                counted = (0, Some(now));
            }
        }
    }
}
