//! The structure viewer: a backbone trace (spheres at the alpha carbons, sticks between chain
//! neighbours) drawn with three-d on a WebGL2 canvas in a `requestAnimationFrame` loop, slowly
//! turning unless the reader drags it (drag to orbit, wheel to zoom). Set up as the spatial
//! viewer is; the canvas reports what it drew in `data-chains` and `data-residues`.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use leptos::html::Canvas;
use leptos::prelude::Effect;
use leptos::prelude::*;
use three_d::*;
use wasm_bindgen::JsCast;
use wasm_bindgen::closure::Closure;
use web_sys::{PointerEvent, WebGl2RenderingContext, WheelEvent};

use super::geometry::{FIT_RADIUS, Layout};

/// Degrees per second of the automatic turn.
const SPIN: f32 = 10.0;
const BACKGROUND: (f32, f32, f32) = (0.06, 0.08, 0.11);

/// Where the camera looks from, in degrees and world units, around the origin.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Orbit {
    yaw: f32,
    pitch: f32,
    distance: f32,
}

impl Default for Orbit {
    fn default() -> Self {
        Self {
            yaw: 0.0,
            pitch: 15.0,
            distance: FIT_RADIUS * 2.75,
        }
    }
}

impl Orbit {
    fn eye(&self) -> Vec3 {
        let (yaw, pitch) = (self.yaw.to_radians(), self.pitch.to_radians());
        vec3(
            self.distance * pitch.cos() * yaw.sin(),
            self.distance * pitch.sin(),
            self.distance * pitch.cos() * yaw.cos(),
        )
    }
}

/// glow's context over the browser's WebGL2 one (the host build, for clippy, has no WebGL).
#[cfg(target_arch = "wasm32")]
fn gl_context(gl: WebGl2RenderingContext) -> Result<context::Context, String> {
    Ok(context::Context::from_webgl2_context(gl))
}

#[cfg(not(target_arch = "wasm32"))]
fn gl_context(_gl: WebGl2RenderingContext) -> Result<context::Context, String> {
    Err("WebGL2 exists only in a browser".into())
}

struct Renderer {
    context: Context,
    camera: Camera,
    balls: Gm<InstancedMesh, PhysicalMaterial>,
    sticks: Gm<InstancedMesh, PhysicalMaterial>,
    lights: (AmbientLight, DirectionalLight, DirectionalLight),
}

fn rgb(c: [u8; 3]) -> Srgba {
    Srgba::new(c[0], c[1], c[2], 255)
}

impl Renderer {
    fn new(gl: WebGl2RenderingContext) -> Result<Self, String> {
        let gl = gl_context(gl)?;
        // three-d's API takes an Arc; a browser's WebGL context lives on one thread regardless.
        #[allow(clippy::arc_with_non_send_sync)]
        let gl = Arc::new(gl);
        let context = Context::from_gl_context(gl).map_err(|e| e.to_string())?;
        let empty = Instances {
            transformations: Vec::new(),
            texture_transformations: None,
            colors: Some(Vec::new()),
        };
        let material = || {
            PhysicalMaterial::new_opaque(
                &context,
                &CpuMaterial {
                    albedo: Srgba::WHITE,
                    roughness: 0.45,
                    metallic: 0.05,
                    ..Default::default()
                },
            )
        };
        let lights = (
            AmbientLight::new(&context, 0.45, Srgba::WHITE),
            DirectionalLight::new(&context, 2.0, Srgba::WHITE, vec3(-0.4, -0.8, -0.6)),
            DirectionalLight::new(&context, 0.7, Srgba::WHITE, vec3(0.6, 0.3, 0.7)),
        );
        let camera = Camera::new_perspective(
            Viewport::new_at_origo(1, 1),
            vec3(0.0, 0.0, 12.0),
            vec3(0.0, 0.0, 0.0),
            vec3(0.0, 1.0, 0.0),
            degrees(40.0),
            0.1,
            200.0,
        );
        Ok(Self {
            balls: Gm::new(
                InstancedMesh::new(&context, &empty, &CpuMesh::sphere(16)),
                material(),
            ),
            sticks: Gm::new(
                InstancedMesh::new(&context, &empty, &CpuMesh::cylinder(12)),
                material(),
            ),
            context,
            camera,
            lights,
        })
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
        self.camera
            .set_viewport(Viewport::new_at_origo(width.max(1), height.max(1)));
        self.camera
            .set_view(orbit.eye(), vec3(0.0, 0.0, 0.0), vec3(0.0, 1.0, 0.0));
    }

    fn render(&self) {
        let viewport = self.camera.viewport();
        let (ambient, key, fill) = &self.lights;
        let lights: [&dyn Light; 3] = [ambient, key, fill];
        let (r, g, b) = BACKGROUND;
        RenderTarget::screen(&self.context, viewport.width, viewport.height)
            .clear(ClearState::color_and_depth(r, g, b, 1.0, 1.0))
            .render(
                &self.camera,
                self.balls.into_iter().chain(&self.sticks),
                &lights,
            );
    }
}

