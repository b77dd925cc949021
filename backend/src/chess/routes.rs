//! `/api/chess/...`: games, moves, resignation, PGN export, ratings and the agent's state. The
//! socket's `chess_move` ([`socket_move`]) plays through the same service.

use axum::extract::Query;
use axum::extract::{Path, State};
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use axum::{Json, Router};
use lachesis_shared::chess::rules;
use lachesis_shared::chess::{
    AgentInfo, GameSummary, GameView, MoveRecord, NewGame, PlayMove, RateMove, Side, eval_text,
};
use lachesis_shared::live::{LiveErrorCode, ServerMsg};

use super::{game_id, store};
use crate::app::AppError;
use crate::app::AppState;
use crate::app::error::Body;
use crate::auth::Viewer;
use crate::auth::Writer;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/chess/games", get(list).post(create))
        .route("/api/chess/games/{id}", get(one))
        .route("/api/chess/games/{id}/moves", post(play))
        .route("/api/chess/games/{id}/resign", post(resign))
        .route("/api/chess/games/{id}/pgn", get(pgn))
        .route("/api/chess/games/{id}/ratings", post(rate))
        .route("/api/chess/games/{id}/visibility", put(visibility))
        .route("/api/chess/agent", get(agent))
}

/// How the chess room's storage failures reach a caller.
impl From<store::StoreError> for AppError {
    fn from(err: store::StoreError) -> Self {
        match err {
            store::StoreError::Database(e) => AppError::Database(e),
            store::StoreError::MoveTaken | store::StoreError::AlreadyEnded => {
                AppError::Conflict(err.to_string())
            }
            store::StoreError::Unreadable(_) => AppError::Internal(err.to_string()),
        }
    }
}

#[derive(serde::Deserialize)]
struct ListQuery {
    /// Only games open to spectators, anyone's: readable without an account.
    #[serde(default)]
    public: bool,
}

/// Public games shown to spectators at once.
const PUBLIC_LISTED: i64 = 50;

async fn list(
    State(state): State<AppState>,
    viewer: Viewer,
    Query(query): Query<ListQuery>,
) -> Result<Json<Vec<GameSummary>>, AppError> {
    if query.public {
        let games = store::list_games(&state.db, true, None, None, true, PUBLIC_LISTED).await?;
        return Ok(Json(games));
    }
    let (all, user, team) = match &viewer {
        Viewer::Open | Viewer::Admin => (true, None, None),
        Viewer::User { id, .. } => (false, Some(*id), None),
        Viewer::Token { team_id, .. } => (false, None, Some(*team_id)),
        Viewer::Anonymous => return Err(AppError::NotSignedIn),
    };
    Ok(Json(
        store::list_games(&state.db, all, user, team, false, 100).await?,
    ))
}

async fn create(
    State(state): State<AppState>,
    Writer(viewer): Writer,
    Body(body): Body<NewGame>,
) -> Result<Json<GameView>, AppError> {
    let side = body.agent_side.unwrap_or(Side::Black);
    Ok(Json(super::new_game(&state, &viewer, side).await?))
}

async fn one(
    State(state): State<AppState>,
    viewer: Viewer,
    Path(id): Path<String>,
) -> Result<Json<GameView>, AppError> {
    Ok(Json(super::load(&state, &viewer, game_id(&id)?).await?))
}

async fn play(
    State(state): State<AppState>,
    Writer(viewer): Writer,
    Path(id): Path<String>,
    Body(body): Body<PlayMove>,
) -> Result<Json<GameView>, AppError> {
    Ok(Json(
        super::play_move(&state, &viewer, game_id(&id)?, &body.uci).await?,
    ))
}

async fn resign(
    State(state): State<AppState>,
    Writer(viewer): Writer,
    Path(id): Path<String>,
) -> Result<Json<GameView>, AppError> {
    Ok(Json(super::resign(&state, &viewer, game_id(&id)?).await?))
}

