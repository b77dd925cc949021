//! Sign-up (`POST /api/auth/register`) and invites (`POST /api/teams/{team}/invites`).
//!
//! On a public server anyone can reach sign-up, so everything cheap is refused before the one
//! costly step, hashing the password: a closed server, a missing or dead invite, a bad name, a
//! taken name. Then each client address (an IPv6 /64) may create a few accounts an hour, counted
//! before hashing so a flood cannot overshoot, and the hash itself waits for the argon2 gate.

use axum::Json;
use axum::extract::{ConnectInfo, Path, State};
use axum::response::Response;
use lachesis_shared::accounts::{CreatedInvite, NewAccount, Registration, Role};
use sqlx::{PgConnection, PgPool};

use super::limiter::client_key;
use super::routes::{check_name, check_password, signed_in};
use super::secrets::{self, INVITE_PREFIX};
use super::store;
use super::teams::{team_for, user_id};
use crate::app::AppError;
use crate::app::AppState;
use crate::app::error::Body;
use crate::auth::Writer;

const DEAD_INVITE: AppError = AppError::Forbidden("that invite code is unknown, used or expired");

/// Sign-up: a user with no team (or owning the new team named in the body), who also joins the
/// team of the invite given, if any.
pub(super) async fn register(
    State(state): State<AppState>,
    ConnectInfo(peer): ConnectInfo<std::net::SocketAddr>,
    Body(account): Body<NewAccount>,
) -> Result<Response, AppError> {
    let policy = &state.accounts;
    match (policy.registration, &account.invite) {
        (Registration::Closed, _) => {
            return Err(AppError::Forbidden("registration is closed on this server"));
        }
        (Registration::Invite, None) => {
            return Err(AppError::Forbidden(
                "registration on this server needs an invite code from a team owner",
            ));
        }
        _ => {}
    }
    check_name("user", &account.username)?;
    if let Some(team) = &account.team {
        check_name("team", team)?;
    }
    check_password(&account.password)?;
    if let Some(code) = &account.invite
        && !invite_is_open(&state.db, code).await?
    {
        return Err(DEAD_INVITE);
    }
    // Taken names answer before the hash; the unique indexes still decide a race below.
    if store::user_by_name(&state.db, &account.username)
        .await?
        .is_some()
    {
        return Err(AppError::Conflict("that username is taken".into()));
    }
    if let Some(team) = &account.team
        && store::team_id_by_name(&state.db, team).await?.is_some()
    {
        return Err(AppError::Conflict("that team name is taken".into()));
    }
    policy
        .registrations
        .acquire(&client_key(peer.ip()))
        .map_err(|retry_after_s| AppError::TooManySignUps { retry_after_s })?;
    let hash = policy.hashing.hash(account.password).await?;
    let mut tx = state.db.begin().await?;
    let user = store::create_user(&mut tx, &account.username, &hash)
        .await
        .map_err(|e| AppError::conflict_on_unique(e, "that username is taken"))?;
    if let Some(team) = &account.team {
        store::create_team(&mut tx, team, user)
            .await
            .map_err(|e| AppError::conflict_on_unique(e, "that team name is taken"))?;
    }
    if let Some(code) = &account.invite {
        // Dropping the transaction undoes the new user when the code went meanwhile.
        let team = claim_invite(&mut tx, code, user)
            .await?
            .ok_or(DEAD_INVITE)?;
        store::join_team(&mut tx, team, user, Role::Member).await?;
    }
    tx.commit().await?;
    signed_in(&state, user, account.username).await
}

/// A new single-use invite into the team (owners only), valid for the policy's days.
pub(super) async fn create_invite(
    State(state): State<AppState>,
    Writer(viewer): Writer,
    Path(team): Path<String>,
) -> Result<Json<CreatedInvite>, AppError> {
    let team = team_for(&state, &viewer, &team, Role::Owner).await?;
    let code = secrets::new_invite_code();
    let expires_at_ms = store::create_invite(
        &state.db,
        team,
        &code,
        user_id(&viewer).ok(),
        state.accounts.invite_days,
    )
    .await?;
    Ok(Json(CreatedInvite {
        code,
        expires_at_ms,
    }))
}

/// Whether `code` names an unused, unexpired invite (a cheap look before hashing a password).
async fn invite_is_open(db: &PgPool, code: &str) -> Result<bool, sqlx::Error> {
    Ok(plausible_code(code) && store::invite_is_open(db, code).await?)
}

/// Marks the invite used by `user` and returns its team; `None` when it is unknown, used or
/// expired.
async fn claim_invite(
    conn: &mut PgConnection,
    code: &str,
    user: i64,
) -> Result<Option<i64>, sqlx::Error> {
    if !plausible_code(code) {
        return Ok(None);
    }
    store::claim_invite(conn, code, user).await
}

/// Codes are the prefix and 64 hex digits; anything else is not looked up at all.
fn plausible_code(code: &str) -> bool {
    code.strip_prefix(INVITE_PREFIX)
        .is_some_and(|hex| hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_well_formed_codes_are_looked_up() {
        assert!(plausible_code(&secrets::new_invite_code()));
        assert!(!plausible_code("inv_"));
        assert!(!plausible_code(&"inv_".repeat(100_000)));
        assert!(!plausible_code(&secrets::new_api_token()));
    }
}
