//! SQL of the chess room: policy versions, games and moves. Every query is checked against the
//! schema at compile time (`sqlx::query!`, offline data in `backend/.sqlx`), and a failure is a
//! [`StoreError`] that the handlers turn into the HTTP answer.

use lachesis_chess::agent::PolicyParams;
use lachesis_shared::chess::{
    GameEnd, GameOutcome, GameSummary, GameView, MoveRecord, MoveReward, Side,
};
use sqlx::{PgConnection, PgPool};
use std::time::Duration;

/// What can go wrong below the chess handlers.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error(transparent)]
    Database(#[from] sqlx::Error),
    /// The primary key on (game, ply) refused a second move at one ply.
    #[error("a move at this ply")]
    MoveTaken,
    /// The game already has a result: a game ends once.
    #[error("the game is over")]
    AlreadyEnded,
    /// A stored value this code cannot read (a side, an end, a reward or policy document).
    #[error("stored chess data unreadable: {0}")]
    Unreadable(String),
}

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
    /// Anyone may watch it.
    pub public: bool,
}

/// A `chess_games` row with its derived columns, as the queries below select it.
struct GameRecord {
    id: i64,
    owner_user: Option<i64>,
    owner_team: Option<i64>,
    agent_side: String,
    start_fen: String,
    fen: String,
    policy_version: i64,
    result: Option<String>,
    end_reason: Option<String>,
    game_return: Option<f64>,
    created: String,
    plies: i64,
    public: bool,
}

impl TryFrom<GameRecord> for GameRow {
    type Error = StoreError;

    fn try_from(row: GameRecord) -> Result<Self, StoreError> {
        let outcome = match (row.result, row.end_reason) {
            (Some(result), Some(end)) => {
                let end = GameEnd::parse(&end)
                    .ok_or_else(|| StoreError::Unreadable(format!("game end {end:?}")))?;
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
            id: row.id,
            owner_user: row.owner_user,
            owner_team: row.owner_team,
            agent_side: side(&row.agent_side)?,
            start_fen: row.start_fen,
            fen: row.fen,
            policy_version: row.policy_version,
            outcome,
            game_return: row.game_return,
            plies: u32::try_from(row.plies).unwrap_or(u32::MAX),
            created_at: row.created,
            public: row.public,
        })
    }
}

fn side(stored: &str) -> Result<Side, StoreError> {
    Side::parse(stored).ok_or_else(|| StoreError::Unreadable(format!("side {stored:?}")))
}

/// The game, locked for the rest of the transaction when `lock` is set (one move at a time).
pub async fn game(
    conn: &mut PgConnection,
    id: i64,
    lock: bool,
) -> Result<Option<GameRow>, StoreError> {
    if lock {
        let locked = sqlx::query_scalar!("SELECT id FROM chess_games WHERE id = $1 FOR UPDATE", id)
            .fetch_optional(&mut *conn)
            .await?;
        if locked.is_none() {
            return Ok(None);
        }
    }
    let rows = select_games(
        &mut *conn,
        Selection {
            id: Some(id),
            all: true,
            user: None,
            team: None,
            public_only: false,
            limit: 1,
        },
    )
    .await?;
    rows.into_iter().next().map(GameRow::try_from).transpose()
}

/// Which games one SELECT returns: one by id, or the newest of a viewer's.
struct Selection {
    /// Only this game.
    id: Option<i64>,
    /// Every owner's games, not only `user`'s and `team`'s.
    all: bool,
    user: Option<i64>,
    team: Option<i64>,
    /// Only games anyone may watch.
    public_only: bool,
    limit: i64,
}

