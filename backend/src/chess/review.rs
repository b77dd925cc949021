//! After a game: the reward model judges each agent move, and later the policy learns from the
//! judged games (REINFORCE on its feature weights, `lachesis_chess::learn`).

use std::time::{Duration, Instant};

use lachesis_chess::judge::{self, JUDGE_DEPTH};
use lachesis_chess::learn::{self, Credit, LearnSettings};
use lachesis_chess::oracle::{self, OracleSettings};
use lachesis_chess::shakmaty::Chess;
use lachesis_chess::{features::FEATURE_COUNT, selfplay};
use lachesis_inference::ChatMessage;
use lachesis_shared::chess::rules;
use lachesis_shared::chess::{GameOutcome, MoveReward, Side};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::ChessJudge;
use super::store::{self, GameRow};
use crate::app::AppError;
use crate::app::AppState;
use crate::policy::PolicyRequest;

/// How much the result (+1 win, −1 loss) adds to a game's return beside its move rewards.
const RESULT_IN_RETURN: f64 = 1.0;

/// Attempts at one review before it is left for the next sweep ([`spawn_sweep`]).
const REVIEW_ATTEMPTS: u32 = 3;

/// Reviews game `id` in the background, then tells its watchers (the `ChessGame` event with
/// `reviewed`). A failure (the database or every engine unreachable) is retried after the
/// server's restart backoff; a review that gives up, or is cut off by its server stopping, is
/// taken up by a sweep. Nothing happens when the game's review is already queued here.
pub fn spawn(state: &AppState, id: i64) {
    let Some(queued) = state.chess.reviews.queue(id) else {
        return;
    };
    let state = state.clone();
    tokio::spawn(async move {
        let _queued = queued;
        for attempt in 1..=REVIEW_ATTEMPTS {
            match review_and_announce(&state, id).await {
                Ok(()) => return,
                Err(e) => tracing::warn!(game = id, attempt, error = %e, "a chess review failed"),
            }
            if attempt < REVIEW_ATTEMPTS {
                tokio::time::sleep(state.tasks.backoff().delay(attempt)).await;
            }
        }
        tracing::error!(
            game = id,
            "a chess review gave up; the next sweep tries it again"
        );
    });
}

/// Starts the review of every finished game left without one and not claimed by a review in
/// progress (a server that stopped while reviewing, a review that gave up). Returns how many
/// were started.
pub async fn resume_reviews(state: &AppState) -> Result<usize, AppError> {
    let mut conn = state.db.acquire().await?;
    let ids = store::unreviewed_games(&mut conn).await?;
    drop(conn);
    for &id in &ids {
        spawn(state, id);
    }
    Ok(ids.len())
}

/// Every `every` until `shutdown`, resumes the reviews nobody is doing (see [`resume_reviews`]),
/// supervised. The first sweep waits a period: the server's start has just resumed what was left.
pub fn spawn_sweep(
    state: &AppState,
    every: Duration,
    shutdown: watch::Receiver<bool>,
) -> JoinHandle<()> {
    let sweep = |state: AppState| async move {
        let games = resume_reviews(&state).await?;
        if games > 0 {
            tracing::info!(games, "chess reviews resumed by the sweep");
        }
        Ok(())
    };
    let tasks = &state.tasks;
    tasks.spawn_every("chess-review-sweep", every, shutdown, state.clone(), sweep)
}

/// Gives back every review claim this server holds, at a graceful stop: the reviews it cut off
/// are taken up by the next server to start, or by another's sweep, at once instead of after their
/// claims lapse. A review still running here can no longer store.
pub async fn release_claims(state: &AppState) -> Result<u64, AppError> {
    state.chess.reviews.close();
    let mut conn = state.db.acquire().await?;
    Ok(store::release_review_claims(&mut conn, state.chess.reviews.holder()).await?)
}

async fn review_and_announce(state: &AppState, id: i64) -> Result<(), AppError> {
    match review(state, id).await? {
        Some(game) => super::publish_game(state, &game, true).await,
        None => Ok(()),
    }
}

