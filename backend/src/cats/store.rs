//! The SQL of cat sessions (`cat_sessions`).

use lachesis_shared::cats::{CatRole, CatTurn, CatVerdict};
use sqlx::PgPool;

/// Why a cat session could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum CatStoreError {
    #[error(transparent)]
    Database(#[from] sqlx::Error),
    /// A stored session's turns or verdict do not read.
    #[error("stored session: {0}")]
    Corrupt(serde_json::Error),
    /// Turns or a verdict that do not serialize.
    #[error("{0}")]
    Encode(serde_json::Error),
}

/// A session's owner columns: the user, the team. Full rights see every session.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SessionOwner {
    pub user: Option<i64>,
    pub team: Option<i64>,
}

/// A session as stored.
pub struct StoredSession {
    pub id: i64,
    pub role: CatRole,
    pub seed: u64,
    pub turns: Vec<CatTurn>,
    pub verdict: Option<CatVerdict>,
}

fn role_name(role: CatRole) -> &'static str {
    match role {
        CatRole::Caretaker => "caretaker",
        CatRole::Cat => "cat",
    }
}

/// Session `id` if `owner` owns it (any session when `owner` is `None`).
pub async fn session(
    db: &PgPool,
    id: i64,
    owner: Option<SessionOwner>,
) -> Result<Option<StoredSession>, CatStoreError> {
    let SessionOwner { user, team } = owner.unwrap_or_default();
    let Some(row) = sqlx::query!(
        "SELECT id, role, seed, turns, verdict FROM cat_sessions
         WHERE id = $1 AND ($2 OR (owner_user IS NOT DISTINCT FROM $3
                                   AND owner_team IS NOT DISTINCT FROM $4))",
        id,
        owner.is_none(),
        user,
        team
    )
    .fetch_optional(db)
    .await?
    else {
        return Ok(None);
    };
    Ok(Some(StoredSession {
        id: row.id,
        role: if row.role == "cat" {
            CatRole::Cat
        } else {
            CatRole::Caretaker
        },
        seed: row.seed as u64,
        turns: serde_json::from_value(row.turns).map_err(CatStoreError::Corrupt)?,
        verdict: row
            .verdict
            .map(serde_json::from_value)
            .transpose()
            .map_err(CatStoreError::Corrupt)?,
    }))
}

/// Stores a new session; returns its id. `seed` must fit a BIGINT.
pub async fn create_session(
    db: &PgPool,
    owner: SessionOwner,
    role: CatRole,
    seed: u64,
    turns: &[CatTurn],
) -> Result<i64, CatStoreError> {
    let turns = serde_json::to_value(turns).map_err(CatStoreError::Encode)?;
    Ok(sqlx::query_scalar(
        "INSERT INTO cat_sessions (owner_user, owner_team, role, seed, turns)
         VALUES ($1, $2, $3, $4, $5) RETURNING id",
    )
    .bind(owner.user)
    .bind(owner.team)
    .bind(role_name(role))
    .bind(seed as i64)
    .bind(turns)
    .fetch_one(db)
    .await?)
}

/// Saves the session's turns and verdict, only if it still has `turns_before` turns and no
/// verdict (nobody else moved meanwhile); `false` when someone did.
pub async fn save_turns(
    db: &PgPool,
    session: &StoredSession,
    turns_before: usize,
) -> Result<bool, CatStoreError> {
    let turns = serde_json::to_value(&session.turns).map_err(CatStoreError::Encode)?;
    let verdict = session
        .verdict
        .as_ref()
        .map(serde_json::to_value)
        .transpose()
        .map_err(CatStoreError::Encode)?;
    let updated = sqlx::query(
        "UPDATE cat_sessions SET turns = $2, verdict = $3, updated_at = now()
         WHERE id = $1 AND jsonb_array_length(turns) = $4 AND verdict IS NULL",
    )
    .bind(session.id)
    .bind(turns)
    .bind(verdict)
    .bind(turns_before as i32)
    .execute(db)
    .await?
    .rows_affected();
    Ok(updated > 0)
}

/// A finished session a person played as the caretaker, as the signal exports read it.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct CaretakerSessionRow {
    pub id: i64,
    pub turns: serde_json::Value,
    pub verdict: serde_json::Value,
    pub username: Option<String>,
}

/// Up to `limit` judged caretaker sessions after id `after`, oldest first, of `owner` (every
/// owner's when `None`).
pub async fn caretaker_sessions_after(
    db: &PgPool,
    owner: Option<SessionOwner>,
    after: i64,
    limit: i64,
) -> Result<Vec<CaretakerSessionRow>, sqlx::Error> {
    let SessionOwner { user, team } = owner.unwrap_or_default();
    sqlx::query_as(
        "SELECT s.id, s.turns, s.verdict, u.username FROM cat_sessions s \
         LEFT JOIN users u ON u.id = s.owner_user \
         WHERE s.role = 'caretaker' AND s.verdict IS NOT NULL AND s.id > $1 \
           AND ($2 OR (s.owner_user IS NOT DISTINCT FROM $3 AND s.owner_team IS NOT DISTINCT FROM $4)) \
         ORDER BY s.id LIMIT $5",
    )
    .bind(after)
    .bind(owner.is_none())
    .bind(user)
    .bind(team)
    .bind(limit)
    .fetch_all(db)
    .await
}
