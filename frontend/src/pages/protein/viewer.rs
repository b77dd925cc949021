//! The structure viewer: a backbone trace (spheres at the alpha carbons, sticks between chain
//! neighbours) drawn with three-d on a WebGL2 canvas in a `requestAnimationFrame` loop, slowly
//! turning unless the reader drags it (drag to orbit, wheel to zoom). Set up by [`crate::webgl`],
//! as the spatial viewer is; the canvas reports what it drew in `data-chains` and `data-residues`.

use leptos::html::Canvas;
use leptos::prelude::Effect;
use leptos::prelude::*;
use three_d::*;
use web_sys::PointerEvent;

use super::geometry::{FIT_RADIUS, Layout};
use crate::webgl::{self, Frame, Lights, Orbit, OrbitCanvas};

/// Degrees per second of the automatic turn.
const SPIN: f32 = 10.0;
const BACKGROUND: (f32, f32, f32) = (0.06, 0.08, 0.11);

/// The camera starts a little above the structure and keeps it in view when zoomed.
const START: Orbit = Orbit {
    yaw: 0.0,
    pitch: 15.0,
    distance: FIT_RADIUS * 2.75,
    pitch_limits: (-85.0, 85.0),
    distance_limits: (FIT_RADIUS * 1.2, FIT_RADIUS * 8.0),
};

struct Renderer {
    context: Context,
    camera: Camera,
    balls: Gm<InstancedMesh, PhysicalMaterial>,
    sticks: Gm<InstancedMesh, PhysicalMaterial>,
    lights: Lights,
}

fn rgb(c: [u8; 3]) -> Srgba {
    Srgba::new(c[0], c[1], c[2], 255)
}

impl Renderer {
    fn new(context: Context) -> Self {
        let empty = webgl::no_instances();
        let lights = (
            AmbientLight::new(&context, 0.45, Srgba::WHITE),
            DirectionalLight::new(&context, 2.0, Srgba::WHITE, vec3(-0.4, -0.8, -0.6)),
            DirectionalLight::new(&context, 0.7, Srgba::WHITE, vec3(0.6, 0.3, 0.7)),
        );
        let camera = webgl::camera(vec3(0.0, 0.0, 12.0), vec3(0.0, 0.0, 0.0), 40.0);
        Self {
            balls: Gm::new(
                InstancedMesh::new(&context, &empty, &CpuMesh::sphere(16)),
                webgl::white_material(&context, 0.45),
            ),
            sticks: Gm::new(
                InstancedMesh::new(&context, &empty, &CpuMesh::cylinder(12)),
                webgl::white_material(&context, 0.45),
            ),
            context,
            camera,
            lights,
        }
    }

    fn set_layout(&mut self, layout: &Layout) {
        let balls = Instances {
            transformations: layout
                .balls
                .iter()
                .map(|(p, _)| {
                    Mat4::from_translation(vec3(p[0], p[1], p[2]))
                        * Mat4::from_scale(layout.ball_radius)
                })
                .collect(),
            texture_transformations: None,
            colors: Some(layout.balls.iter().map(|(_, c)| rgb(*c)).collect()),
        };
        // three-d's cylinder runs along x from 0 to 1 with radius 1.
        let sticks = Instances {
            transformations: layout
                .sticks
                .iter()
                .map(|(a, b, _)| {
                    let (a, b) = (vec3(a[0], a[1], a[2]), vec3(b[0], b[1], b[2]));
                    let d = b - a;
                    let length = d.magnitude().max(1e-5);
                    let rotation = Quaternion::from_arc(vec3(1.0, 0.0, 0.0), d / length, None);
                    Mat4::from_translation(a)
                        * Mat4::from(rotation)
                        * Mat4::from_nonuniform_scale(
                            length,
                            layout.stick_radius,
                            layout.stick_radius,
                        )
                })
                .collect(),
            texture_transformations: None,
            colors: Some(layout.sticks.iter().map(|(_, _, c)| rgb(*c)).collect()),
        };
        self.balls.geometry.set_instances(&balls);
        self.sticks.geometry.set_instances(&sticks);
    }

    fn set_view(&mut self, orbit: &Orbit, width: u32, height: u32) {
        orbit.aim(&mut self.camera, vec3(0.0, 0.0, 0.0), width, height);
    }

    fn render(&self) {
        webgl::render(
            &self.context,
            &self.camera,
            &self.lights,
            BACKGROUND,
            self.balls.into_iter().chain(&self.sticks),
        );
    }
}