/// The one query that reads `chess_games` rows with their derived columns. A known `id` makes
/// the planner's custom plan a primary-key lookup.
async fn select_games<'e>(
    db: impl sqlx::PgExecutor<'e>,
    which: Selection,
) -> Result<Vec<GameRecord>, StoreError> {
    Ok(sqlx::query_as!(
        GameRecord,
        r#"SELECT g.id, g.owner_user, g.owner_team, g.agent_side, g.start_fen, g.fen,
                  g.policy_version, g.result, g.end_reason, g.game_return,
                  to_char(g.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') AS "created!",
                  (SELECT count(*) FROM chess_moves m WHERE m.game_id = g.id) AS "plies!",
                  g.public
           FROM chess_games g
           WHERE ($1::bigint IS NULL OR g.id = $1)
             AND ($2 OR g.owner_user = $3 OR g.owner_team = $4) AND (g.public OR NOT $5)
           ORDER BY g.id DESC LIMIT $6"#,
        which.id,
        which.all,
        which.user,
        which.team,
        which.public_only,
        which.limit
    )
    .fetch_all(db)
    .await?)
}

/// The newest `limit` games of `user` or `team` (every game when `all`); only public ones when
/// `public_only`.
pub async fn list_games(
    db: &PgPool,
    all: bool,
    user: Option<i64>,
    team: Option<i64>,
    public_only: bool,
    limit: i64,
) -> Result<Vec<GameSummary>, StoreError> {
    let rows = select_games(
        db,
        Selection {
            id: None,
            all,
            user,
            team,
            public_only,
            limit,
        },
    )
    .await?;
    rows.into_iter()
        .map(|row| {
            let g = GameRow::try_from(row)?;
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

pub async fn moves(conn: &mut PgConnection, game: i64) -> Result<Vec<StoredMove>, StoreError> {
    let rows = sqlx::query!(
        "SELECT ply, uci, san, fen_after, by_agent, gradient, reward, rating \
         FROM chess_moves WHERE game_id = $1 ORDER BY ply",
        game
    )
    .fetch_all(&mut *conn)
    .await?;
    rows.into_iter()
        .map(|row| {
            let reward = row
                .reward
                .map(serde_json::from_value::<MoveReward>)
                .transpose()
                .map_err(|e| StoreError::Unreadable(format!("move reward: {e}")))?;
            Ok(StoredMove {
                record: MoveRecord {
                    ply: u32::try_from(row.ply).unwrap_or(0),
                    uci: row.uci,
                    san: row.san,
                    fen_after: row.fen_after,
                    by_agent: row.by_agent,
                    reward,
                    rating: row.rating.and_then(|r| u8::try_from(r).ok()),
                },
                gradient: row.gradient,
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
        public: game.public,
        yours: false,
    }
}

/// Makes game `id` public or private.
pub async fn set_public(db: &PgPool, id: i64, public: bool) -> Result<(), StoreError> {
    sqlx::query("UPDATE chess_games SET public = $2 WHERE id = $1")
        .bind(id)
        .bind(public)
        .execute(db)
        .await?;
    Ok(())
}

pub async fn insert_game(
    conn: &mut PgConnection,
    owner_user: Option<i64>,
    owner_team: Option<i64>,
    agent_side: Side,
    start_fen: &str,
    policy_version: i64,
) -> Result<i64, StoreError> {
    let id = sqlx::query_scalar!(
        "INSERT INTO chess_games (owner_user, owner_team, agent_side, start_fen, fen, policy_version) \
         VALUES ($1, $2, $3, $4, $4, $5) RETURNING id",
        owner_user,
        owner_team,
        agent_side.as_str(),
        start_fen,
        policy_version
    )
    .fetch_one(&mut *conn)
    .await?;
    Ok(id)
}

fn stored_ply(ply: u32) -> i32 {
    i32::try_from(ply).unwrap_or(i32::MAX)
}

/// Appends a move and moves the game on; the primary key refuses a second move at one ply.
pub async fn insert_move(
    conn: &mut PgConnection,
    game: i64,
    record: &MoveRecord,
    gradient: Option<&[f64]>,
) -> Result<(), StoreError> {
    sqlx::query!(
        "INSERT INTO chess_moves (game_id, ply, uci, san, fen_after, by_agent, gradient) \
         VALUES ($1, $2, $3, $4, $5, $6, $7)",
        game,
        stored_ply(record.ply),
        record.uci,
        record.san,
        record.fen_after,
        record.by_agent,
        gradient
    )
    .execute(&mut *conn)
    .await
    .map_err(|e| match &e {
        sqlx::Error::Database(db) if db.is_unique_violation() => StoreError::MoveTaken,
        _ => StoreError::Database(e),
    })?;
    sqlx::query!(
        "UPDATE chess_games SET fen = $2 WHERE id = $1",
        game,
        record.fen_after
    )
    .execute(&mut *conn)
    .await?;
    Ok(())
}

pub async fn end_game(
    conn: &mut PgConnection,
    game: i64,
    outcome: &GameOutcome,
) -> Result<(), StoreError> {
    let ended = sqlx::query!(
        "UPDATE chess_games SET result = $2, end_reason = $3, ended_at = now() \
         WHERE id = $1 AND result IS NULL",
        game,
        outcome.result,
        outcome.end.as_str()
    )
    .execute(&mut *conn)
    .await?;
    match ended.rows_affected() {
        0 => Err(StoreError::AlreadyEnded),
        _ => Ok(()),
    }
}

/// Stores a game's review: its return and each agent move's verdict, and lets go of its claim.
/// `false`, and nothing written, when the game already has one (a game is reviewed once, and
/// learned from as such) or `holder` no longer holds its claim (given back at a stop, or lapsed
/// and taken by another review).
pub async fn store_review(
    conn: &mut PgConnection,
    game: i64,
    holder: i64,
    rewards: &[(u32, MoveReward)],
    game_return: f64,
) -> Result<bool, StoreError> {
    let first = sqlx::query!(
        "UPDATE chess_games SET game_return = $3, review_claimed_until = NULL,
         review_claimed_by = NULL
         WHERE id = $1 AND game_return IS NULL AND review_claimed_by = $2",
        game,
        holder,
        game_return
    )
    .execute(&mut *conn)
    .await?;
    if first.rows_affected() == 0 {
        return Ok(false);
    }
    for (ply, reward) in rewards {
        let json =
            serde_json::to_value(reward).map_err(|e| StoreError::Unreadable(e.to_string()))?;
        sqlx::query!(
            "UPDATE chess_moves SET reward = $3 WHERE game_id = $1 AND ply = $2 AND by_agent",
            game,
            stored_ply(*ply),
            json
        )
        .execute(&mut *conn)
        .await?;
    }
    Ok(true)
}

/// Finished games without a review, oldest first.
pub async fn unreviewed_games(conn: &mut PgConnection) -> Result<Vec<i64>, StoreError> {
    Ok(sqlx::query_scalar!(
        "SELECT id FROM chess_games WHERE result IS NOT NULL AND game_return IS NULL
         AND (review_claimed_until IS NULL OR review_claimed_until < now()) ORDER BY id"
    )
    .fetch_all(&mut *conn)
    .await?)
}

/// Claims game `id`'s review for `lease` on behalf of `holder` (one per server): `false` when
/// the game is live, already reviewed, or claimed by a review whose claim has not lapsed (on this
/// server or another).
pub async fn claim_review(
    conn: &mut PgConnection,
    id: i64,
    holder: i64,
    lease: Duration,
) -> Result<bool, StoreError> {
    let claimed = sqlx::query!(
        "UPDATE chess_games SET review_claimed_until = now() + make_interval(secs => $3),
         review_claimed_by = $2
         WHERE id = $1 AND result IS NOT NULL AND game_return IS NULL
         AND (review_claimed_until IS NULL OR review_claimed_until < now())",
        id,
        holder,
        lease.as_secs_f64()
    )
    .execute(&mut *conn)
    .await?;
    Ok(claimed.rows_affected() == 1)
}

/// Keeps `holder`'s claim on game `id` for `lease` from now: `false` when it no longer holds it.
pub async fn renew_review_claim(
    conn: &mut PgConnection,
    id: i64,
    holder: i64,
    lease: Duration,
) -> Result<bool, StoreError> {
    let renewed = sqlx::query!(
        "UPDATE chess_games SET review_claimed_until = now() + make_interval(secs => $3)
         WHERE id = $1 AND game_return IS NULL AND review_claimed_by = $2",
        id,
        holder,
        lease.as_secs_f64()
    )
    .execute(&mut *conn)
    .await?;
    Ok(renewed.rows_affected() == 1)
}

/// Gives up `holder`'s claim on game `id`, so that a retry or another server may take the game at
/// once. A claim `holder` no longer holds is left alone.
pub async fn release_review_claim(
    conn: &mut PgConnection,
    id: i64,
    holder: i64,
) -> Result<(), StoreError> {
    sqlx::query!(
        "UPDATE chess_games SET review_claimed_until = NULL, review_claimed_by = NULL
         WHERE id = $1 AND review_claimed_by = $2",
        id,
        holder
    )
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// Gives up every claim `holder` holds (a server stopping); returns how many. Only ended games
/// without a review are ever claimed: the condition lets the query read the few of them
/// (`chess_games_unreviewed`) instead of every game.
pub async fn release_review_claims(
    conn: &mut PgConnection,
    holder: i64,
) -> Result<u64, StoreError> {
    let released = sqlx::query!(
        "UPDATE chess_games SET review_claimed_until = NULL, review_claimed_by = NULL
         WHERE result IS NOT NULL AND game_return IS NULL AND review_claimed_by = $1",
        holder
    )
    .execute(&mut *conn)
    .await?;
    Ok(released.rows_affected())
}

/// Rates an agent move; `false` when there is no agent move at that ply.
pub async fn rate(db: &PgPool, game: i64, ply: u32, rating: u8) -> Result<bool, StoreError> {
    let done = sqlx::query!(
        "UPDATE chess_moves SET rating = $3 WHERE game_id = $1 AND ply = $2 AND by_agent",
        game,
        stored_ply(ply),
        i16::from(rating)
    )
    .execute(db)
    .await?;
    Ok(done.rows_affected() == 1)
}

fn policy_params(stored: &serde_json::Value) -> Result<PolicyParams, StoreError> {
    PolicyParams::from_json(stored).map_err(StoreError::Unreadable)
}

/// The newest policy version and its games learned, creating version 0 on first use.
pub async fn latest_policy(conn: &mut PgConnection) -> Result<(PolicyParams, i64), StoreError> {
    let row = sqlx::query!(
        "SELECT params, learned_games FROM chess_policies ORDER BY version DESC LIMIT 1"
    )
    .fetch_optional(&mut *conn)
    .await?;
    match row {
        Some(row) => Ok((policy_params(&row.params)?, row.learned_games)),
        None => {
            let params = PolicyParams::default();
            let json =
                serde_json::to_value(&params).map_err(|e| StoreError::Unreadable(e.to_string()))?;
            sqlx::query!(
                "INSERT INTO chess_policies (version, params) VALUES (0, $1) ON CONFLICT DO NOTHING",
                json
            )
            .execute(&mut *conn)
            .await?;
            Ok((params, 0))
        }
    }
}

pub async fn policy(conn: &mut PgConnection, version: i64) -> Result<PolicyParams, StoreError> {
    let params = sqlx::query_scalar!(
        "SELECT params FROM chess_policies WHERE version = $1",
        version
    )
    .fetch_one(&mut *conn)
    .await?;
    policy_params(&params)
}

pub async fn insert_policy(
    conn: &mut PgConnection,
    params: &PolicyParams,
    learned_games: i64,
) -> Result<(), StoreError> {
    let json = serde_json::to_value(params).map_err(|e| StoreError::Unreadable(e.to_string()))?;
    sqlx::query!(
        "INSERT INTO chess_policies (version, params, learned_games) VALUES ($1, $2, $3)",
        params.version,
        json,
        learned_games
    )
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// Serialises policy updates across servers: two learners never read the same games.
pub async fn lock_policy_updates(conn: &mut PgConnection) -> Result<(), StoreError> {
    sqlx::query!("SELECT pg_advisory_xact_lock(hashtext('lachesis.chess.policy'))")
        .execute(&mut *conn)
        .await?;
    Ok(())
}

/// Reviewed games the policy has not learned from yet, locked so two updates never share one.
pub async fn games_to_learn(
    conn: &mut PgConnection,
) -> Result<Vec<(i64, Side, Option<String>)>, StoreError> {
    let rows = sqlx::query!(
        "SELECT id, agent_side, result FROM chess_games WHERE game_return IS NOT NULL AND NOT learned \
         ORDER BY id FOR UPDATE SKIP LOCKED"
    )
    .fetch_all(&mut *conn)
    .await?;
    rows.into_iter()
        .map(|row| Ok((row.id, side(&row.agent_side)?, row.result)))
        .collect()
}

pub async fn mark_learned(conn: &mut PgConnection, games: &[i64]) -> Result<(), StoreError> {
    sqlx::query!(
        "UPDATE chess_games SET learned = true WHERE id = ANY($1)",
        games
    )
    .execute(&mut *conn)
    .await?;
    Ok(())
}
