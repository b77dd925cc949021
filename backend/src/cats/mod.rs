//! `/api/cats/...`: a person plays the caretaker of the simulated cat, or plays the cat (behaviors
//! and sounds only) while the model is the caretaker. Sessions live in Postgres; a finished one
//! carries the rubric judge's verdict and reveals the need behind the behaviors.

pub(crate) mod store;

use std::sync::Arc;

use self::store::{CatStoreError, SessionOwner, StoredSession};
use crate::app::AppError;
use crate::app::AppState;
use crate::app::error::Body;
use crate::auth::Viewer;
use crate::auth::Writer;
use crate::envs::cat_caretaker::data::CatData;
use crate::envs::cat_caretaker::dialogue::{
    caretaker_messages, caretaker_turns, cat_reply, is_final, opening, rubric_verdict,
};
use crate::policy::{EmbeddedPolicy, Policy, PolicyRequest};
use axum::extract::{Path, State};
use axum::routing::{get, post};
use axum::{Json, Router};
use lachesis_shared::cats::{CatBehavior, CatMove, CatRole, CatSession, CatTurn, NewCatSession};

/// Caretaker turns before the judge decides.
pub const MAX_TURNS: usize = 5;
const MAX_TEXT_CHARS: usize = 1_000;
const MAX_SOUND_CHARS: usize = 80;
const MAX_BEHAVIORS_PER_TURN: usize = 6;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/cats/behaviors", get(behaviors))
        .route("/api/cats/sessions", post(create))
        .route("/api/cats/sessions/{id}", get(one))
        .route("/api/cats/sessions/{id}/turns", post(turn))
}

fn data() -> Result<&'static CatData, AppError> {
    CatData::builtin().map_err(|e| AppError::Internal(e.to_string()))
}

async fn behaviors() -> Result<Json<Vec<CatBehavior>>, AppError> {
    Ok(Json(data()?.behaviors.clone()))
}

/// The session's owner columns for this caller; `None` for full rights (sees every session).
fn owner(viewer: &Viewer) -> Result<Option<SessionOwner>, AppError> {
    match viewer {
        Viewer::Open | Viewer::Admin => Ok(None),
        Viewer::User { id, .. } => Ok(Some(SessionOwner {
            user: Some(*id),
            team: None,
        })),
        Viewer::Token { team_id, .. } => Ok(Some(SessionOwner {
            user: None,
            team: Some(*team_id),
        })),
        Viewer::Anonymous => Err(AppError::NotSignedIn),
    }
}

impl From<CatStoreError> for AppError {
    fn from(error: CatStoreError) -> Self {
        match error {
            CatStoreError::Database(e) => AppError::Database(e),
            other => AppError::Internal(other.to_string()),
        }
    }
}

fn view(session: &StoredSession) -> Result<CatSession, AppError> {
    let task = data()?.task(session.seed);
    // The person playing the cat acts out the need; a caretaker learns it at the end.
    let reveal = session.role == CatRole::Cat || session.verdict.is_some();
    Ok(CatSession {
        id: session.id.to_string(),
        role: session.role,
        turns: session.turns.clone(),
        max_turns: MAX_TURNS,
        scenario: reveal.then_some(task.scenario),
        verdict: session.verdict.clone(),
    })
}

async fn load(state: &AppState, viewer: &Viewer, id: &str) -> Result<StoredSession, AppError> {
    let id: i64 = id.parse().map_err(|_| AppError::NotFound("session"))?;
    store::session(&state.db, id, owner(viewer)?)
        .await?
        .ok_or(AppError::NotFound("session"))
}

/// The model that plays the caretaker for a person playing the cat.
fn caretaker_model(state: &AppState) -> Result<Arc<dyn Policy>, AppError> {
    let engine = state.engine.clone().ok_or_else(|| {
        AppError::Invalid(
            "no model is loaded to play the caretaker; start the server with a model".into(),
        )
    })?;
    Ok(Arc::new(EmbeddedPolicy::new(engine)))
}

async fn model_turn(state: &AppState, turns: &[CatTurn]) -> Result<CatTurn, AppError> {
    let model = caretaker_model(state)?;
    let request = PolicyRequest {
        tools: Vec::new(),
        messages: caretaker_messages(data()?, turns),
        n: 1,
        max_tokens: 64,
        temperature: 0.7,
        top_p: 1.0,
        stop: vec!["\n\n".into()],
    };
    let text = model
        .complete(request)
        .await
        .map_err(|e| AppError::Internal(format!("the caretaker model failed: {e}")))?
        .pop()
        .map(|r| r.completion.trim().to_string())
        .unwrap_or_default();
    Ok(CatTurn::Caretaker { text })
}

