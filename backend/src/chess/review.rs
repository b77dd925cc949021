//! After a game: the reward model judges each agent move, and later the policy learns from the
//! judged games (REINFORCE on its feature weights, `lachesis_chess::learn`).

use lachesis_chess::judge::{self, JUDGE_DEPTH};
use lachesis_chess::learn::{self, Credit, LearnSettings};
use lachesis_chess::oracle::{self, OracleSettings};
use lachesis_chess::shakmaty::Chess;
use lachesis_chess::{features::FEATURE_COUNT, selfplay};
use lachesis_inference::ChatMessage;
use lachesis_shared::chess::rules;
use lachesis_shared::chess::{MoveReward, Side};

use super::ChessJudge;
use super::store::{self, GameRow};
use crate::app::AppError;
use crate::app::AppState;
use crate::policy::PolicyRequest;

/// How much the result (+1 win, −1 loss) adds to a game's return beside its move rewards.
const RESULT_IN_RETURN: f64 = 1.0;

/// Attempts at one review before it is left for the server's next start ([`resume_reviews`]).
const REVIEW_ATTEMPTS: u32 = 3;

/// Reviews game `id` in the background, then tells its watchers (the `ChessGame` event with
/// `reviewed`). A failure (the database or every engine unreachable) is retried after the
/// server's restart backoff; a review cut off by the server stopping is resumed when it starts
/// again.
pub fn spawn(state: &AppState, id: i64) {
    let state = state.clone();
    tokio::spawn(async move {
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
            "a chess review gave up; it runs again when the server next starts"
        );
    });
}

/// Starts the review of every finished game left without one (by a server that stopped while
/// reviewing, or a review that gave up). Returns how many were started.
pub async fn resume_reviews(state: &AppState) -> Result<usize, AppError> {
    let mut conn = state.db.acquire().await?;
    let ids = store::unreviewed_games(&mut conn).await?;
    drop(conn);
    for &id in &ids {
        spawn(state, id);
    }
    Ok(ids.len())
}

async fn review_and_announce(state: &AppState, id: i64) -> Result<(), AppError> {
    match review(state, id).await? {
        Some(game) => super::publish_game(state, &game, true).await,
        None => Ok(()),
    }
}

/// Judges every agent move of a finished game and stores the verdicts and the game's return;
/// returns the ended game as it was read (its moves and outcome no longer change). `None` when
/// there was nothing to do: the game is live, or another review stored first (two requests that
/// saw the same ending, or two servers resuming the same review).
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
    let mut conn = state.db.acquire().await?;
    // A request that finished the same game may have reviewed it while this one waited.
    if store::game(&mut conn, id, false)
        .await?
        .is_some_and(|g| g.game_return.is_some())
    {
        return Ok(None);
    }
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
    for (ply, fen, uci) in to_judge {
        let pos = rules::parse_fen(&fen).map_err(|e| AppError::Internal(e.to_string()))?;
        let m = rules::parse_uci(&pos, &uci).map_err(|e| AppError::Internal(e.to_string()))?;
        rewards.push((ply, judge_move(state, pos, m).await?));
    }
    let result = selfplay::result_for(&outcome, game.agent_side);
    let game_return = rewards.iter().map(|(_, r)| r.total).sum::<f64>() + RESULT_IN_RETURN * result;
    let mut tx = state.db.begin().await?;
    let stored = store::store_review(&mut tx, id, &rewards, game_return).await?;
    tx.commit().await?;
    Ok(stored.then_some(game))
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