/// Judges every agent move of a finished game and stores the verdicts and the game's return;
/// returns the ended game as it was read (its moves and outcome no longer change). `None` when
/// there was nothing to do: the game is live, reviewed, or its review claimed by another (a
/// request that saw the same ending, another server).
async fn review(state: &AppState, id: i64) -> Result<Option<GameRow>, AppError> {
    let mut conn = state.db.acquire().await?;
    let Some(game) = store::game(&mut conn, id, false).await? else {
        return Err(AppError::NotFound("game"));
    };
    let Some(outcome) = game.outcome.clone() else {
        return Ok(None);
    };
    drop(conn);
    let _lane = state
        .chess
        .reviews
        .enter((game.owner_user, game.owner_team))
        .await;
    let lease = state.hosting.chess_review_claim;
    let holder = state.chess.reviews.holder();
    let mut conn = state.db.acquire().await?;
    // Claimed only once in the lane: a claim lapses while its review waits there. A stopping
    // server has given its claims back and takes no more.
    if state.chess.reviews.is_closed() || !store::claim_review(&mut conn, id, holder, lease).await?
    {
        return Ok(None);
    }
    drop(conn);
    let judged = judge_and_store(state, &game, &outcome).await;
    if judged.is_err() {
        // Let the retry, or another server, take it at once instead of after the claim lapses.
        if let Ok(mut conn) = state.db.acquire().await {
            let _ = store::release_review_claim(&mut conn, id, holder).await;
        }
    }
    Ok(judged?.then_some(game))
}

/// The review of a claimed game; `false` when the claim was lost before it was stored (given back
/// by a stop, or lapsed and taken by another review, which stores instead).
async fn judge_and_store(
    state: &AppState,
    game: &GameRow,
    outcome: &GameOutcome,
) -> Result<bool, AppError> {
    let id = game.id;
    let lease = state.hosting.chess_review_claim;
    let holder = state.chess.reviews.holder();
    let mut conn = state.db.acquire().await?;
    let moves = store::moves(&mut conn, id).await?;
    drop(conn);
    // The position before each agent move.
    let mut before = game.start_fen.clone();
    let mut to_judge = Vec::new();
    for stored in &moves {
        if stored.record.by_agent {
            to_judge.push((stored.record.ply, before.clone(), stored.record.uci.clone()));
        }
        before = stored.record.fen_after.clone();
    }
    let mut rewards = Vec::with_capacity(to_judge.len());
    let mut renewed = Instant::now();
    for (ply, fen, uci) in to_judge {
        let pos = rules::parse_fen(&fen).map_err(|e| AppError::Internal(e.to_string()))?;
        let m = rules::parse_uci(&pos, &uci).map_err(|e| AppError::Internal(e.to_string()))?;
        rewards.push((ply, judge_move(state, pos, m).await?));
        // A long review keeps its claim for as long as it makes progress. Renewed once a third
        // of it has passed, not at every move: most reviews end within seconds and write no
        // renewal at all.
        if renewed.elapsed() >= lease / 3 {
            let mut conn = state.db.acquire().await?;
            if !store::renew_review_claim(&mut conn, id, holder, lease).await? {
                return Ok(false);
            }
            renewed = Instant::now();
        }
    }
    let result = selfplay::result_for(outcome, game.agent_side);
    let game_return = rewards.iter().map(|(_, r)| r.total).sum::<f64>() + RESULT_IN_RETURN * result;
    let mut tx = state.db.begin().await?;
    let stored = store::store_review(&mut tx, id, holder, &rewards, game_return).await?;
    tx.commit().await?;
    Ok(stored)
}

