//! Spatial reasoning in the browser: tasks to solve, people's attempts judged by the same scorer
//! as the model's and kept as demonstrations (exported as JSONL), and the live scene the
//! in-process `spatial` environment streams ([`stream`]).
//!
//! Access: reading tasks and scenes needs no more than any other page (with accounts on, a
//! signed-in user or a token); submitting an attempt changes state, so it takes a signed-in
//! caller and, for cookie sessions, the CSRF header.

pub mod cli;
mod store;
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

pub use stream::SceneStreamer;

/// The scene the in-process environment shows its attempts on.
pub const LIVE_SCENE: &str = "live";
/// The showcase's pause between two attempts.
const SHOWCASE_PAUSE: std::time::Duration = std::time::Duration::from_secs(2);

/// Keeps the model attempting tasks on the live scene until shutdown, so that a new user watching
/// `/spatial` sees attempts before any trainer is attached (the environment's runner only
/// collects groups once a trainer has registered). One completion at a time, with a pause, so a
/// trainer's rollouts are slowed little when one is attached. A failed attempt (the model busy
/// with a trainer's rollouts, the database away) ends it: its supervisor starts it again after a
/// pause that grows while the failures go on.
pub async fn showcase(
    env: std::sync::Arc<crate::envs::spatial::SpatialEnv>,
    policy: std::sync::Arc<dyn crate::policy::Policy>,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
) -> anyhow::Result<()> {
    loop {
        tokio::select! {
            result = env.show_one(policy.as_ref()) => {
                let score = result
                    .map_err(|e| anyhow::anyhow!("spatial showcase attempt failed: {e}"))?;
                tracing::debug!(score, "spatial showcase attempt");
            }
            _ = shutdown.wait_for(|stop| *stop) => return Ok(()),
        }
        tokio::select! {
            _ = tokio::time::sleep(SHOWCASE_PAUSE) => {}
            _ = shutdown.wait_for(|stop| *stop) => return Ok(()),
        }
    }
}

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
