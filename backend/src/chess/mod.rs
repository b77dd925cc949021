//! DeepSacrifice: people play chess against the aggressive agent (`lachesis_chess`), server
//! authoritative. Every move is checked here with the shared rules; the agent answers in the same
//! request; a finished game is judged move by move ([`review`]) and the agent learns from judged
//! games (with the people's ratings, when they count) as the next game starts.

pub mod cli;
pub mod lanes;
pub mod oracle_config;
pub mod ratings;
mod review;
pub mod routes;
pub mod signals;
mod store;

use std::sync::Arc;

use lachesis_chess::agent::{self, PolicyParams};
use lachesis_shared::chess::rules::{self, RuleError};
use lachesis_shared::chess::{
    ChessGameEvent, ChessMoveEvent, GameEnd, GameOutcome, GameView, MoveRecord, Side,
};
use lachesis_shared::live::{LiveEvent, Topic};
use rand::SeedableRng;
use rand::rngs::StdRng;

use crate::app::AppError;
use crate::app::AppState;
use crate::auth::Viewer;
use crate::policy::Policy;
pub use review::{learn_pending, release_claims, resume_reviews, spawn_sweep};
use store::GameRow;

/// Who judges finished games.
#[derive(Clone, Default)]
pub enum ChessJudge {
    /// The engine judge: no model needed, always available.
    #[default]
    Engine,
    /// An LLM (the embedded model or an OpenAI-compatible server), with the engine judge standing
    /// in for any answer that does not parse.
    Llm(Arc<dyn Policy>),
}

#[derive(Clone)]
pub struct ChessSettings {
    pub judge: ChessJudge,
    /// Stockfish processes that decide soundness and annotations; without them the shallow
    /// search does (and no annotations are given).
    pub stockfish: Option<Arc<lachesis_chess::stockfish::EnginePool>>,
    /// People's ratings blend into the reward the agent learns from.
    pub uses_ratings: bool,
    /// The agent's searches running at once, server-wide (`--chess-searches`): each takes a core
    /// for a while, so more games than this wait their turn briefly, then hear "busy".
    pub searches: Arc<tokio::sync::Semaphore>,
    /// Finished games' reviews, queued per owner (`--chess-reviews-per-owner`).
    pub reviews: Arc<lanes::ReviewLanes>,
}

impl Default for ChessSettings {
    fn default() -> Self {
        Self {
            judge: ChessJudge::default(),
            stockfish: None,
            uses_ratings: true,
            searches: Arc::new(tokio::sync::Semaphore::new(DEFAULT_SEARCHES)),
            reviews: Arc::default(),
        }
    }
}

/// A review's claim on its game when no flag says otherwise: judging one move takes two
/// Stockfish searches, or one answer of the LLM judge, well under this even on a busy machine.
pub const DEFAULT_REVIEW_CLAIM: std::time::Duration = std::time::Duration::from_secs(300);
/// How often a server looks for reviews nobody is doing, when no flag says otherwise.
pub const DEFAULT_REVIEW_SWEEP: std::time::Duration = std::time::Duration::from_secs(60);

/// Concurrent searches when no flag says otherwise.
pub const DEFAULT_SEARCHES: usize = 4;
/// How long a move waits for a search slot before it is refused (nothing of it stored).
const SEARCH_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// A slot for one of the agent's searches, or `Busy` when all stayed taken for [`SEARCH_WAIT`].
async fn search_slot(state: &AppState) -> Result<tokio::sync::OwnedSemaphorePermit, AppError> {
    let searches = state.chess.searches.clone();
    match tokio::time::timeout(SEARCH_WAIT, searches.acquire_owned()).await {
        Ok(Ok(permit)) => Ok(permit),
        _ => Err(AppError::Busy {
            what: "the chess agent",
            retry_after_s: 2,
        }),
    }
}

impl ChessSettings {
    pub fn judge_name(&self) -> String {
        match &self.judge {
            ChessJudge::Engine if self.stockfish.is_some() => {
                lachesis_chess::oracle::STOCKFISH_JUDGE.into()
            }
            ChessJudge::Engine => lachesis_chess::judge::ENGINE_JUDGE.into(),
            ChessJudge::Llm(policy) => policy.name(),
        }
    }
}

