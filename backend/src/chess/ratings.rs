//! SQL of the yardstick's results (`chess_ratings`): `lachesis chess rate --record` stores one
//! row per measurement, and `GET /api/chess/agent` reads the latest per policy version. The
//! table's CHECK constraints hold the invariants (an interval around its point, rates in [0, 1]),
//! so a bad row is refused by Postgres whatever wrote it.

use lachesis_shared::chess::AgentRating;
use sqlx::PgConnection;

/// One measurement to store (the database stamps its time).
#[derive(Debug, Clone, PartialEq)]
pub struct NewRating {
    pub policy_version: i64,
    pub elo: Option<f64>,
    pub elo_low: Option<f64>,
    pub elo_high: Option<f64>,
    /// The rated version's games against the ladder.
    pub games: i32,
    /// Calibration games between the ladder's rungs.
    pub calibration_games: i32,
    pub sacrifice_rate: f64,
}

/// Stores a measurement; its id.
pub async fn insert(conn: &mut PgConnection, rating: &NewRating) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar!(
        "INSERT INTO chess_ratings
             (policy_version, elo, elo_low, elo_high, games, calibration_games, sacrifice_rate)
         VALUES ($1, $2, $3, $4, $5, $6, $7)
         RETURNING id",
        rating.policy_version,
        rating.elo,
        rating.elo_low,
        rating.elo_high,
        rating.games,
        rating.calibration_games,
        rating.sacrifice_rate
    )
    .fetch_one(&mut *conn)
    .await
}

/// The latest measurement of `policy_version`, if any.
pub async fn latest(
    conn: &mut PgConnection,
    policy_version: i64,
) -> Result<Option<AgentRating>, sqlx::Error> {
    sqlx::query_as!(
        AgentRating,
        r#"SELECT policy_version, elo, elo_low, elo_high, games::BIGINT AS "games!", sacrifice_rate,
                  to_char(measured_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"')
                      AS "measured_at!"
           FROM chess_ratings WHERE policy_version = $1
           ORDER BY measured_at DESC, id DESC LIMIT 1"#,
        policy_version
    )
    .fetch_optional(&mut *conn)
    .await
}
