//! The SQL of teams, memberships and invites, and which teams' things a caller sees.

use lachesis_shared::accounts::{Member, Membership, Role};
use sqlx::{PgConnection, PgPool};

use crate::auth::Viewer;
use crate::auth::secrets::token_hash;

/// Which teams' runs, ledger accounts and budgets a caller sees (public runs and the platform's
/// accounts aside, which each resource decides on).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TeamReach {
    /// Full rights (accounts off, or the admin token): every team's, and what belongs to none.
    All,
    /// A user's teams, or a token's one team; `run` is a run-scoped token's run, to which the
    /// resources that list runs narrow it.
    Teams {
        teams: Vec<i64>,
        run: Option<String>,
    },
    /// Nobody signed in: no team's. Each resource decides whether to refuse or to show only
    /// what is public.
    Anonymous,
}

impl TeamReach {
    /// The teams as a filter: `None` for all of them; an anonymous caller's is empty.
    pub fn team_ids(&self) -> Option<&[i64]> {
        match self {
            TeamReach::All => None,
            TeamReach::Teams { teams, .. } => Some(teams),
            TeamReach::Anonymous => Some(&[]),
        }
    }
}

/// The one answer to "which teams does this caller see": a user's memberships, a token's team.
pub async fn team_reach(db: &PgPool, viewer: &Viewer) -> Result<TeamReach, sqlx::Error> {
    Ok(match viewer {
        Viewer::Open | Viewer::Admin => TeamReach::All,
        Viewer::User { id, .. } => TeamReach::Teams {
            teams: sqlx::query_scalar("SELECT team_id FROM memberships WHERE user_id = $1")
                .bind(id)
                .fetch_all(db)
                .await?,
            run: None,
        },
        Viewer::Token { team_id, run, .. } => TeamReach::Teams {
            teams: vec![*team_id],
            run: run.clone(),
        },
        Viewer::Anonymous => TeamReach::Anonymous,
    })
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

/// Creates a team with `owner` as its first owner.
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

/// The memberships of `user` (by team name) or of `team` (by username), whichever is given:
/// (team name, username, role); a role this code does not know is left out.
async fn membership_rows(
    db: &PgPool,
    user: Option<i64>,
    team: Option<i64>,
) -> Result<Vec<(String, String, Role)>, sqlx::Error> {
    let rows = sqlx::query!(
        "SELECT t.name AS team, u.username, m.role
         FROM memberships m JOIN teams t ON t.id = m.team_id JOIN users u ON u.id = m.user_id
         WHERE m.user_id = $1 OR m.team_id = $2
         ORDER BY lower(CASE WHEN $1::BIGINT IS NULL THEN u.username ELSE t.name END)",
        user,
        team
    )
    .fetch_all(db)
    .await?;
    Ok(rows
        .into_iter()
        .filter_map(|row| Role::parse(&row.role).map(|role| (row.team, row.username, role)))
        .collect())
}

pub async fn memberships(db: &PgPool, user: i64) -> Result<Vec<Membership>, sqlx::Error> {
    let rows = membership_rows(db, Some(user), None).await?;
    Ok(rows
        .into_iter()
        .map(|(team, _, role)| Membership { team, role })
        .collect())
}

pub async fn members(db: &PgPool, team: i64) -> Result<Vec<Member>, sqlx::Error> {
    let rows = membership_rows(db, None, Some(team)).await?;
    Ok(rows
        .into_iter()
        .map(|(_, username, role)| Member { username, role })
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

/// Adds `user` to `team` with `role`; a member already there keeps the role they have.
pub async fn join_team(
    conn: &mut PgConnection,
    team: i64,
    user: i64,
    role: Role,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "INSERT INTO memberships (team_id, user_id, role) VALUES ($1, $2, $3)
         ON CONFLICT (team_id, user_id) DO NOTHING",
    )
    .bind(team)
    .bind(user)
    .bind(role.as_str())
    .execute(conn)
    .await?;
    Ok(())
}

/// Stores a single-use invite into `team` (its code's hash), valid for `days`; returns when it
/// expires (ms since the epoch).
pub async fn create_invite(
    db: &PgPool,
    team: i64,
    code: &str,
    created_by: Option<i64>,
    days: u32,
) -> Result<i64, sqlx::Error> {
    let (expires_at_ms,): (i64,) = sqlx::query_as(
        "INSERT INTO invites (team_id, code_hash, created_by, expires_at)
         VALUES ($1, $2, $3, now() + make_interval(days => $4))
         RETURNING (extract(epoch FROM expires_at) * 1000)::bigint",
    )
    .bind(team)
    .bind(token_hash(code))
    .bind(created_by)
    .bind(i32::try_from(days).unwrap_or(i32::MAX))
    .fetch_one(db)
    .await?;
    Ok(expires_at_ms)
}

/// Whether `code` names an unused, unexpired invite.
pub async fn invite_is_open(db: &PgPool, code: &str) -> Result<bool, sqlx::Error> {
    let (open,): (bool,) = sqlx::query_as(
        "SELECT EXISTS (SELECT 1 FROM invites
                        WHERE code_hash = $1 AND used_at IS NULL AND expires_at > now())",
    )
    .bind(token_hash(code))
    .fetch_one(db)
    .await?;
    Ok(open)
}

/// Marks the invite used by `user` and returns its team; `None` when it is unknown, used or
/// expired. The row lock of the UPDATE makes a second claimant see `used_at` already set.
pub async fn claim_invite(
    conn: &mut PgConnection,
    code: &str,
    user: i64,
) -> Result<Option<i64>, sqlx::Error> {
    let team: Option<(i64,)> = sqlx::query_as(
        "UPDATE invites SET used_by = $2, used_at = now()
         WHERE code_hash = $1 AND used_at IS NULL AND expires_at > now()
         RETURNING team_id",
    )
    .bind(token_hash(code))
    .bind(user)
    .fetch_optional(conn)
    .await?;
    Ok(team.map(|(team,)| team))
}