async fn judge_move(
    state: &AppState,
    pos: Chess,
    m: lachesis_chess::shakmaty::Move,
) -> Result<MoveReward, AppError> {
    let engine = engine_judge(state, pos.clone(), m).await?;
    let ChessJudge::Llm(policy) = &state.chess.judge else {
        return Ok(engine);
    };
    let facts_pos = pos.clone();
    let facts = tokio::task::spawn_blocking(move || judge::facts(&facts_pos, m, JUDGE_DEPTH))
        .await
        .map_err(|e| AppError::Internal(format!("engine judge: {e}")))?;
    let (system, user) = judge::verdict_prompt(&pos, m, &facts, engine.engine.as_ref());
    let request = PolicyRequest {
        tools: Vec::new(),
        messages: vec![
            ChatMessage {
                role: "system".into(),
                content: system,
            },
            ChatMessage {
                role: "user".into(),
                content: user,
            },
        ],
        n: 1,
        max_tokens: 160,
        temperature: 0.0,
        top_p: 1.0,
        stop: Vec::new(),
    };
    let answer = match policy.complete(request).await {
        Ok(rollouts) => rollouts
            .into_iter()
            .next()
            .map(|r| r.completion)
            .unwrap_or_default(),
        Err(e) => {
            tracing::warn!(error = %e, "the LLM chess judge failed; the engine judge stands in");
            return Ok(MoveReward {
                justification: format!("{} (the LLM judge failed: {e})", engine.justification),
                ..engine
            });
        }
    };
    Ok(match judge::parse_verdict(&answer) {
        Ok(verdict) => verdict.into_reward(&engine, &policy.name()),
        Err(e) => MoveReward {
            justification: format!(
                "{} (the LLM judge's answer was unusable: {e})",
                engine.justification
            ),
            ..engine
        },
    })
}

/// Stockfish's verdict when the server has it, else (or when the engine fails twice) the
/// shallow-search judge's.
async fn engine_judge(
    state: &AppState,
    pos: Chess,
    m: lachesis_chess::shakmaty::Move,
) -> Result<MoveReward, AppError> {
    let stockfish = state.chess.stockfish.clone();
    tokio::task::spawn_blocking(move || {
        if let Some(pool) = stockfish {
            match oracle::assess(&pool, &pos, m) {
                Ok(assessment) => {
                    return oracle::verdict(&pos, m, &assessment, &OracleSettings::default());
                }
                Err(e) => {
                    tracing::warn!(error = %e, "Stockfish failed; the shallow-search judge stands in");
                }
            }
        }
        judge::engine_verdict(&pos, m, JUDGE_DEPTH)
    })
    .await
    .map_err(|e| AppError::Internal(format!("engine judge: {e}")))
}

/// Learns from every judged game not learned from yet, as one new policy version. Returns the
/// new version, if there was anything to learn from.
pub async fn learn_pending(state: &AppState) -> Result<Option<i64>, AppError> {
    let mut tx = state.db.begin().await?;
    // One update at a time: versions are consecutive and each game is learned from once.
    store::lock_policy_updates(&mut tx).await?;
    let games = store::games_to_learn(&mut tx).await?;
    if games.is_empty() {
        return Ok(None);
    }
    let (params, learned) = store::latest_policy(&mut tx).await?;
    let settings = LearnSettings::default();
    let mut credits = Vec::new();
    for (id, side, result) in &games {
        let outcome_result = match result.as_deref() {
            Some("1-0") => result_for_winner(Some(Side::White), *side),
            Some("0-1") => result_for_winner(Some(Side::Black), *side),
            _ => 0.0,
        };
        for stored in store::moves(&mut tx, *id).await? {
            let (Some(gradient), Some(reward)) = (stored.gradient, stored.record.reward) else {
                continue;
            };
            // Moves stored before the last features were added lack their (zero) terms.
            let mut gradient = gradient;
            if gradient.len() < FEATURE_COUNT {
                gradient.resize(FEATURE_COUNT, 0.0);
            }
            let Ok(log_prob_gradient) = <[f64; FEATURE_COUNT]>::try_from(gradient) else {
                continue;
            };
            let rating = stored.record.rating.filter(|_| state.chess.uses_ratings);
            credits.push(Credit {
                log_prob_gradient,
                // With Stockfish's figures, what the move lost against its best line counts.
                reward: learn::blended_reward(learn::move_return(&reward, &settings), rating),
                result: outcome_result,
            });
        }
    }
    let (next, report) = learn::update(&params, &credits, &settings);
    store::insert_policy(&mut tx, &next, learned + games.len() as i64).await?;
    let ids: Vec<i64> = games.iter().map(|g| g.0).collect();
    store::mark_learned(&mut tx, &ids).await?;
    tx.commit().await?;
    tracing::info!(
        version = next.version,
        games = ids.len(),
        moves = report.moves,
        "chess policy updated"
    );
    Ok(Some(next.version))
}

fn result_for_winner(winner: Option<Side>, agent: Side) -> f64 {
    match winner {
        Some(w) if w == agent => 1.0,
        Some(_) => -1.0,
        None => 0.0,
    }
}
