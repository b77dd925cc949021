//! The SQL behind the chess move-rating export: each agent move a person rated, with the position
//! it was played from.

use sqlx::PgPool;

/// A rated move.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct RatedMoveRow {
    pub game_id: i64,
    pub ply: i32,
    /// The position before the move (FEN).
    pub fen_before: String,
    pub san: String,
    pub rating: i16,
    pub username: Option<String>,
}

/// Whose rated moves: a user's games, a team's, or every game.
#[derive(Debug, Clone, Copy)]
pub enum RatedBy {
    User(i64),
    Team(i64),
    Anyone,
}

/// Up to `limit` rated moves after `(game, ply)`, in game then ply order.
pub async fn rated_moves_after(
    db: &PgPool,
    by: RatedBy,
    after: (i64, i32),
    limit: i64,
) -> Result<Vec<RatedMoveRow>, sqlx::Error> {
    let (user, team, anyone) = match by {
        RatedBy::User(user) => (Some(user), None, false),
        RatedBy::Team(team) => (None, Some(team), false),
        RatedBy::Anyone => (None, None, true),
    };
    sqlx::query_as(
        "SELECT m.game_id, m.ply, \
                COALESCE((SELECT p.fen_after FROM chess_moves p \
                          WHERE p.game_id = m.game_id AND p.ply = m.ply - 1), g.start_fen) \
                    AS fen_before, \
                m.san, m.rating, u.username \
         FROM chess_moves m JOIN chess_games g ON g.id = m.game_id \
         LEFT JOIN users u ON u.id = g.owner_user \
         WHERE m.rating IS NOT NULL AND (m.game_id, m.ply) > ($1, $2) \
           AND ($3 OR g.owner_user = $4 OR g.owner_team = $5) \
         ORDER BY m.game_id, m.ply LIMIT $6",
    )
    .bind(after.0)
    .bind(after.1)
    .bind(anyone)
    .bind(user)
    .bind(team)
    .bind(limit)
    .fetch_all(db)
    .await
}
