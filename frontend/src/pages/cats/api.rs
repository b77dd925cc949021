//! The caretaker routes of the HTTP API, over the app's request helpers (CSRF, errors, 401 hook).

use lachesis_shared::cats::{CatBehavior, CatMove, CatRole, CatSession, NewCatSession};

use crate::api::{self, ApiResult, encode};

pub async fn behaviors() -> ApiResult<Vec<CatBehavior>> {
    api::get("/api/cats/behaviors").await
}

pub async fn start(role: CatRole) -> ApiResult<CatSession> {
    api::post("/api/cats/sessions", &NewCatSession { role, seed: None }).await
}

/// Plays the person's move; the answer carries the other side's reply (and, at the end, the
/// verdict).
pub async fn play(id: &str, turn: &CatMove) -> ApiResult<CatSession> {
    api::post(&format!("/api/cats/sessions/{}/turns", encode(id)), turn).await
}
