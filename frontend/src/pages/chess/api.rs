//! The chess routes of the HTTP API, over the app's request helpers (CSRF, errors, 401 hook).

use gloo_net::http::Request;
use lachesis_shared::chess::{AgentInfo, GameSummary, GameView, NewGame, PlayMove, RateMove, Side};

use crate::api::{self, ApiError, ApiResult, encode};

fn game_path(id: &str) -> String {
    format!("/api/chess/games/{}", encode(id))
}

pub async fn games() -> ApiResult<Vec<GameSummary>> {
    api::get("/api/chess/games").await
}

pub async fn game(id: &str) -> ApiResult<GameView> {
    api::get(&game_path(id)).await
}

pub async fn agent() -> ApiResult<AgentInfo> {
    api::get("/api/chess/agent").await
}

pub async fn new_game(agent_side: Side) -> ApiResult<GameView> {
    let body = NewGame {
        agent_side: Some(agent_side),
    };
    api::post("/api/chess/games", &body).await
}

/// The HTTP fallback for a move, used when the socket is not open.
pub async fn play(id: &str, uci: &str) -> ApiResult<GameView> {
    let body = PlayMove { uci: uci.into() };
    api::post(&format!("{}/moves", game_path(id)), &body).await
}

/// Opens the game to spectators, or closes it.
pub async fn set_public(id: &str, public: bool) -> ApiResult<()> {
    api::put_visibility(&format!("{}/visibility", game_path(id)), public).await
}

/// The games open to spectators, anyone's, newest first.
pub async fn public_games() -> ApiResult<Vec<GameSummary>> {
    api::get("/api/chess/games?public=true").await
}

pub async fn rate(id: &str, ply: u32, rating: u8) -> ApiResult<GameView> {
    let body = RateMove { ply, rating };
    api::post(&format!("{}/ratings", game_path(id)), &body).await
}

pub async fn resign(id: &str) -> ApiResult<GameView> {
    let path = format!("{}/resign", game_path(id));
    let request = api::with_csrf(Request::post(&path))
        .header("Accept", "application/json")
        .build()
        .map_err(|e| ApiError::Network(e.to_string()))?;
    api::decode(api::send(request, &path).await?, &path).await
}

/// The address the browser downloads the PGN from.
pub fn pgn_url(id: &str) -> String {
    format!("{}/pgn", game_path(id))
}

pub async fn pgn(id: &str) -> ApiResult<String> {
    let path = pgn_url(id);
    let request = Request::get(&path)
        .build()
        .map_err(|e| ApiError::Network(e.to_string()))?;
    let response = api::send(request, &path).await?;
    response
        .text()
        .await
        .map_err(|e| ApiError::Network(format!("{path}: unexpected answer ({e})")))
}
