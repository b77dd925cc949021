//! SQL of the chess room: policy versions, games and moves.

use lachesis_chess::agent::PolicyParams;
use lachesis_shared::chess::{
    GameEnd, GameOutcome, GameSummary, GameView, MoveRecord, MoveReward, Side,
};
use sqlx::{PgConnection, PgPool, Row};

use crate::app::AppError;

/// A game's row, as the service needs it to decide what may happen next.
#[derive(Debug, Clone)]
pub struct GameRow {
    pub id: i64,
    pub owner_user: Option<i64>,
    pub owner_team: Option<i64>,
    pub agent_side: Side,
    pub start_fen: String,
    pub fen: String,
    pub policy_version: i64,
    pub outcome: Option<GameOutcome>,
    pub game_return: Option<f64>,
    pub plies: u32,
    pub created_at: String,
}

const GAME_COLUMNS: &str = "g.id, g.owner_user, g.owner_team, g.agent_side, g.start_fen, g.fen, \
    g.policy_version, g.result, g.end_reason, g.game_return, \
    to_char(g.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"') AS created, \
    (SELECT count(*) FROM chess_moves m WHERE m.game_id = g.id) AS plies";

fn game_from_row(row: &sqlx::postgres::PgRow) -> Result<GameRow, AppError> {
    let side: String = row.try_get("agent_side")?;
    let result: Option<String> = row.try_get("result")?;
    let end: Option<String> = row.try_get("end_reason")?;
    let outcome = match (result, end) {
        (Some(result), Some(end)) => {
            let end = GameEnd::parse(&end)
                .ok_or_else(|| AppError::Internal(format!("unknown game end {end:?}")))?;
            let winner = match result.as_str() {
                "1-0" => Some(Side::White),
                "0-1" => Some(Side::Black),
                _ => None,
            };
            Some(GameOutcome::new(end, winner))
        }
        _ => None,
    };
    Ok(GameRow {
        id: row.try_get("id")?,
        owner_user: row.try_get("owner_user")?,
        owner_team: row.try_get("owner_team")?,
        agent_side: Side::parse(&side)
            .ok_or_else(|| AppError::Internal(format!("unknown side {side:?}")))?,
        start_fen: row.try_get("start_fen")?,
        fen: row.try_get("fen")?,
        policy_version: row.try_get("policy_version")?,
        outcome,
        game_return: row.try_get("game_return")?,
        plies: u32::try_from(row.try_get::<i64, _>("plies")?).unwrap_or(u32::MAX),
        created_at: row.try_get("created")?,
    })
}

/// The game, locked for the rest of the transaction when `lock` is set (one move at a time).
pub async fn game(
    conn: &mut PgConnection,
    id: i64,
    lock: bool,
) -> Result<Option<GameRow>, AppError> {
    let sql = format!(
        "SELECT {GAME_COLUMNS} FROM chess_games g WHERE g.id = $1{}",
        if lock { " FOR UPDATE" } else { "" }
    );
    let row = sqlx::query(&sql)
        .bind(id)
        .fetch_optional(&mut *conn)
        .await?;
    row.as_ref().map(game_from_row).transpose()
}

/// Games the caller may see: `owner_user`/`owner_team` filter unless `all`.
pub async fn list_games(
    db: &PgPool,
    all: bool,
    user: Option<i64>,
    team: Option<i64>,
    limit: i64,
) -> Result<Vec<GameSummary>, AppError> {
    let sql = format!(
        "SELECT {GAME_COLUMNS} FROM chess_games g \
         WHERE $1 OR g.owner_user = $2 OR g.owner_team = $3 ORDER BY g.id DESC LIMIT $4"
    );
    let rows = sqlx::query(&sql)
        .bind(all)
        .bind(user)
        .bind(team)
        .bind(limit)
        .fetch_all(db)
        .await?;
    rows.iter()
        .map(|row| {
            let g = game_from_row(row)?;
            Ok(GameSummary {
                id: g.id.to_string(),
                agent_side: g.agent_side,
                plies: g.plies,
                outcome: g.outcome,
                policy_version: g.policy_version,
                game_return: g.game_return,
                created_at: g.created_at,
            })
        })
        .collect()
}

