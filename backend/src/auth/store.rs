//! The SQL of accounts, teams, sessions and tokens. Uniqueness and the "a team keeps an owner" rule
//! are enforced by Postgres (see migrations/20261130000004_accounts.sql); callers map violations.

use std::time::Duration;

use lachesis_shared::accounts::{Member, Membership, Role, TokenInfo};
use sqlx::{PgConnection, PgPool};

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

pub async fn role_in_team(db: &PgPool, user: i64, team: i64) -> Result<Option<Role>, sqlx::Error> {
    let role: Option<(String,)> =
        sqlx::query_as("SELECT role FROM memberships WHERE user_id = $1 AND team_id = $2")
            .bind(user)
            .bind(team)
            .fetch_optional(db)
            .await?;
    Ok(role.and_then(|(r,)| Role::parse(&r)))
}

/// The team's id and the user's role in it, looked up by the team's name.
pub async fn team_role_by_name(
    db: &PgPool,
    user: i64,
    team: &str,
) -> Result<Option<(i64, Role)>, sqlx::Error> {
    let row: Option<(i64, String)> = sqlx::query_as(
        "SELECT t.id, m.role FROM teams t JOIN memberships m ON m.team_id = t.id
         WHERE lower(t.name) = lower($1) AND m.user_id = $2",
    )
    .bind(team)
    .bind(user)
    .fetch_optional(db)
    .await?;
    Ok(row.and_then(|(id, role)| Role::parse(&role).map(|r| (id, r))))
}

pub async fn team_id_by_name(db: &PgPool, team: &str) -> Result<Option<i64>, sqlx::Error> {
    let row: Option<(i64,)> = sqlx::query_as("SELECT id FROM teams WHERE lower(name) = lower($1)")
        .bind(team)
        .fetch_optional(db)
        .await?;
    Ok(row.map(|(id,)| id))
}

pub async fn user_count(db: &PgPool) -> Result<i64, sqlx::Error> {
    let (n,): (i64,) = sqlx::query_as("SELECT count(*) FROM users")
        .fetch_one(db)
        .await?;
    Ok(n)
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

/// Creates a team with `owner` as its first owner.
/// Teams the user owns, counted while their row is held until the transaction ends, so that two
/// team creations at once are counted one after the other.
pub async fn lock_owned_teams(conn: &mut PgConnection, user: i64) -> Result<i64, sqlx::Error> {
    sqlx::query("SELECT id FROM users WHERE id = $1 FOR UPDATE")
        .bind(user)
        .execute(&mut *conn)
        .await?;
    sqlx::query_scalar("SELECT count(*) FROM memberships WHERE user_id = $1 AND role = 'owner'")
        .bind(user)
        .fetch_one(&mut *conn)
        .await
}

pub async fn create_team(
    conn: &mut PgConnection,
    name: &str,
    owner: i64,
) -> Result<i64, sqlx::Error> {
    let (id,): (i64,) = sqlx::query_as("INSERT INTO teams (name) VALUES ($1) RETURNING id")
        .bind(name)
        .fetch_one(&mut *conn)
        .await?;
    sqlx::query("INSERT INTO memberships (team_id, user_id, role) VALUES ($1, $2, 'owner')")
        .bind(id)
        .bind(owner)
        .execute(&mut *conn)
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

pub async fn memberships(db: &PgPool, user: i64) -> Result<Vec<Membership>, sqlx::Error> {
    let rows: Vec<(String, String)> = sqlx::query_as(
        "SELECT t.name, m.role FROM memberships m JOIN teams t ON t.id = m.team_id
         WHERE m.user_id = $1 ORDER BY lower(t.name)",
    )
    .bind(user)
    .fetch_all(db)
    .await?;
    Ok(rows
        .into_iter()
        .filter_map(|(team, role)| Role::parse(&role).map(|role| Membership { team, role }))
        .collect())
}

pub async fn members(db: &PgPool, team: i64) -> Result<Vec<Member>, sqlx::Error> {
    let rows: Vec<(String, String)> = sqlx::query_as(
        "SELECT u.username, m.role FROM memberships m JOIN users u ON u.id = m.user_id
         WHERE m.team_id = $1 ORDER BY lower(u.username)",
    )
    .bind(team)
    .fetch_all(db)
    .await?;
    Ok(rows
        .into_iter()
        .filter_map(|(username, role)| Role::parse(&role).map(|role| Member { username, role }))
        .collect())
}

/// Adds `username` to the team or changes their role; `false` when no such user exists.
pub async fn upsert_member(
    db: &PgPool,
    team: i64,
    username: &str,
    role: Role,
) -> Result<bool, sqlx::Error> {
    let done = sqlx::query(
        "INSERT INTO memberships (team_id, user_id, role)
         SELECT $1, id, $3 FROM users WHERE lower(username) = lower($2)
         ON CONFLICT (team_id, user_id) DO UPDATE SET role = EXCLUDED.role",
    )
    .bind(team)
    .bind(username)
    .bind(role.as_str())
    .execute(db)
    .await?;
    Ok(done.rows_affected() == 1)
}

pub async fn remove_member(db: &PgPool, team: i64, username: &str) -> Result<bool, sqlx::Error> {
    let done = sqlx::query(
        "DELETE FROM memberships m USING users u
         WHERE m.team_id = $1 AND m.user_id = u.id AND lower(u.username) = lower($2)",
    )
    .bind(team)
    .bind(username)
    .execute(db)
    .await?;
    Ok(done.rows_affected() == 1)
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
