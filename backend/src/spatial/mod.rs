//! Spatial reasoning in the browser: tasks to solve, people's attempts judged by the same scorer
//! as the model's and kept as demonstrations (exported as JSONL), and the live scene a hosted
//! `spatial` environment streams to ([`stream`], lent to it as its scene sink when the server
//! hosts it). The server uses the environment (`envs::spatial`), never the other way round.
//!
//! Access: reading tasks and scenes needs no more than any other page (with accounts on, a
//! signed-in user or a token); submitting an attempt changes state, so it takes a signed-in
//! caller and, for cookie sessions, the CSRF header.

pub mod cli;
pub(crate) mod store;
pub mod stream;

use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use lachesis_shared::spatial::{
    AttemptResult, DIFFICULTIES, HumanAttempt, SceneSnapshot, Task, score,
};

use crate::app::AppError;
use crate::app::AppState;
use crate::app::error::Body;
use crate::auth::Viewer;
use crate::auth::Writer;
use crate::envs::spatial::{STEPS_PER_FRAME, generate::generate, parse::check_actions, physics};

pub use stream::{SceneStreamer, live_scene};

/// The scene the in-process environment shows its attempts on.
pub const LIVE_SCENE: &str = "live";

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/spatial/tasks/{difficulty}/{seed}", get(task))
        .route("/api/spatial/attempts", post(attempt))
        .route("/api/spatial/scenes/{scene}", get(scene))
        .route(
            "/api/spatial/demonstrations.jsonl",
            get(demonstrations_jsonl),
        )
}

fn signed_in(viewer: &Viewer) -> Result<(), AppError> {
    match viewer {
        Viewer::Anonymous => Err(AppError::NotSignedIn),
        _ => Ok(()),
    }
}

/// A task id's parts, checked: difficulty 1-4, a seed Postgres can store.
fn task_for(difficulty: u8, seed: u64) -> Result<Task, AppError> {
    if !DIFFICULTIES.contains(&difficulty) {
        return Err(AppError::Invalid(format!(
            "difficulty {difficulty} is not 1 to 4"
        )));
    }
    if i64::try_from(seed).is_err() {
        return Err(AppError::Invalid(format!(
            "seed {seed} is larger than {}",
            i64::MAX
        )));
    }
    Ok(generate(seed, difficulty))
}

async fn task(
    State(state): State<AppState>,
    viewer: Viewer,
    Path((difficulty, seed)): Path<(u8, u64)>,
) -> Result<Json<Task>, AppError> {
    let _ = &state;
    signed_in(&viewer)?;
    Ok(Json(task_for(difficulty, seed)?))
}

async fn attempt(
    State(state): State<AppState>,
    Writer(viewer): Writer,
    Body(attempt): Body<HumanAttempt>,
) -> Result<Json<AttemptResult>, AppError> {
    signed_in(&viewer)?;
    let task = task_for(attempt.difficulty, attempt.seed)?;
    check_actions(&attempt.actions, &task).map_err(|e| AppError::Invalid(e.to_string()))?;
    let actions = attempt.actions.clone();
    let objects = task.objects.clone();
    // Up to a few milliseconds of physics: off the async workers.
    let settled =
        tokio::task::spawn_blocking(move || physics::simulate(&objects, &actions, STEPS_PER_FRAME))
            .await
            .map_err(|e| AppError::Internal(format!("physics task: {e}")))?;
    let final_poses = settled.recording.frames.last().cloned().unwrap_or_default();
    let verdict = score(&task, &final_poses);
    let user_id = match viewer {
        Viewer::User { id, .. } => Some(id),
        _ => None,
    };
    let id = store::insert_demonstration(
        &state.db,
        &store::NewDemonstration {
            task: &task,
            actions: &attempt.actions,
            final_poses: &final_poses,
            verdict: &verdict,
            rested: settled.rested,
            user_id,
        },
    )
    .await?;
    Ok(Json(AttemptResult {
        verdict,
        recording: settled.recording,
        rested: settled.rested,
        demonstration_id: Some(id),
    }))
}

async fn scene(
    State(state): State<AppState>,
    viewer: Viewer,
    Path(scene): Path<String>,
) -> Result<Json<SceneSnapshot>, AppError> {
    signed_in(&viewer)?;
    store::load_scene(&state.db, &scene)
        .await?
        .map(Json)
        .ok_or(AppError::NotFound("scene"))
}

/// Every demonstration for full-rights callers; a signed-in user's own otherwise.
async fn demonstrations_jsonl(
    State(state): State<AppState>,
    viewer: Viewer,
) -> Result<Response, AppError> {
    let only_user = match &viewer {
        Viewer::Open | Viewer::Admin => None,
        Viewer::User { id, .. } => Some(*id),
        Viewer::Anonymous => return Err(AppError::NotSignedIn),
        Viewer::Token { .. } => {
            return Err(AppError::Forbidden(
                "demonstrations are exported by signed-in users or the admin",
            ));
        }
    };
    let body = store::demonstrations_jsonl(&state.db, only_user).await?;
    Ok((
        [
            (axum::http::header::CONTENT_TYPE, "application/x-ndjson"),
            (
                axum::http::header::CONTENT_DISPOSITION,
                "attachment; filename=\"spatial-demonstrations.jsonl\"",
            ),
        ],
        body,
    )
        .into_response())
}