/// One stored move, with the learning data the wire type leaves out.
#[derive(Debug, Clone)]
pub struct StoredMove {
    pub record: MoveRecord,
    pub gradient: Option<Vec<f64>>,
}

pub async fn moves(conn: &mut PgConnection, game: i64) -> Result<Vec<StoredMove>, AppError> {
    let rows = sqlx::query(
        "SELECT ply, uci, san, fen_after, by_agent, gradient, reward, rating \
         FROM chess_moves WHERE game_id = $1 ORDER BY ply",
    )
    .bind(game)
    .fetch_all(&mut *conn)
    .await?;
    rows.iter()
        .map(|row| {
            let reward: Option<serde_json::Value> = row.try_get("reward")?;
            let reward = reward
                .map(serde_json::from_value::<MoveReward>)
                .transpose()
                .map_err(|e| AppError::Internal(format!("stored move reward: {e}")))?;
            let rating: Option<i16> = row.try_get("rating")?;
            Ok(StoredMove {
                record: MoveRecord {
                    ply: u32::try_from(row.try_get::<i32, _>("ply")?).unwrap_or(0),
                    uci: row.try_get("uci")?,
                    san: row.try_get("san")?,
                    fen_after: row.try_get("fen_after")?,
                    by_agent: row.try_get("by_agent")?,
                    reward,
                    rating: rating.and_then(|r| u8::try_from(r).ok()),
                },
                gradient: row.try_get("gradient")?,
            })
        })
        .collect()
}

pub fn view(game: &GameRow, moves: &[StoredMove]) -> GameView {
    GameView {
        id: game.id.to_string(),
        agent_side: game.agent_side,
        start_fen: game.start_fen.clone(),
        fen: game.fen.clone(),
        moves: moves.iter().map(|m| m.record.clone()).collect(),
        outcome: game.outcome.clone(),
        policy_version: game.policy_version,
        game_return: game.game_return,
        created_at: game.created_at.clone(),
    }
}

pub async fn insert_game(
    conn: &mut PgConnection,
    owner_user: Option<i64>,
    owner_team: Option<i64>,
    agent_side: Side,
    start_fen: &str,
    policy_version: i64,
) -> Result<i64, AppError> {
    let id = sqlx::query_scalar(
        "INSERT INTO chess_games (owner_user, owner_team, agent_side, start_fen, fen, policy_version) \
         VALUES ($1, $2, $3, $4, $4, $5) RETURNING id",
    )
    .bind(owner_user)
    .bind(owner_team)
    .bind(agent_side.as_str())
    .bind(start_fen)
    .bind(policy_version)
    .fetch_one(&mut *conn)
    .await?;
    Ok(id)
}

/// Appends a move and moves the game on; the primary key refuses a second move at one ply.
pub async fn insert_move(
    conn: &mut PgConnection,
    game: i64,
    record: &MoveRecord,
    gradient: Option<&[f64]>,
) -> Result<(), AppError> {
    sqlx::query(
        "INSERT INTO chess_moves (game_id, ply, uci, san, fen_after, by_agent, gradient) \
         VALUES ($1, $2, $3, $4, $5, $6, $7)",
    )
    .bind(game)
    .bind(i32::try_from(record.ply).unwrap_or(i32::MAX))
    .bind(&record.uci)
    .bind(&record.san)
    .bind(&record.fen_after)
    .bind(record.by_agent)
    .bind(gradient)
    .execute(&mut *conn)
    .await
    .map_err(|e| AppError::conflict_on_unique(e, "a move at this ply"))?;
    sqlx::query("UPDATE chess_games SET fen = $2 WHERE id = $1")
        .bind(game)
        .bind(&record.fen_after)
        .execute(&mut *conn)
        .await?;
    Ok(())
}

pub async fn end_game(
    conn: &mut PgConnection,
    game: i64,
    outcome: &GameOutcome,
) -> Result<(), AppError> {
    sqlx::query(
        "UPDATE chess_games SET result = $2, end_reason = $3, ended_at = now() \
         WHERE id = $1 AND result IS NULL",
    )
    .bind(game)
    .bind(&outcome.result)
    .bind(outcome.end.as_str())
    .execute(&mut *conn)
    .await?;
    Ok(())
}

