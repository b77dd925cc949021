//! What the 3D views (the protein structure, the spatial scene) share: a three-d context on a
//! canvas, started once the canvas is in the page and drawn in a `requestAnimationFrame` loop
//! until the component goes; the canvas element with its pointer and wheel handlers; an orbit
//! camera that the pointer turns and the wheel zooms; and the camera, material, empty instance
//! set and lit render pass each renderer builds on.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use leptos::html::Canvas;
use leptos::prelude::*;
use three_d::{
    AmbientLight, Camera, ClearState, Context, CpuMaterial, DirectionalLight, Instances, Light,
    Object, PhysicalMaterial, RenderTarget, Srgba, Vec3, Viewport, degrees, vec3,
};
use wasm_bindgen::JsCast;
use wasm_bindgen::closure::Closure;
use web_sys::{HtmlCanvasElement, PointerEvent, WebGl2RenderingContext, WheelEvent};

/// The canvas as one animation frame finds it.
pub struct Frame {
    /// The frame's timestamp, in milliseconds.
    pub now: f64,
    /// The drawing buffer's size in device pixels (0 while the canvas has no box).
    pub width: u32,
    pub height: u32,
    /// Device pixels per CSS pixel.
    pub ratio: f64,
    /// The buffer took the canvas's new size in this frame (which clears it).
    pub resized: bool,
}

/// Starts a 3D view on `canvas` once it is in the page: `setup` gets the three-d context and
/// returns what draws each animation frame, called until the component goes. The WebGL
/// `extensions` are enabled first. Without a context, `error` gets the sentence to show instead.
pub fn mount<D>(
    canvas: NodeRef<Canvas>,
    extensions: &'static [&'static str],
    error: RwSignal<Option<String>>,
    setup: impl FnOnce(Context) -> D + 'static,
) where
    D: FnMut(&Frame) + 'static,
{
    let alive = Arc::new(AtomicBool::new(true));
    let stop = alive.clone();
    on_cleanup(move || stop.store(false, Ordering::Relaxed));
    let mut setup = Some(setup);
    Effect::new(move |_| {
        let Some(element) = canvas.get() else {
            return;
        };
        if setup.is_none() {
            // Already drawing.
            return;
        }
        match open(&element, extensions) {
            Ok(context) => {
                if let Some(setup) = setup.take() {
                    animate(element, alive.clone(), setup(context));
                }
            }
            Err(e) => error.set(Some(e)),
        }
    });
}

/// glow's context over the browser's WebGL2 one (the workspace also compiles this crate for the
/// host, for `cargo clippy --workspace`, where there is no WebGL).
#[cfg(target_arch = "wasm32")]
fn gl_context(gl: WebGl2RenderingContext) -> Result<three_d::context::Context, String> {
    Ok(three_d::context::Context::from_webgl2_context(gl))
}

#[cfg(not(target_arch = "wasm32"))]
fn gl_context(_gl: WebGl2RenderingContext) -> Result<three_d::context::Context, String> {
    Err("WebGL2 exists only in a browser".into())
}

/// The canvas's WebGL2 context as three-d's, or the sentence to show in place of the view.
fn open(canvas: &HtmlCanvasElement, extensions: &[&str]) -> Result<Context, String> {
    let options = js_sys::Object::new();
    let _ = js_sys::Reflect::set(&options, &"antialias".into(), &true.into());
    // Kept after compositing so the page (and the browser tests) can read pixels any time.
    let _ = js_sys::Reflect::set(&options, &"preserveDrawingBuffer".into(), &true.into());
    let gl = canvas
        .get_context_with_context_options("webgl2", &options)
        .ok()
        .flatten()
        .and_then(|c| c.dyn_into::<WebGl2RenderingContext>().ok())
        .ok_or("This browser has no WebGL2: the 3D view is unavailable.")?;
    for name in extensions {
        let _ = gl.get_extension(name);
    }
    let gl = gl_context(gl).map_err(|e| format!("3D view: {e}"))?;
    // three-d's API takes an Arc; a browser's WebGL context lives on one thread regardless.
    #[allow(clippy::arc_with_non_send_sync)]
    let gl = Arc::new(gl);
    Context::from_gl_context(gl).map_err(|e| format!("3D view: {e}"))
}

type Callback = Rc<RefCell<Option<Closure<dyn FnMut(f64)>>>>;

fn request_frame(callback: &Callback) {
    if let Some(window) = web_sys::window()
        && let Some(callback) = callback.borrow().as_ref()
    {
        let _ = window.request_animation_frame(callback.as_ref().unchecked_ref());
    }
}

/// Calls `draw` every animation frame, the canvas's buffer kept the size of its box in device
/// pixels, until `alive` turns false.
fn animate(
    element: HtmlCanvasElement,
    alive: Arc<AtomicBool>,
    mut draw: impl FnMut(&Frame) + 'static,
) {
    let callback: Callback = Rc::new(RefCell::new(None));
    let again = callback.clone();
    let mut size = (0u32, 0u32);
    *callback.borrow_mut() = Some(Closure::new(move |now: f64| {
        if !alive.load(Ordering::Relaxed) {
            // The component is gone: stop asking for frames. (The closure stays allocated: it
            // cannot drop itself while running.)
            return;
        }
        let ratio = web_sys::window().map_or(1.0, |w| w.device_pixel_ratio());
        let width = (f64::from(element.client_width()) * ratio) as u32;
        let height = (f64::from(element.client_height()) * ratio) as u32;
        let resized = (width, height) != size;
        if resized {
            element.set_width(width);
            element.set_height(height);
            size = (width, height);
        }
        draw(&Frame {
            now,
            width,
            height,
            ratio,
            resized,
        });
        request_frame(&again);
    }));
    request_frame(&callback);
}

