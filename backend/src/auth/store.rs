//! The SQL of accounts: users, sessions, tokens and runs' owners here; teams, memberships and
//! invites in [`teams`]. Uniqueness and the "a team keeps an owner" rule are enforced by Postgres
//! (see migrations/20261130000004_accounts.sql); callers map violations.

mod teams;

use std::time::Duration;

use lachesis_shared::accounts::TokenInfo;
use sqlx::{PgConnection, PgPool};

pub use self::teams::{
    TeamReach, claim_invite, create_invite, create_team, invite_is_open, join_team,
    lock_owned_teams, members, memberships, remove_member, role_in_team, team_id_by_name,
    team_reach, team_role_by_name, upsert_member,
};
use super::Viewer;
use super::secrets::{random_secret, token_hash};

/// A live token's caller; `None` for unknown, revoked and expired tokens alike.
pub async fn token_viewer(db: &PgPool, token: &str) -> Result<Option<Viewer>, sqlx::Error> {
    let hash = token_hash(token);
    let row: Option<(i64, i64, Option<String>, bool, bool, bool)> = sqlx::query_as(
        "SELECT id, team_id, run_id, read_only, inference,
                last_used_at IS NULL OR last_used_at < now() - interval '1 minute'
         FROM api_tokens
         WHERE token_hash = $1 AND revoked_at IS NULL
           AND (expires_at IS NULL OR expires_at > now())",
    )
    .bind(&hash)
    .fetch_optional(db)
    .await?;
    let Some((id, team_id, run, read_only, inference, stale)) = row else {
        return Ok(None);
    };
    // At most one write a minute per token: the hot path (one post per group) stays read-only.
    if stale {
        sqlx::query("UPDATE api_tokens SET last_used_at = now() WHERE id = $1")
            .bind(id)
            .execute(db)
            .await?;
    }
    Ok(Some(Viewer::Token {
        id,
        team_id,
        run,
        read_only,
        inference,
    }))
}

/// The session's user. A session unused for longer than `idle` is deleted and counts as none;
/// a live one has its `last_seen_at` refreshed, at most once a minute so that a busy page does not
/// write on every request.
pub async fn session_viewer(
    db: &PgPool,
    secret: &str,
    idle: Duration,
) -> Result<Option<Viewer>, sqlx::Error> {
    let hash = token_hash(secret);
    let row: Option<(i64, String, String, bool, bool)> = sqlx::query_as(
        "SELECT u.id, u.username, s.csrf_token,
                s.last_seen_at < now() - make_interval(secs => $2),
                s.last_seen_at < now() - interval '1 minute'
         FROM sessions s JOIN users u ON u.id = s.user_id
         WHERE s.token_hash = $1 AND s.expires_at > now()",
    )
    .bind(&hash)
    .bind(idle.as_secs_f64())
    .fetch_optional(db)
    .await?;
    let Some((id, username, csrf_token, idle_too_long, stale)) = row else {
        return Ok(None);
    };
    if idle_too_long {
        sqlx::query("DELETE FROM sessions WHERE token_hash = $1")
            .bind(&hash)
            .execute(db)
            .await?;
        return Ok(None);
    }
    if stale {
        sqlx::query("UPDATE sessions SET last_seen_at = now() WHERE token_hash = $1")
            .bind(&hash)
            .execute(db)
            .await?;
    }
    Ok(Some(Viewer::User {
        id,
        username,
        csrf_token,
    }))
}

/// Who owns a run and whether it is public; `None` when the run does not exist.
#[derive(Debug, Clone)]
pub struct RunOwner {
    pub team_id: Option<i64>,
    pub public: bool,
}

pub async fn run_owner(db: &PgPool, run: &str) -> Result<Option<RunOwner>, sqlx::Error> {
    let row: Option<(Option<i64>, bool)> =
        sqlx::query_as("SELECT team_id, public FROM runs WHERE id = $1")
            .bind(run)
            .fetch_optional(db)
            .await?;
    Ok(row.map(|(team_id, public)| RunOwner { team_id, public }))
}

/// Creates `run` owned by `team`; a concurrent creator wins and the caller re-reads the owner.
pub async fn create_team_run(db: &PgPool, run: &str, team: i64) -> Result<(), sqlx::Error> {
    sqlx::query("INSERT INTO runs (id, team_id) VALUES ($1, $2) ON CONFLICT (id) DO NOTHING")
        .bind(run)
        .bind(team)
        .execute(db)
        .await?;
    Ok(())
}

pub async fn user_count(db: &PgPool) -> Result<i64, sqlx::Error> {
    let (n,): (i64,) = sqlx::query_as("SELECT count(*) FROM users")
        .fetch_one(db)
        .await?;
    Ok(n)
}

/// Takes the first-run lock until the transaction ends (two racing first runs go one after the
/// other) and counts the users then.
pub async fn lock_first_owner(conn: &mut PgConnection) -> Result<i64, sqlx::Error> {
    sqlx::query("SELECT pg_advisory_xact_lock(hashtext('lachesis first owner'))")
        .execute(&mut *conn)
        .await?;
    let (users,): (i64,) = sqlx::query_as("SELECT count(*) FROM users")
        .fetch_one(&mut *conn)
        .await?;
    Ok(users)
}