async fn pgn(
    State(state): State<AppState>,
    viewer: Viewer,
    Path(id): Path<String>,
) -> Result<Response, AppError> {
    let game = super::load(&state, &viewer, game_id(&id)?).await?;
    let (white, black) = match game.agent_side {
        Side::White => ("DeepSacrifice agent", "Player"),
        Side::Black => ("Player", "DeepSacrifice agent"),
    };
    let date = game
        .created_at
        .get(..10)
        .unwrap_or("????-??-??")
        .replace('-', ".");
    let tags = [
        ("Event", "DeepSacrifice".to_string()),
        ("Site", "Lachesis".to_string()),
        ("Date", date),
        ("Round", game.id.clone()),
        ("White", white.to_string()),
        ("Black", black.to_string()),
    ];
    let sans: Vec<String> = game.moves.iter().map(annotated).collect();
    let result = game.outcome.as_ref().map_or("*", |o| o.result.as_str());
    let text = rules::pgn(&tags, &game.start_fen, &sans, result);
    let disposition = format!("attachment; filename=\"deepsacrifice-{}.pgn\"", game.id);
    let mut response = text.into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/x-chess-pgn; charset=utf-8"),
    );
    if let Ok(value) = HeaderValue::from_str(&disposition) {
        headers.insert(header::CONTENT_DISPOSITION, value);
    }
    Ok(response)
}

async fn rate(
    State(state): State<AppState>,
    Writer(viewer): Writer,
    Path(id): Path<String>,
    Body(body): Body<RateMove>,
) -> Result<Json<GameView>, AppError> {
    let id = game_id(&id)?;
    if !(1..=5).contains(&body.rating) {
        return Err(AppError::Invalid("a rating is 1 to 5".into()));
    }
    let game = super::load_own(&state, &viewer, id).await?;
    if game.outcome.is_none() {
        return Err(AppError::Conflict(
            "rate moves once the game is over".into(),
        ));
    }
    if !store::rate(&state.db, id, body.ply, body.rating).await? {
        return Err(AppError::Invalid(format!(
            "ply {} is not an agent move of this game",
            body.ply
        )));
    }
    Ok(Json(super::load(&state, &viewer, id).await?))
}

async fn visibility(
    State(state): State<AppState>,
    Writer(viewer): Writer,
    Path(id): Path<String>,
    Body(body): Body<lachesis_shared::accounts::Visibility>,
) -> Result<Json<GameView>, AppError> {
    let id = game_id(&id)?;
    Ok(Json(
        super::set_public(&state, &viewer, id, body.public).await?,
    ))
}

async fn agent(State(state): State<AppState>) -> Result<Json<AgentInfo>, AppError> {
    Ok(Json(super::agent_info(&state).await?))
}

/// A `chess_move` frame from the live socket: played like the HTTP route; the moves reach the
/// client on the game's topic, and a refusal comes back as an error frame.
pub async fn socket_move(
    state: &AppState,
    viewer: &Viewer,
    game: &str,
    uci: &str,
) -> Option<ServerMsg> {
    let result = match game_id(game) {
        Ok(id) => super::play_move(state, viewer, id, uci).await,
        Err(e) => Err(e),
    };
    match result {
        Ok(_) => None,
        Err(AppError::NotFound(_)) => Some(ServerMsg::Error {
            code: LiveErrorCode::NotFound,
            message: "no such game".into(),
        }),
        Err(e @ (AppError::Database(_) | AppError::Internal(_))) => {
            tracing::error!(error = %e, "chess move over the socket failed");
            Some(ServerMsg::Error {
                code: LiveErrorCode::Rejected,
                message: "the server could not play this move; try again".into(),
            })
        }
        Err(e) => Some(ServerMsg::Error {
            code: LiveErrorCode::Rejected,
            message: e.to_string(),
        }),
    }
}

/// A move as PGN carries it after review: SAN, the mark's numeric glyph, and a comment holding
/// the evaluation after the move in lichess's `[%eval ...]` form (White's view, pawns or `#n`)
/// and the judge's reasons.
fn annotated(record: &MoveRecord) -> String {
    let Some(reward) = &record.reward else {
        return record.san.clone();
    };
    let mut out = record.san.clone();
    if let Some(mark) = reward.mark {
        out.push_str(&format!(" ${}", mark.nag()));
    }
    // The side to move after the move is the mover's opponent.
    let mover_is_white = record.fen_after.split(' ').nth(1) == Some("b");
    let mut comment = Vec::new();
    if let Some(engine) = &reward.engine {
        let white_cp = if mover_is_white {
            engine.played_cp
        } else {
            -engine.played_cp
        };
        // `[%eval]` takes pawns to two places, or `#n` / `#-n` (negative: Black mates).
        comment.push(format!("[%eval {}]", eval_text(white_cp, 2, false)));
    }
    // Braces end a PGN comment early.
    comment.push(reward.justification.replace(['{', '}'], ""));
    out.push_str(&format!(" {{ {} }}", comment.join(" ")));
    out
}