async fn create(
    State(state): State<AppState>,
    Writer(viewer): Writer,
    Body(body): Body<NewCatSession>,
) -> Result<Json<CatSession>, AppError> {
    let owner = owner(&viewer)?.unwrap_or_default();
    // Postgres stores the seed as BIGINT: keep it in range.
    let seed = body.seed.unwrap_or_else(rand::random) & (i64::MAX as u64);
    let task = data()?.task(seed);
    let mut turns = vec![opening(&task)];
    if body.role == CatRole::Cat {
        // The person is the cat: the opening is theirs to play, the caretaker speaks when they do.
        turns.clear();
    }
    let id = store::create_session(&state.db, owner, body.role, seed, &turns).await?;
    view(&StoredSession {
        id,
        role: body.role,
        seed,
        turns,
        verdict: None,
    })
    .map(Json)
}

async fn one(
    State(state): State<AppState>,
    viewer: Viewer,
    Path(id): Path<String>,
) -> Result<Json<CatSession>, AppError> {
    view(&load(&state, &viewer, &id).await?).map(Json)
}

/// Checks the person's move against their role and the data.
fn check_move(role: CatRole, turn: &CatTurn) -> Result<(), AppError> {
    match (role, turn) {
        (CatRole::Caretaker, CatTurn::Caretaker { text }) => {
            if text.trim().is_empty() || text.chars().count() > MAX_TEXT_CHARS {
                return Err(AppError::Invalid(format!(
                    "say something, in at most {MAX_TEXT_CHARS} characters"
                )));
            }
            Ok(())
        }
        (CatRole::Cat, CatTurn::Cat { behaviors, sound }) => {
            if behaviors.is_empty() && sound.as_deref().is_none_or(|s| s.trim().is_empty()) {
                return Err(AppError::Invalid(
                    "a cat shows at least one behavior or makes a sound".into(),
                ));
            }
            if behaviors.len() > MAX_BEHAVIORS_PER_TURN {
                return Err(AppError::Invalid(format!(
                    "at most {MAX_BEHAVIORS_PER_TURN} behaviors at a time"
                )));
            }
            let data = data()?;
            if let Some(unknown) = behaviors.iter().find(|b| data.behavior(b).is_none()) {
                let shown: String = unknown.chars().take(60).collect();
                return Err(AppError::Invalid(format!("no such behavior: {shown:?}")));
            }
            if sound
                .as_ref()
                .is_some_and(|s| s.chars().count() > MAX_SOUND_CHARS)
            {
                return Err(AppError::Invalid(format!(
                    "a sound is at most {MAX_SOUND_CHARS} characters"
                )));
            }
            Ok(())
        }
        (CatRole::Caretaker, CatTurn::Cat { .. }) => Err(AppError::Invalid(
            "you play the caretaker: send a caretaker turn".into(),
        )),
        (CatRole::Cat, CatTurn::Caretaker { .. }) => Err(AppError::Invalid(
            "you play the cat: send behaviors and sounds".into(),
        )),
    }
}

async fn turn(
    State(state): State<AppState>,
    Writer(viewer): Writer,
    Path(id): Path<String>,
    Body(body): Body<CatMove>,
) -> Result<Json<CatSession>, AppError> {
    let mut session = load(&state, &viewer, &id).await?;
    if session.verdict.is_some() {
        return Err(AppError::Conflict("the session is over".into()));
    }
    check_move(session.role, &body.turn)?;
    let task = data()?.task(session.seed);
    let before = session.turns.len();
    session.turns.push(body.turn.clone());
    let finished = match session.role {
        CatRole::Caretaker => {
            let CatTurn::Caretaker { text } = &body.turn else {
                unreachable!("checked above")
            };
            let done = body.finish || is_final(text);
            let reply = cat_reply(&task, &session.turns);
            session.turns.push(reply);
            done || caretaker_turns(&session.turns) >= MAX_TURNS
        }
        CatRole::Cat => {
            let reply = model_turn(&state, &session.turns).await?;
            let done = matches!(&reply, CatTurn::Caretaker { text } if is_final(text));
            session.turns.push(reply);
            body.finish || done || caretaker_turns(&session.turns) >= MAX_TURNS
        }
    };
    if finished {
        session.verdict = Some(rubric_verdict(&task, &session.turns));
    }
    // Only if nobody else moved meanwhile (two tabs on one session): the turn count is the guard.
    if !store::save_turns(&state.db, &session, before).await? {
        return Err(AppError::Conflict(
            "the session moved on meanwhile; reload it".into(),
        ));
    }
    view(&session).map(Json)
}