fn topic(game: i64) -> Topic {
    Topic::Game {
        game: game.to_string(),
    }
}

/// Parses a game id from a path or a topic; unknown and malformed ids answer the same.
pub fn game_id(text: &str) -> Result<i64, AppError> {
    text.parse::<i64>()
        .ok()
        .filter(|id| *id > 0)
        .ok_or(AppError::NotFound("game"))
}

/// The owner columns a new game gets from its creator.
fn owner_of(viewer: &Viewer) -> Result<(Option<i64>, Option<i64>), AppError> {
    match viewer {
        Viewer::Open | Viewer::Admin => Ok((None, None)),
        Viewer::User { id, .. } => Ok((Some(*id), None)),
        Viewer::Token {
            read_only: true, ..
        } => Err(AppError::Forbidden("this token is read-only")),
        Viewer::Token { team_id, .. } => Ok((None, Some(*team_id))),
        Viewer::Anonymous => Err(AppError::NotSignedIn),
    }
}

fn may_access(viewer: &Viewer, game: &GameRow) -> bool {
    match viewer {
        Viewer::Open | Viewer::Admin => true,
        Viewer::User { id, .. } => game.owner_user == Some(*id),
        Viewer::Token { team_id, .. } => game.owner_team == Some(*team_id),
        Viewer::Anonymous => false,
    }
}

/// Whether `viewer` may watch the game's topic.
pub async fn can_watch(viewer: &Viewer, state: &AppState, game: &str) -> Result<bool, sqlx::Error> {
    let Ok(id) = game_id(game) else {
        return Ok(false);
    };
    let mut conn = state.db.acquire().await?;
    match store::game(&mut conn, id, false).await {
        Ok(Some(row)) => Ok(row.public || may_access(viewer, &row)),
        Ok(None) => Ok(false),
        Err(store::StoreError::Database(e)) => Err(e),
        Err(_) => Ok(false),
    }
}

/// The game with its moves, if `viewer` may see it: its owner, or anyone once it is public
/// (`yours` says which).
pub async fn load(state: &AppState, viewer: &Viewer, id: i64) -> Result<GameView, AppError> {
    let mut conn = state.db.acquire().await?;
    let game = store::game(&mut conn, id, false)
        .await?
        .filter(|g| g.public || may_access(viewer, g))
        .ok_or(AppError::NotFound("game"))?;
    let moves = store::moves(&mut conn, id).await?;
    let mut view = store::view(&game, &moves);
    view.yours = may_access(viewer, &game);
    Ok(view)
}

/// The game, when `viewer` owns it; a spectator of a public game is refused.
pub async fn load_own(state: &AppState, viewer: &Viewer, id: i64) -> Result<GameView, AppError> {
    let game = load(state, viewer, id).await?;
    if !game.yours {
        return Err(AppError::Forbidden(
            "spectators watch; the game's owner acts",
        ));
    }
    Ok(game)
}

/// Opens the owner's game to spectators, or closes it.
pub async fn set_public(
    state: &AppState,
    viewer: &Viewer,
    id: i64,
    public: bool,
) -> Result<GameView, AppError> {
    load_own(state, viewer, id).await?;
    store::set_public(&state.db, id, public).await?;
    load(state, viewer, id).await
}

/// Starts a game with the newest policy (learning first from games judged since the last
/// update); when the agent has white it opens at once.
pub async fn new_game(
    state: &AppState,
    viewer: &Viewer,
    agent_side: Side,
) -> Result<GameView, AppError> {
    let (owner_user, owner_team) = owner_of(viewer)?;
    learn_pending(state).await?;
    let mut tx = state.db.begin().await?;
    let (params, _) = store::latest_policy(&mut tx).await?;
    let id = store::insert_game(
        &mut tx,
        owner_user,
        owner_team,
        agent_side,
        rules::START_FEN,
        params.version,
    )
    .await?;
    tx.commit().await?;
    let mut published = Vec::new();
    if agent_side == Side::White {
        let _slot = search_slot(state).await?;
        published.extend(agent_turn(state, id, 0, &params).await?);
    }
    finish_turn(state, id, published).await
}

