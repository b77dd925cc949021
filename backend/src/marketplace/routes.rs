//! `/api/marketplace/...`: the cards with their live statistics (public), listing a team's card
//! and repricing or unlisting it (the owning team's owners only; the platform's cards, the admin).

use axum::extract::{Path, State};
use axum::routing::get;
use axum::{Json, Router};
use lachesis_shared::accounts::Role;
use lachesis_shared::marketplace::{AgentCard, JudgeBackend, NewCard, UpdateCard};

use crate::app::AppError;
use crate::app::AppState;
use crate::app::error::Body;
use crate::auth::Writer;
use crate::auth::{Viewer, store};

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/marketplace/cards", get(list).post(create))
        .route("/api/marketplace/cards/{slug}", get(one).patch(update))
}

async fn list(
    State(state): State<AppState>,
    viewer: Viewer,
) -> Result<Json<Vec<AgentCard>>, AppError> {
    let full_rights = viewer.is_full_rights();
    let cards = super::cards::list(&state.db, full_rights).await?;
    Ok(Json(
        cards
            .into_iter()
            .map(|card| shown_to(full_rights, card))
            .collect(),
    ))
}

/// Which server variable holds an operator card's key is the operator's business: others see
/// only that the card has a key.
fn shown_to(full_rights: bool, mut card: AgentCard) -> AgentCard {
    if let JudgeBackend::Openai { api_key_env, .. } = &mut card.judge
        && !full_rights
        && api_key_env.take().is_some()
    {
        card.has_api_key = true;
    }
    card
}

/// A listed card, to anyone; an unlisted one (its judge's configuration included) only to its
/// owners and the admin: to everyone else it does not exist.
async fn one(
    State(state): State<AppState>,
    viewer: Viewer,
    Path(slug): Path<String>,
) -> Result<Json<AgentCard>, AppError> {
    let (_, _, card) = super::cards::find(&state.db, &slug).await?;
    if !card.listed && !viewer.is_full_rights() {
        let owners = match card.owner_team.as_deref() {
            Some(team) => managing_team(&state, &viewer, team).await.is_ok(),
            None => false,
        };
        if !owners {
            return Err(AppError::NotFound("card"));
        }
    }
    Ok(Json(shown_to(viewer.is_full_rights(), card)))
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
    Writer(viewer): Writer,
    Body(card): Body<NewCard>,
) -> Result<Json<AgentCard>, AppError> {
    let team = managing_team(&state, &viewer, &card.owner.team).await?;
    super::cards::check_team_judge(&card.listing.judge).await?;
    super::cards::check_human_queue(&state.db, team, &card.listing.judge).await?;
    let sealed_key = match (&card.owner.api_key, &card.listing.judge) {
        (None, _) => None,
        (Some(_), judge) if !matches!(judge, JudgeBackend::Openai { .. }) => {
            return Err(AppError::Invalid(
                "only an openai judge's card carries an api_key".into(),
            ));
        }
        (Some(key), _) => {
            let secrets = state.hosting.secrets_key.as_ref().ok_or_else(|| {
                AppError::Invalid(
                    "this server keeps no endpoint keys: its operator has not set \
                     LACHESIS_SECRETS_KEY"
                        .into(),
                )
            })?;
            Some(
                secrets
                    .seal(&card.listing.slug, key)
                    .map_err(|e| AppError::Invalid(e.to_string()))?,
            )
        }
    };
    let limit = state.hosting.team_card_limit;
    Ok(Json(
        super::cards::create(&state.db, team, &card, sealed_key, limit).await?,
    ))
}

async fn update(
    State(state): State<AppState>,
    Writer(viewer): Writer,
    Path(slug): Path<String>,
    Body(change): Body<UpdateCard>,
) -> Result<Json<AgentCard>, AppError> {
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
    let limit = state.hosting.team_card_limit;
    Ok(Json(
        super::cards::update(&state.db, &slug, &change, limit).await?,
    ))
}
