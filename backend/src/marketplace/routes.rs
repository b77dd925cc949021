//! `/api/marketplace/...`: the cards with their live statistics (public), listing a team's card
//! and repricing or unlisting it (the owning team's owners only; the platform's cards, the admin).

use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::routing::get;
use axum::{Json, Router};
use lachesis_shared::accounts::Role;
use lachesis_shared::marketplace::{AgentCard, NewCard, UpdateCard};

use crate::app::AppState;
use crate::auth::error::Body;
use crate::auth::{AppError, Viewer, store};

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/marketplace/cards", get(list).post(create))
        .route("/api/marketplace/cards/{slug}", get(one).patch(update))
}

async fn list(
    State(state): State<AppState>,
    viewer: Viewer,
) -> Result<Json<Vec<AgentCard>>, AppError> {
    Ok(Json(
        super::cards::list(&state.db, viewer.is_full_rights()).await?,
    ))
}

async fn one(
    State(state): State<AppState>,
    Path(slug): Path<String>,
) -> Result<Json<AgentCard>, AppError> {
    Ok(Json(super::cards::find(&state.db, &slug).await?.2))
}

/// The team's id when the caller may manage its cards: its owners, a token of that team with
/// write rights, or full rights.
async fn managing_team(state: &AppState, viewer: &Viewer, team: &str) -> Result<i64, AppError> {
    match viewer {
        Viewer::Open | Viewer::Admin => store::team_id_by_name(&state.db, team)
            .await?
            .ok_or(AppError::NotFound("team")),
        Viewer::User { id, .. } => match store::team_role_by_name(&state.db, *id, team).await? {
            Some((team, Role::Owner)) => Ok(team),
            Some(_) => Err(AppError::Forbidden(
                "only the team's owners manage its cards",
            )),
            None => Err(AppError::NotFound("team")),
        },
        Viewer::Token {
            team_id, read_only, ..
        } => {
            let named = store::team_id_by_name(&state.db, team).await?;
            match named {
                Some(named) if named == *team_id && !read_only => Ok(named),
                Some(named) if named == *team_id => Err(AppError::Forbidden("a read-only token")),
                _ => Err(AppError::NotFound("team")),
            }
        }
        Viewer::Anonymous => Err(AppError::NotSignedIn),
    }
}

async fn create(
    State(state): State<AppState>,
    viewer: Viewer,
    headers: HeaderMap,
    Body(card): Body<NewCard>,
) -> Result<Json<AgentCard>, AppError> {
    viewer.check_csrf(&headers)?;
    let team = managing_team(&state, &viewer, &card.team).await?;
    Ok(Json(super::cards::create(&state.db, team, &card).await?))
}

async fn update(
    State(state): State<AppState>,
    viewer: Viewer,
    headers: HeaderMap,
    Path(slug): Path<String>,
    Body(change): Body<UpdateCard>,
) -> Result<Json<AgentCard>, AppError> {
    viewer.check_csrf(&headers)?;
    let (_, owner, card) = super::cards::find(&state.db, &slug).await?;
    match (owner, card.owner_team.as_deref()) {
        (Some(_), Some(team)) => {
            managing_team(&state, &viewer, team)
                .await
                .map_err(|e| match e {
                    // The card is public; not being its owner is a refusal, not a secret.
                    AppError::NotFound(_) => {
                        AppError::Forbidden("only the card's owners may change it")
                    }
                    other => other,
                })?;
        }
        _ if viewer.is_full_rights() => {}
        _ => {
            return Err(AppError::Forbidden(
                "the platform's cards are changed by the admin",
            ));
        }
    }
    Ok(Json(super::cards::update(&state.db, &slug, &change).await?))
}