/// Plays the person's move, then the agent's answer; ends and reviews the game when it is over.
/// The agent searches with no row lock and no connection held: the person's move is committed
/// first, and the answer is stored only if the game is still where the search left it.
pub async fn play_move(
    state: &AppState,
    viewer: &Viewer,
    id: i64,
    uci: &str,
) -> Result<GameView, AppError> {
    // Taken before anything is stored: a busy agent refuses the move whole.
    let _slot = search_slot(state).await?;
    let mut tx = state.db.begin().await?;
    let game = store::game(&mut tx, id, true)
        .await?
        .filter(|g| may_access(viewer, g))
        .ok_or(AppError::NotFound("game"))?;
    if matches!(
        viewer,
        Viewer::Token {
            read_only: true,
            ..
        }
    ) {
        return Err(AppError::Forbidden("this token is read-only"));
    }
    if game.outcome.is_some() {
        return Err(AppError::Conflict("the game is over".into()));
    }
    let pos = rules::parse_fen(&game.fen).map_err(|e| AppError::Internal(e.to_string()))?;
    if rules::side_of(shakmaty_turn(&pos)) == game.agent_side {
        return Err(AppError::Conflict("it is the agent's move".into()));
    }
    let played = rules::play_uci(&game.fen, uci, game.plies as usize).map_err(rule_error)?;
    let record = MoveRecord {
        ply: game.plies,
        uci: played.uci.clone(),
        san: played.san.clone(),
        fen_after: played.fen.clone(),
        by_agent: false,
        reward: None,
        rating: None,
    };
    store::insert_move(&mut tx, id, &record, None).await?;
    let mut published = vec![(record, played.outcome.clone())];
    let params = match &played.outcome {
        Some(outcome) => {
            store::end_game(&mut tx, id, outcome).await?;
            None
        }
        None => Some(store::policy(&mut tx, game.policy_version).await?),
    };
    tx.commit().await?;
    if let Some(params) = params {
        published.extend(agent_turn(state, id, game.plies + 1, &params).await?);
    }
    finish_turn(state, id, published).await
}

/// The person resigns: the agent wins, and the game's review starts.
pub async fn resign(state: &AppState, viewer: &Viewer, id: i64) -> Result<GameView, AppError> {
    let mut tx = state.db.begin().await?;
    let game = store::game(&mut tx, id, true)
        .await?
        .filter(|g| may_access(viewer, g))
        .ok_or(AppError::NotFound("game"))?;
    if game.outcome.is_some() {
        return Err(AppError::Conflict("the game is over".into()));
    }
    let outcome = GameOutcome::new(GameEnd::Resignation, Some(game.agent_side));
    store::end_game(&mut tx, id, &outcome).await?;
    tx.commit().await?;
    finish_turn(state, id, Vec::new()).await
}

fn shakmaty_turn(pos: &lachesis_chess::shakmaty::Chess) -> lachesis_chess::shakmaty::Color {
    use lachesis_chess::shakmaty::Position;
    pos.turn()
}

fn rule_error(e: RuleError) -> AppError {
    match e {
        RuleError::GameOver => AppError::Conflict(e.to_string()),
        _ => AppError::Invalid(e.to_string()),
    }
}