pub async fn store_review(
    conn: &mut PgConnection,
    game: i64,
    rewards: &[(u32, MoveReward)],
    game_return: f64,
) -> Result<(), AppError> {
    for (ply, reward) in rewards {
        let json = serde_json::to_value(reward).map_err(|e| AppError::Internal(e.to_string()))?;
        sqlx::query(
            "UPDATE chess_moves SET reward = $3 WHERE game_id = $1 AND ply = $2 AND by_agent",
        )
        .bind(game)
        .bind(i32::try_from(*ply).unwrap_or(i32::MAX))
        .bind(json)
        .execute(&mut *conn)
        .await?;
    }
    sqlx::query("UPDATE chess_games SET game_return = $2 WHERE id = $1")
        .bind(game)
        .bind(game_return)
        .execute(&mut *conn)
        .await?;
    Ok(())
}

/// Rates an agent move; `false` when there is no agent move at that ply.
pub async fn rate(db: &PgPool, game: i64, ply: u32, rating: u8) -> Result<bool, AppError> {
    let done = sqlx::query(
        "UPDATE chess_moves SET rating = $3 WHERE game_id = $1 AND ply = $2 AND by_agent",
    )
    .bind(game)
    .bind(i32::try_from(ply).unwrap_or(i32::MAX))
    .bind(i16::from(rating))
    .execute(db)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// The newest policy version and its games learned, creating version 0 on first use.
pub async fn latest_policy(conn: &mut PgConnection) -> Result<(PolicyParams, i64), AppError> {
    let row = sqlx::query(
        "SELECT params, learned_games FROM chess_policies ORDER BY version DESC LIMIT 1",
    )
    .fetch_optional(&mut *conn)
    .await?;
    match row {
        Some(row) => {
            let params =
                PolicyParams::from_json(&row.try_get("params")?).map_err(AppError::Internal)?;
            Ok((params, row.try_get("learned_games")?))
        }
        None => {
            let params = PolicyParams::default();
            let json =
                serde_json::to_value(&params).map_err(|e| AppError::Internal(e.to_string()))?;
            sqlx::query("INSERT INTO chess_policies (version, params) VALUES (0, $1) ON CONFLICT DO NOTHING")
                .bind(json)
                .execute(&mut *conn)
                .await?;
            Ok((params, 0))
        }
    }
}

pub async fn policy(conn: &mut PgConnection, version: i64) -> Result<PolicyParams, AppError> {
    let params: serde_json::Value =
        sqlx::query_scalar("SELECT params FROM chess_policies WHERE version = $1")
            .bind(version)
            .fetch_one(&mut *conn)
            .await?;
    PolicyParams::from_json(&params).map_err(AppError::Internal)
}

pub async fn insert_policy(
    conn: &mut PgConnection,
    params: &PolicyParams,
    learned_games: i64,
) -> Result<(), AppError> {
    let json = serde_json::to_value(params).map_err(|e| AppError::Internal(e.to_string()))?;
    sqlx::query("INSERT INTO chess_policies (version, params, learned_games) VALUES ($1, $2, $3)")
        .bind(params.version)
        .bind(json)
        .bind(learned_games)
        .execute(&mut *conn)
        .await?;
    Ok(())
}

/// Reviewed games the policy has not learned from yet, locked so two updates never share one.
pub async fn games_to_learn(
    conn: &mut PgConnection,
) -> Result<Vec<(i64, Side, Option<String>)>, AppError> {
    let rows = sqlx::query(
        "SELECT id, agent_side, result FROM chess_games WHERE game_return IS NOT NULL AND NOT learned \
         ORDER BY id FOR UPDATE SKIP LOCKED",
    )
    .fetch_all(&mut *conn)
    .await?;
    rows.iter()
        .map(|row| {
            let side: String = row.try_get("agent_side")?;
            Ok((
                row.try_get("id")?,
                Side::parse(&side).unwrap_or(Side::Black),
                row.try_get("result")?,
            ))
        })
        .collect()
}

pub async fn mark_learned(conn: &mut PgConnection, games: &[i64]) -> Result<(), AppError> {
    sqlx::query("UPDATE chess_games SET learned = true WHERE id = ANY($1)")
        .bind(games)
        .execute(&mut *conn)
        .await?;
    Ok(())
}
