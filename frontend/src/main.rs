//! The Lachesis browser app: a Leptos client-side app compiled to WASM and served by the backend.
//!
//! Rooms: [`app`] (shell, session, router), [`api`] (typed HTTP client), [`live`] (the WebSocket
//! client), [`charts`] (SVG line charts), [`pages`] (one module per route), [`table`] (the data
//! table every page lists things in), [`button`] (a page's action button), [`webgl`] (what the 3D
//! views share), [`format`].
//! Pure logic (chart geometry, smoothing, merging of live events) is unit-tested natively by
//! `cargo test --workspace`.

mod api;
mod app;
mod button;
mod charts;
mod format;
mod live;
mod pages;
mod table;
mod webgl;

fn main() {
    console_error_panic_hook::set_once();
    leptos::mount::mount_to_body(app::App);
}