/// The agent's move at ply `ply`, searched with nothing locked, then stored with its learning
/// gradient if the game is still at that ply and live (`None` when it moved on meanwhile: a
/// resignation, or another request that answered first).
async fn agent_turn(
    state: &AppState,
    id: i64,
    ply: u32,
    params: &PolicyParams,
) -> Result<Option<(MoveRecord, Option<GameOutcome>)>, AppError> {
    let fen = {
        let mut conn = state.db.acquire().await?;
        let game = store::game(&mut conn, id, false)
            .await?
            .ok_or(AppError::NotFound("game"))?;
        if game.plies != ply || game.outcome.is_some() {
            return Ok(None);
        }
        game.fen
    };
    let search_pos = rules::parse_fen(&fen).map_err(|e| AppError::Internal(e.to_string()))?;
    let search_params = params.clone();
    // The search is CPU work: keep it off the async workers.
    let decision = tokio::task::spawn_blocking(move || {
        let mut rng = StdRng::seed_from_u64(rand::random());
        agent::choose(&search_params, &search_pos, &mut rng)
    })
    .await
    .map_err(|e| AppError::Internal(format!("agent search: {e}")))?
    .ok_or(AppError::Internal(
        "the agent has no move in a live game".into(),
    ))?;
    let uci = rules::uci_of(decision.chosen);
    let played = rules::play_uci(&fen, &uci, ply as usize)
        .map_err(|e| AppError::Internal(format!("the agent chose an illegal move: {e}")))?;
    let mut tx = state.db.begin().await?;
    let game = store::game(&mut tx, id, true)
        .await?
        .ok_or(AppError::NotFound("game"))?;
    if game.plies != ply || game.outcome.is_some() || game.fen != fen {
        return Ok(None);
    }
    let record = MoveRecord {
        ply,
        uci,
        san: played.san,
        fen_after: played.fen,
        by_agent: true,
        reward: None,
        rating: None,
    };
    store::insert_move(&mut tx, id, &record, Some(&decision.log_prob_gradient)).await?;
    if let Some(outcome) = &played.outcome {
        store::end_game(&mut tx, id, outcome).await?;
    }
    tx.commit().await?;
    Ok(Some((record, played.outcome)))
}

/// After a committed turn: tell watchers, start the review of a game that just ended, and answer
/// with the game as it stands. The review runs after the answer ([`review::spawn`]): with the LLM
/// judge or a busy engine pool it takes minutes, longer than a person (or a proxy) waits for a
/// move or a resignation to be acknowledged; the game's watchers hear when it is done.
async fn finish_turn(
    state: &AppState,
    id: i64,
    published: Vec<(MoveRecord, Option<GameOutcome>)>,
) -> Result<GameView, AppError> {
    for (record, outcome) in published {
        let event = LiveEvent::ChessMove(Box::new(ChessMoveEvent {
            game: id.to_string(),
            record,
            outcome,
        }));
        crate::live::bridge::publish(&state.db, &topic(id), &event).await?;
    }
    let mut conn = state.db.acquire().await?;
    let game = store::game(&mut conn, id, false)
        .await?
        .ok_or(AppError::NotFound("game"))?;
    let moves = store::moves(&mut conn, id).await?;
    drop(conn);
    if game.outcome.is_some() && game.game_return.is_none() {
        publish_game(state, &game, false).await?;
        review::spawn(state, id);
    }
    // Only the game's owner plays a turn, and this answers them.
    let mut view = store::view(&game, &moves);
    view.yours = true;
    Ok(view)
}

async fn publish_game(state: &AppState, game: &GameRow, reviewed: bool) -> Result<(), AppError> {
    let event = LiveEvent::ChessGame(ChessGameEvent {
        game: game.id.to_string(),
        plies: game.plies,
        outcome: game.outcome.clone(),
        reviewed,
    });
    crate::live::bridge::publish(&state.db, &topic(game.id), &event).await?;
    Ok(())
}

/// `GET /api/chess/agent`, with the latest recorded ratings of the current version and of
/// version 0.
pub async fn agent_info(state: &AppState) -> Result<lachesis_shared::chess::AgentInfo, AppError> {
    let mut conn = state.db.acquire().await?;
    let (params, learned) = store::latest_policy(&mut conn).await?;
    let rating = ratings::latest(&mut conn, params.version).await?;
    let baseline_rating = match params.version {
        0 => rating.clone(),
        _ => ratings::latest(&mut conn, 0).await?,
    };
    Ok(lachesis_shared::chess::AgentInfo {
        version: params.version,
        weights: params
            .named_weights()
            .into_iter()
            .map(|(name, weight)| lachesis_shared::chess::FeatureWeight {
                name: name.into(),
                weight,
            })
            .collect(),
        depth: params.depth,
        temperature: params.temperature,
        games_learned: learned,
        judge: state.chess.judge_name(),
        uses_ratings: state.chess.uses_ratings,
        rating,
        baseline_rating,
    })
}