pub async fn create_user(
    conn: &mut PgConnection,
    username: &str,
    password_hash: &str,
) -> Result<i64, sqlx::Error> {
    let (id,): (i64,) =
        sqlx::query_as("INSERT INTO users (username, password_hash) VALUES ($1, $2) RETURNING id")
            .bind(username)
            .bind(password_hash)
            .fetch_one(conn)
            .await?;
    Ok(id)
}

/// The user's id, canonical name and password hash.
pub async fn user_by_name(
    db: &PgPool,
    username: &str,
) -> Result<Option<(i64, String, String)>, sqlx::Error> {
    sqlx::query_as(
        "SELECT id, username, password_hash FROM users WHERE lower(username) = lower($1)",
    )
    .bind(username)
    .fetch_optional(db)
    .await
}

/// A new session lasting `days` at most: (cookie secret, CSRF token).
pub async fn create_session(
    db: &PgPool,
    user: i64,
    days: u32,
    idle: Duration,
) -> Result<(String, String), sqlx::Error> {
    let (secret, csrf) = (random_secret(), random_secret());
    sqlx::query(
        "INSERT INTO sessions (token_hash, user_id, csrf_token, expires_at)
         VALUES ($1, $2, $3, now() + make_interval(days => $4))",
    )
    .bind(token_hash(&secret))
    .bind(user)
    .bind(&csrf)
    .bind(i32::try_from(days).unwrap_or(i32::MAX))
    .execute(db)
    .await?;
    // Expired and idle sessions go when anyone signs in: no sweeper task needed.
    sqlx::query(
        "DELETE FROM sessions
         WHERE expires_at < now() OR last_seen_at < now() - make_interval(secs => $1)",
    )
    .bind(idle.as_secs_f64())
    .execute(db)
    .await?;
    Ok((secret, csrf))
}

pub async fn delete_session(db: &PgPool, secret: &str) -> Result<(), sqlx::Error> {
    sqlx::query("DELETE FROM sessions WHERE token_hash = $1")
        .bind(token_hash(secret))
        .execute(db)
        .await?;
    Ok(())
}

type TokenRow = (
    i64,
    String,
    Option<String>,
    bool,
    bool,
    i64,
    Option<i64>,
    Option<i64>,
);

fn token_info(
    (id, name, run, read_only, inference, created_at_ms, last_used_at_ms, expires_at_ms): TokenRow,
) -> TokenInfo {
    TokenInfo {
        id,
        name,
        run,
        read_only,
        inference,
        created_at_ms,
        last_used_at_ms,
        expires_at_ms,
    }
}

const TOKEN_COLUMNS: &str = "id, name, run_id, read_only, inference,
    (extract(epoch FROM created_at) * 1000)::bigint,
    (extract(epoch FROM last_used_at) * 1000)::bigint,
    (extract(epoch FROM expires_at) * 1000)::bigint";

pub async fn tokens(db: &PgPool, team: i64) -> Result<Vec<TokenInfo>, sqlx::Error> {
    let rows: Vec<TokenRow> = sqlx::query_as(&format!(
        "SELECT {TOKEN_COLUMNS} FROM api_tokens
         WHERE team_id = $1 AND revoked_at IS NULL ORDER BY id"
    ))
    .bind(team)
    .fetch_all(db)
    .await?;
    Ok(rows.into_iter().map(token_info).collect())
}

/// A token about to be stored, its fields already checked.
pub struct NewTokenRow<'a> {
    pub team: i64,
    pub name: &'a str,
    pub run: Option<&'a str>,
    pub read_only: bool,
    pub inference: bool,
    pub expires_in_days: Option<u32>,
    pub created_by: Option<i64>,
}

/// Stores a new token's hash; the caller shows `secret` once.
pub async fn create_token(
    db: &PgPool,
    token: &NewTokenRow<'_>,
    secret: &str,
) -> Result<TokenInfo, sqlx::Error> {
    let row: TokenRow = sqlx::query_as(&format!(
        "INSERT INTO api_tokens
             (team_id, run_id, name, read_only, inference, token_hash, created_by, expires_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, now() + $8::int * interval '1 day')
         RETURNING {TOKEN_COLUMNS}"
    ))
    .bind(token.team)
    .bind(token.run)
    .bind(token.name)
    .bind(token.read_only)
    .bind(token.inference)
    .bind(token_hash(secret))
    .bind(token.created_by)
    .bind(
        token
            .expires_in_days
            .map(|days| i32::try_from(days).unwrap_or(i32::MAX)),
    )
    .fetch_one(db)
    .await?;
    Ok(token_info(row))
}

pub async fn revoke_token(db: &PgPool, team: i64, id: i64) -> Result<bool, sqlx::Error> {
    let done = sqlx::query(
        "UPDATE api_tokens SET revoked_at = now()
         WHERE id = $1 AND team_id = $2 AND revoked_at IS NULL",
    )
    .bind(id)
    .bind(team)
    .execute(db)
    .await?;
    Ok(done.rows_affected() == 1)
}

pub async fn set_public(db: &PgPool, run: &str, public: bool) -> Result<(), sqlx::Error> {
    sqlx::query("UPDATE runs SET public = $2 WHERE id = $1")
        .bind(run)
        .bind(public)
        .execute(db)
        .await?;
    Ok(())
}
