//! `/api/teams` and `/api/teams/{team}/members`: teams are made and managed by signed-in people.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use lachesis_shared::accounts::{Member, Membership, NewTeam, Role};

use super::routes::check_name;
use super::{Viewer, store};
use crate::app::AppError;
use crate::app::AppState;
use crate::app::error::Body;
use crate::auth::Writer;

/// The signed-in user's id (teams are managed by people, not tokens).
pub(super) fn user_id(viewer: &Viewer) -> Result<i64, AppError> {
    match viewer {
        Viewer::User { id, .. } => Ok(*id),
        Viewer::Anonymous => Err(AppError::NotSignedIn),
        _ => Err(AppError::Forbidden("teams are managed by signed-in users")),
    }
}

/// The team's id when the caller holds at least `needed` in it; 404 otherwise.
pub(super) async fn team_for(
    state: &AppState,
    viewer: &Viewer,
    team: &str,
    needed: Role,
) -> Result<i64, AppError> {
    let user = user_id(viewer)?;
    match store::team_role_by_name(&state.db, user, team).await? {
        Some((id, role)) if role >= needed => Ok(id),
        Some(_) => Err(AppError::Forbidden("only the team's owners may do that")),
        None => Err(AppError::NotFound("team")),
    }
}

pub(super) async fn create_team(
    State(state): State<AppState>,
    Writer(viewer): Writer,
    Body(team): Body<NewTeam>,
) -> Result<Json<Membership>, AppError> {
    let user = user_id(&viewer)?;
    check_name("team", &team.name)?;
    let mut tx = state.db.begin().await?;
    let limit = state.accounts.teams_per_user;
    if store::lock_owned_teams(&mut tx, user).await? >= i64::from(limit) {
        return Err(AppError::Conflict(format!(
            "one person owns at most {limit} teams: hand one to another owner or leave it first"
        )));
    }
    store::create_team(&mut tx, &team.name, user)
        .await
        .map_err(|e| AppError::conflict_on_unique(e, "that team name is taken"))?;
    tx.commit().await?;
    Ok(Json(Membership {
        team: team.name,
        role: Role::Owner,
    }))
}

pub(super) async fn list_members(
    State(state): State<AppState>,
    viewer: Viewer,
    Path(team): Path<String>,
) -> Result<Json<Vec<Member>>, AppError> {
    let team = team_for(&state, &viewer, &team, Role::Viewer).await?;
    Ok(Json(store::members(&state.db, team).await?))
}

pub(super) async fn put_member(
    State(state): State<AppState>,
    Writer(viewer): Writer,
    Path(team): Path<String>,
    Body(member): Body<Member>,
) -> Result<Json<Member>, AppError> {
    let team = team_for(&state, &viewer, &team, Role::Owner).await?;
    check_name("user", &member.username)?;
    let added = store::upsert_member(&state.db, team, &member.username, member.role)
        .await
        .map_err(|e| AppError::conflict_on_unique(e, "a team keeps at least one owner"))?;
    if !added {
        return Err(AppError::NotFound("user"));
    }
    Ok(Json(member))
}

pub(super) async fn remove_member(
    State(state): State<AppState>,
    Writer(viewer): Writer,
    Path((team, username)): Path<(String, String)>,
) -> Result<StatusCode, AppError> {
    let team = team_for(&state, &viewer, &team, Role::Owner).await?;
    let removed = store::remove_member(&state.db, team, &username)
        .await
        .map_err(|e| AppError::conflict_on_unique(e, "a team keeps at least one owner"))?;
    if removed {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(AppError::NotFound("member"))
    }
}
