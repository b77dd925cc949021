//! `/api/teams/{team}/tokens`: a team's API tokens, managed by its owners. A token may be limited
//! to one run, to reading, and in time; calling the embedded model is a scope of its own.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use lachesis_shared::accounts::{CreatedToken, NewToken, Role, TokenInfo};

use super::teams::{team_for, user_id};
use super::{Viewer, secrets, store};
use crate::app::AppError;
use crate::app::AppState;
use crate::app::error::Body;
use crate::auth::Writer;
use crate::trajectory::valid_run_name;

/// The longest token name, in characters (the table's CHECK agrees).
const MAX_TOKEN_NAME_CHARS: usize = 100;

pub(super) async fn list_tokens(
    State(state): State<AppState>,
    viewer: Viewer,
    Path(team): Path<String>,
) -> Result<Json<Vec<TokenInfo>>, AppError> {
    let team = team_for(&state, &viewer, &team, Role::Owner).await?;
    Ok(Json(store::tokens(&state.db, team).await?))
}

pub(super) async fn create_token(
    State(state): State<AppState>,
    Writer(viewer): Writer,
    Path(team_name): Path<String>,
    Body(new): Body<NewToken>,
) -> Result<Json<CreatedToken>, AppError> {
    let team = team_for(&state, &viewer, &team_name, Role::Owner).await?;
    let name = new.name.trim();
    if name.is_empty()
        || name.chars().count() > MAX_TOKEN_NAME_CHARS
        || name.chars().any(char::is_control)
    {
        return Err(AppError::Invalid(format!(
            "token names are 1-{MAX_TOKEN_NAME_CHARS} characters, none of them control characters"
        )));
    }
    let max_days = state.accounts.token_max_days;
    if let Some(days) = new.expires_in_days
        && !(1..=max_days).contains(&days)
    {
        return Err(AppError::Invalid(format!(
            "expires_in_days is 1 to {max_days} (or absent: until revoked)"
        )));
    }
    if let Some(run) = &new.run {
        if !valid_run_name(run) {
            return Err(AppError::Invalid("invalid run name".into()));
        }
        // A token for a run the team does not have yet creates it for the team.
        store::create_team_run(&state.db, run, team).await?;
        match store::run_owner(&state.db, run).await? {
            Some(owner) if owner.team_id == Some(team) => {}
            _ => return Err(AppError::NotFound("run")),
        }
    }
    let secret = secrets::new_api_token();
    let row = store::NewTokenRow {
        team,
        name,
        run: new.run.as_deref(),
        read_only: new.read_only,
        inference: new.inference,
        expires_in_days: new.expires_in_days,
        created_by: user_id(&viewer).ok(),
    };
    let info = store::create_token(&state.db, &row, &secret).await?;
    Ok(Json(CreatedToken {
        info,
        token: secret,
    }))
}

pub(super) async fn revoke_token(
    State(state): State<AppState>,
    Writer(viewer): Writer,
    Path((team, id)): Path<(String, i64)>,
) -> Result<StatusCode, AppError> {
    let team = team_for(&state, &viewer, &team, Role::Owner).await?;
    if store::revoke_token(&state.db, team, id).await? {
        state.auth.forget_cached();
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(AppError::NotFound("token"))
    }
}
