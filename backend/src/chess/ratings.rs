//! SQL of the yardstick's results (`chess_ratings`): `lachesis chess rate --record` stores one
//! row per measurement, and `GET /api/chess/agent` reads the latest per policy version. The
//! table's CHECK constraints hold the invariants (an interval around its point, rates in [0, 1]),
//! so a bad row is refused by Postgres whatever wrote it.

use lachesis_shared::chess::AgentRating;
use sqlx::{PgConnection, Row};

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
    sqlx::query_scalar(
        "INSERT INTO chess_ratings
             (policy_version, elo, elo_low, elo_high, games, calibration_games, sacrifice_rate)
         VALUES ($1, $2, $3, $4, $5, $6, $7)
         RETURNING id",
    )
    .bind(rating.policy_version)
    .bind(rating.elo)
    .bind(rating.elo_low)
    .bind(rating.elo_high)
    .bind(rating.games)
    .bind(rating.calibration_games)
    .bind(rating.sacrifice_rate)
    .fetch_one(&mut *conn)
    .await
}

/// The latest measurement of `policy_version`, if any.
pub async fn latest(
    conn: &mut PgConnection,
    policy_version: i64,
) -> Result<Option<AgentRating>, sqlx::Error> {
    let row = sqlx::query(
        r#"SELECT policy_version, elo, elo_low, elo_high, games::BIGINT AS games, sacrifice_rate,
                  to_char(measured_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') AS measured
           FROM chess_ratings WHERE policy_version = $1
           ORDER BY measured_at DESC, id DESC LIMIT 1"#,
    )
    .bind(policy_version)
    .fetch_optional(&mut *conn)
    .await?;
    row.map(|row| {
        Ok(AgentRating {
            policy_version: row.try_get("policy_version")?,
            elo: row.try_get("elo")?,
            elo_low: row.try_get("elo_low")?,
            elo_high: row.try_get("elo_high")?,
            games: row.try_get("games")?,
            sacrifice_rate: row.try_get("sacrifice_rate")?,
            measured_at: row.try_get("measured")?,
        })
    })
    .transpose()
}