/// What one frame needs from the component.
#[derive(Clone, Copy)]
struct Shared {
    renderer: StoredValue<Option<Rc<RefCell<Renderer>>>, LocalStorage>,
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
        renderer: StoredValue::new_local(None),
        orbit: StoredValue::new_local(Orbit::default()),
        pending: StoredValue::new_local(None),
        dragging: StoredValue::new_local(None),
        dirty: StoredValue::new_local(true),
        drawn: RwSignal::new((0, 0)),
        spin: RwSignal::new(true),
    };
    let error = RwSignal::new(None::<String>);
    let alive = Arc::new(AtomicBool::new(true));
    let stop = alive.clone();
    on_cleanup(move || stop.store(false, Ordering::Relaxed));

    Effect::new(move |_| {
        let next = layout.get();
        shared.pending.set_value(Some(next));
    });

    Effect::new(move |_| {
        let Some(element) = canvas.get() else {
            return;
        };
        if shared.renderer.get_value().is_some() {
            return;
        }
        let options = js_sys::Object::new();
        let _ = js_sys::Reflect::set(&options, &"antialias".into(), &true.into());
        // Kept after compositing so the browser test can read the pixels any time.
        let _ = js_sys::Reflect::set(&options, &"preserveDrawingBuffer".into(), &true.into());
        let gl = element
            .get_context_with_context_options("webgl2", &options)
            .ok()
            .flatten()
            .and_then(|c| c.dyn_into::<WebGl2RenderingContext>().ok());
        let Some(gl) = gl else {
            error.set(Some(
                "This browser has no WebGL2: the 3D view is unavailable.".into(),
            ));
            return;
        };
        match Renderer::new(gl) {
            Ok(r) => shared.renderer.set_value(Some(Rc::new(RefCell::new(r)))),
            Err(e) => {
                error.set(Some(format!("3D view: {e}")));
                return;
            }
        }
        start_loop(element, shared, alive.clone());
    });

    let device_point = |e: &PointerEvent| (e.offset_x() as f32, e.offset_y() as f32);
    let pointer_down = move |e: PointerEvent| {
        shared.dragging.set_value(Some(device_point(&e)));
        if let Some(target) = e
            .target()
            .and_then(|t| t.dyn_into::<web_sys::Element>().ok())
        {
            let _ = target.set_pointer_capture(e.pointer_id());
        }
    };
    let pointer_move = move |e: PointerEvent| {
        let Some((ox, oy)) = shared.dragging.get_value() else {
            return;
        };
        let (x, y) = device_point(&e);
        shared.orbit.update_value(|o| {
            o.yaw = (o.yaw - (x - ox) * 0.4).rem_euclid(360.0);
            o.pitch = (o.pitch + (y - oy) * 0.3).clamp(-85.0, 85.0);
        });
        shared.dragging.set_value(Some((x, y)));
        shared.dirty.set_value(true);
    };
    let pointer_up = move |_e: PointerEvent| shared.dragging.set_value(None);
    let wheel = move |e: WheelEvent| {
        e.prevent_default();
        let factor = if e.delta_y() > 0.0 { 1.1 } else { 1.0 / 1.1 };
        shared.orbit.update_value(|o| {
            o.distance = (o.distance * factor).clamp(FIT_RADIUS * 1.2, FIT_RADIUS * 8.0);
        });
        shared.dirty.set_value(true);
    };

    view! {
        <div class="protein-view">
            <canvas
                node_ref=canvas
                data-testid="protein-viewer"
                role="img"
                aria-label=move || label.get()
                data-chains=move || shared.drawn.get().0.to_string()
                data-residues=move || shared.drawn.get().1.to_string()
                on:pointerdown=pointer_down
                on:pointermove=pointer_move
                on:pointerup=pointer_up
                on:pointercancel=pointer_up
                on:wheel=wheel
            ></canvas>
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

/// Draws every frame (the structure turns) until the component goes; a new layout is handed to
/// the renderer in the frame after it arrives, and `drawn` says so once it is on screen.
fn start_loop(element: web_sys::HtmlCanvasElement, shared: Shared, alive: Arc<AtomicBool>) {
    type Frame = Rc<RefCell<Option<Closure<dyn FnMut(f64)>>>>;
    let frame: Frame = Rc::new(RefCell::new(None));
    let again = frame.clone();
    let mut size = (0u32, 0u32);
    let mut last = None::<f64>;
    *frame.borrow_mut() = Some(Closure::new(move |now: f64| {
        if !alive.load(Ordering::Relaxed) {
            // The component is gone: stop asking for frames.
            return;
        }
        let ratio = web_sys::window().map_or(1.0, |w| w.device_pixel_ratio());
        let width = (f64::from(element.client_width()) * ratio) as u32;
        let height = (f64::from(element.client_height()) * ratio) as u32;
        let mut changed = false;
        if (width, height) != size {
            element.set_width(width);
            element.set_height(height);
            size = (width, height);
            changed = true;
        }
        let elapsed = last.map_or(0.0, |l| ((now - l) / 1000.0).min(0.1) as f32);
        last = Some(now);
        let turning = shared.spin.get_untracked() && shared.dragging.get_value().is_none();
        if turning {
            shared
                .orbit
                .update_value(|o| o.yaw = (o.yaw + SPIN * elapsed).rem_euclid(360.0));
        }
        if let Some(r) = shared.renderer.get_value()
            && width > 0
            && height > 0
        {
            let mut r = r.borrow_mut();
            let fresh = shared.pending.try_update_value(Option::take).flatten();
            let counts = fresh.as_ref().map(|l| (l.chains, l.residues));
            if let Some(layout) = fresh {
                r.set_layout(&layout);
                changed = true;
            }
            // A still, unchanged picture is not drawn again.
            if changed || turning || shared.dirty.get_value() {
                shared.dirty.set_value(false);
                r.set_view(&shared.orbit.get_value(), width, height);
                r.render();
            }
            if let Some(counts) = counts {
                shared.drawn.set(counts);
            }
        }
        if let Some(window) = web_sys::window()
            && let Some(callback) = again.borrow().as_ref()
        {
            let _ = window.request_animation_frame(callback.as_ref().unchecked_ref());
        }
    }));
    if let Some(window) = web_sys::window()
        && let Some(callback) = frame.borrow().as_ref()
    {
        let _ = window.request_animation_frame(callback.as_ref().unchecked_ref());
    }
}