/// What one frame needs from the component.
#[derive(Clone, Copy)]
struct Shared {
    orbit: StoredValue<Orbit, LocalStorage>,
    /// A new layout waiting for the next frame.
    pending: StoredValue<Option<Layout>, LocalStorage>,
    dragging: StoredValue<Option<(f32, f32)>, LocalStorage>,
    /// The view changed (zoom): draw again even when not turning.
    dirty: StoredValue<bool, LocalStorage>,
    /// (chains, residues) of the layout on screen.
    drawn: RwSignal<(usize, usize)>,
    spin: RwSignal<bool>,
}

/// The canvas, drawing `layout` (redrawn whenever it changes).
#[component]
pub fn StructureViewer(
    layout: Memo<Layout>,
    /// An accessible description of what is drawn.
    label: Signal<String>,
) -> impl IntoView {
    let canvas = NodeRef::<Canvas>::new();
    let shared = Shared {
        orbit: StoredValue::new_local(START),
        pending: StoredValue::new_local(None),
        dragging: StoredValue::new_local(None),
        dirty: StoredValue::new_local(true),
        drawn: RwSignal::new((0, 0)),
        spin: RwSignal::new(true),
    };
    let error = RwSignal::new(None::<String>);

    Effect::new(move |_| {
        let next = layout.get();
        shared.pending.set_value(Some(next));
    });

    webgl::mount(canvas, &[], error, move |context| {
        draw_frames(Renderer::new(context), shared)
    });

    let device_point = |e: &PointerEvent| (e.offset_x() as f32, e.offset_y() as f32);
    let pointer_down = move |e: PointerEvent| {
        shared.dragging.set_value(Some(device_point(&e)));
        webgl::capture_pointer(&e);
    };
    let pointer_move = move |e: PointerEvent| {
        let Some((ox, oy)) = shared.dragging.get_value() else {
            return;
        };
        let (x, y) = device_point(&e);
        shared
            .orbit
            .update_value(|o| o.turn(-(x - ox) * 0.4, (y - oy) * 0.3));
        shared.dragging.set_value(Some((x, y)));
        shared.dirty.set_value(true);
    };
    let pointer_up = move |_e: PointerEvent| shared.dragging.set_value(None);

    view! {
        <div class="protein-view">
            <OrbitCanvas
                canvas
                orbit=shared.orbit
                dirty=shared.dirty
                down=pointer_down
                moved=pointer_move
                up=pointer_up
                attr:data-testid="protein-viewer"
                attr:role="img"
                attr:aria-label=move || label.get()
                attr:data-chains=move || shared.drawn.get().0.to_string()
                attr:data-residues=move || shared.drawn.get().1.to_string()
            />
            <label class="protein-spin">
                <input
                    type="checkbox"
                    prop:checked=move || shared.spin.get()
                    on:change=move |e| shared.spin.set(event_target_checked(&e))
                />
                " Turn slowly"
            </label>
            {move || error.get().map(|e| view! { <p class="error" role="alert">{e}</p> })}
        </div>
    }
}

/// Draws every frame (the structure turns); a new layout is handed to the renderer in the frame
/// after it arrives, and `drawn` says so once it is on screen.
fn draw_frames(mut renderer: Renderer, shared: Shared) -> impl FnMut(&Frame) {
    let mut last = None::<f64>;
    move |frame: &Frame| {
        let elapsed = last.map_or(0.0, |l| ((frame.now - l) / 1000.0).min(0.1) as f32);
        last = Some(frame.now);
        let turning = shared.spin.get_untracked() && shared.dragging.get_value().is_none();
        if turning {
            shared.orbit.update_value(|o| o.turn(SPIN * elapsed, 0.0));
        }
        if frame.width == 0 || frame.height == 0 {
            return;
        }
        let mut changed = frame.resized;
        let fresh = shared.pending.try_update_value(Option::take).flatten();
        let counts = fresh.as_ref().map(|l| (l.chains, l.residues));
        if let Some(layout) = fresh {
            renderer.set_layout(&layout);
            changed = true;
        }
        // A still, unchanged picture is not drawn again.
        if changed || turning || shared.dirty.get_value() {
            shared.dirty.set_value(false);
            renderer.set_view(&shared.orbit.get_value(), frame.width, frame.height);
            renderer.render();
        }
        if let Some(counts) = counts {
            shared.drawn.set(counts);
        }
    }
}