/// Keeps the pointer's events on the element it went down on while it drags.
pub fn capture_pointer(e: &PointerEvent) {
    if let Some(target) = e
        .target()
        .and_then(|t| t.dyn_into::<web_sys::Element>().ok())
    {
        let _ = target.set_pointer_capture(e.pointer_id());
    }
}

/// Zooms `orbit` a step out or in as the wheel turns (instead of scrolling the page).
fn wheel_zoom(orbit: StoredValue<Orbit, LocalStorage>, e: &WheelEvent) {
    e.prevent_default();
    let factor = if e.delta_y() > 0.0 { 1.1 } else { 1.0 / 1.1 };
    orbit.update_value(|o| o.zoom(factor));
}

/// A 3D view's canvas: `down`, `moved` and `up` get the pointer's events (a cancelled pointer is
/// let go too), and the wheel zooms `orbit` and marks the view `dirty`. `attr:` attributes go on
/// the canvas.
#[component]
pub fn OrbitCanvas(
    canvas: NodeRef<Canvas>,
    orbit: StoredValue<Orbit, LocalStorage>,
    dirty: StoredValue<bool, LocalStorage>,
    down: impl Fn(PointerEvent) + 'static,
    moved: impl Fn(PointerEvent) + 'static,
    up: impl Fn(PointerEvent) + Clone + 'static,
) -> impl IntoView {
    let wheel = move |e: WheelEvent| {
        wheel_zoom(orbit, &e);
        dirty.set_value(true);
    };
    view! {
        <canvas
            node_ref=canvas
            on:pointerdown=down
            on:pointermove=moved
            on:pointerup=up.clone()
            on:pointercancel=up
            on:wheel=wheel
        ></canvas>
    }
}

/// Where an orbit camera looks from, around what it looks at: degrees and world units, the
/// pitch and distance kept within their limits (lowest, highest).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Orbit {
    pub yaw: f32,
    pub pitch: f32,
    pub distance: f32,
    pub pitch_limits: (f32, f32),
    pub distance_limits: (f32, f32),
}

impl Orbit {
    pub fn turn(&mut self, d_yaw: f32, d_pitch: f32) {
        let (low, high) = self.pitch_limits;
        self.yaw = (self.yaw + d_yaw).rem_euclid(360.0);
        self.pitch = (self.pitch + d_pitch).clamp(low, high);
    }

    pub fn zoom(&mut self, factor: f32) {
        let (near, far) = self.distance_limits;
        self.distance = (self.distance * factor).clamp(near, far);
    }

    fn eye(&self) -> Vec3 {
        let (yaw, pitch) = (self.yaw.to_radians(), self.pitch.to_radians());
        vec3(
            self.distance * pitch.cos() * yaw.sin(),
            self.distance * pitch.sin(),
            self.distance * pitch.cos() * yaw.cos(),
        )
    }

    /// Points `camera` at `target` from here, its viewport `width` by `height` pixels.
    pub fn aim(&self, camera: &mut Camera, target: Vec3, width: u32, height: u32) {
        camera.set_viewport(Viewport::new_at_origo(width.max(1), height.max(1)));
        camera.set_view(target + self.eye(), target, vec3(0.0, 1.0, 0.0));
    }
}

/// A perspective camera from `eye` towards `target`, y up, seeing from 0.1 to 200 units away
/// (its viewport is set by [`Orbit::aim`] before it draws).
pub fn camera(eye: Vec3, target: Vec3, field_of_view: f32) -> Camera {
    Camera::new_perspective(
        Viewport::new_at_origo(1, 1),
        eye,
        target,
        vec3(0.0, 1.0, 0.0),
        degrees(field_of_view),
        0.1,
        200.0,
    )
}

/// A white, slightly metallic surface (instances bring their own colours).
pub fn white_material(context: &Context, roughness: f32) -> PhysicalMaterial {
    PhysicalMaterial::new_opaque(
        context,
        &CpuMaterial {
            albedo: Srgba::WHITE,
            roughness,
            metallic: 0.05,
            ..Default::default()
        },
    )
}

/// No instances yet, each to come with its colour.
pub fn no_instances() -> Instances {
    Instances {
        transformations: Vec::new(),
        texture_transformations: None,
        colors: Some(Vec::new()),
    }
}

/// An ambient light, a key light and a fill light.
pub type Lights = (AmbientLight, DirectionalLight, DirectionalLight);

/// Clears the screen to `background` and draws `objects` as `camera` sees them.
pub fn render(
    context: &Context,
    camera: &Camera,
    lights: &Lights,
    background: (f32, f32, f32),
    objects: impl IntoIterator<Item = impl Object>,
) {
    let viewport = camera.viewport();
    let (ambient, key, fill) = lights;
    let lights: [&dyn Light; 3] = [ambient, key, fill];
    let (r, g, b) = background;
    RenderTarget::screen(context, viewport.width, viewport.height)
        .clear(ClearState::color_and_depth(r, g, b, 1.0, 1.0))
        .render(camera, objects, &lights);
}
