//! `/api/arena/...`: contenders, visitors' voting tokens, battles, votes, the leaderboard and the
//! public export. Reading is open to everyone; voting needs a voter (see [`super::voter`]).

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Instant;

use axum::body::Body as HttpBody;
use axum::extract::{FromRequestParts, Path, Query, State};
use axum::http::request::Parts;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use lachesis_shared::arena::{
    ArenaKind, ArenaVoteEvent, BattleState, BattleView, ContenderPolicy, ContenderView,
    LeaderboardView, NewBattle, NewContender, NewVote, VisitorToken,
};
use lachesis_shared::live::{LiveEvent, Topic};
use serde::Deserialize;

use super::store::{self, ArenaStoreError, CastOutcome, StoredBattle};
use super::voter::{Voter, caller_address};
use super::{battles, board};
use crate::app::error::Body;
use crate::app::{AppError, AppState};
use crate::auth::Viewer;
use crate::hosting::rate::Limited;

const MAX_REASON_CHARS: usize = 1_000;
const MAX_REVEALS: usize = 16;
const MAX_RECENT: i64 = 200;
/// Battles per page while exporting: the export streams, never holding every battle at once.
const EXPORT_PAGE: i64 = 500;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/arena/contenders", get(contenders).post(add_contender))
        .route("/api/arena/visitors", post(new_visitor))
        .route("/api/arena/battles", get(recent).post(new_battle))
        .route("/api/arena/battles.jsonl", get(export))
        .route("/api/arena/battles/{id}", get(one))
        .route("/api/arena/battles/{id}/vote", post(vote))
        .route("/api/arena/leaderboard", get(leaderboard))
}

impl From<ArenaStoreError> for AppError {
    fn from(error: ArenaStoreError) -> Self {
        match error {
            ArenaStoreError::Database(e) => AppError::Database(e),
            other => AppError::Internal(other.to_string()),
        }
    }
}

fn limited(what: &'static str) -> impl Fn(Limited) -> AppError {
    move |l| AppError::RateLimited {
        what,
        retry_after_s: l.retry_after_secs,
    }
}

/// The battle as anyone may see it: identities and the environment's judge only once it is over.
pub fn view(b: &StoredBattle) -> BattleView {
    let over = matches!(b.state, BattleState::Voted | BattleState::Void);
    let answers_in = b.state != BattleState::Answering;
    BattleView {
        id: b.id,
        arena: b.arena,
        state: b.state,
        prompt: b.prompt.clone(),
        answer_a: b.answers[0].clone().filter(|_| answers_in),
        answer_b: b.answers[1].clone().filter(|_| answers_in),
        contender_a: over.then(|| b.contenders[0].clone()),
        contender_b: over.then(|| b.contenders[1].clone()),
        vote: b.vote,
        excluded: b.excluded.clone(),
        void_reason: b.void_reason.clone(),
        judged: over.then(|| {
            [0, 1].map(|side| match (&b.judged[side], &b.answers[side]) {
                (Some(judged), _) => judged.clone(),
                // Battles answered before verdicts were stored: the cheap arenas' judges.
                (None, Some(text)) => super::answer::judge(b.arena, b.seed, text),
                (None, None) => "no answer".to_string(),
            })
        }),
    }
}

async fn contenders(State(state): State<AppState>) -> Result<Json<Vec<ContenderView>>, AppError> {
    let all = store::contenders(&state.db).await?;
    Ok(Json(
        all.into_iter()
            .map(|c| ContenderView {
                id: c.id,
                name: c.name,
                kind: c.policy.label(),
                votes: c.votes,
            })
            .collect(),
    ))
}

/// Only the host enters contenders: an endpoint contender makes this server call a URL.
async fn add_contender(
    State(state): State<AppState>,
    viewer: Viewer,
    Body(body): Body<NewContender>,
) -> Result<Json<ContenderView>, AppError> {
    if !viewer.is_full_rights() {
        return Err(AppError::Forbidden(
            "only the server's admin enters contenders",
        ));
    }
    let name = body.name.trim();
    if name.is_empty() || name.chars().count() > 80 {
        return Err(AppError::Invalid(
            "a contender's name is 1 to 80 characters".into(),
        ));
    }
    if body.reveals.len() > MAX_REVEALS || body.reveals.iter().any(|r| r.chars().count() > 80) {
        return Err(AppError::Invalid(format!(
            "at most {MAX_REVEALS} reveal words of at most 80 characters"
        )));
    }
    match &body.policy {
        ContenderPolicy::Embedded {
            temperature,
            system,
            adapter,
        } => {
            let adapter_name = |name: &String| {
                (1..=64).contains(&name.len())
                    && name
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c))
            };
            if adapter.as_ref().is_some_and(|name| !adapter_name(name)) {
                return Err(AppError::Invalid(
                    "an adapter's name is 1 to 64 letters, digits and _.-".into(),
                ));
            }
            if !(0.0..=2.0).contains(temperature) {
                return Err(AppError::Invalid("temperature is between 0 and 2".into()));
            }
            if system.as_ref().is_some_and(|s| s.chars().count() > 2_000) {
                return Err(AppError::Invalid(
                    "a system prompt is at most 2000 characters".into(),
                ));
            }
        }
        ContenderPolicy::Endpoint { base_url, model } => {
            let url = reqwest::Url::parse(base_url)
                .map_err(|e| AppError::Invalid(format!("base_url: {e}")))?;
            if !matches!(url.scheme(), "http" | "https") || model.trim().is_empty() {
                return Err(AppError::Invalid(
                    "an endpoint is an http(s) base URL and a model name".into(),
                ));
            }
        }
    }
    let reveals: Vec<String> = body
        .reveals
        .iter()
        .map(|r| r.trim().to_lowercase())
        .filter(|r| !r.is_empty())
        .collect();
    let id = store::insert_contender(&state.db, name, &body.policy, &reveals)
        .await
        .map_err(|e| {
            AppError::conflict_on_unique(e, format!("a contender named {name:?} exists"))
        })?;
    Ok(Json(ContenderView {
        id,
        name: name.to_string(),
        kind: body.policy.label(),
        votes: 0,
    }))
}

/// The caller's address, for routes that take no voter.
struct Address(IpAddr);

impl FromRequestParts<AppState> for Address {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &AppState) -> Result<Self, Self::Rejection> {
        Ok(Address(caller_address(parts)))
    }
}

async fn new_visitor(
    State(state): State<AppState>,
    viewer: Viewer,
    Address(address): Address,
) -> Result<Json<VisitorToken>, AppError> {
    let arena = &state.arena;
    if arena.settings.voters == super::settings::ArenaVoters::Accounts && !viewer.is_full_rights() {
        return Err(AppError::Forbidden(
            "this arena takes votes from signed-in people only",
        ));
    }
    arena
        .visitor_rates
        .charge(&address, 1, &arena.settings.visitors, Instant::now())
        .map_err(limited("visitor tokens"))?;
    let token = crate::auth::secrets::random_secret();
    store::insert_visitor(
        &state.db,
        &crate::auth::secrets::token_hash(&token),
        &address.to_string(),
    )
    .await?;
    Ok(Json(VisitorToken { token }))
}

#[derive(Deserialize)]
struct ArenaQuery {
    arena: Option<String>,
    limit: Option<i64>,
    #[serde(default)]
    style_control: bool,
}

fn arena_of(query: &ArenaQuery) -> Result<ArenaKind, AppError> {
    match query.arena.as_deref() {
        None => Ok(ArenaKind::Catbot),
        Some(name) => ArenaKind::parse(name)
            .ok_or_else(|| AppError::Invalid(format!("no arena named {:?}", truncate(name)))),
    }
}

fn truncate(text: &str) -> String {
    text.chars().take(40).collect()
}

async fn new_battle(
    State(state): State<AppState>,
    voter: Voter,
    Body(body): Body<NewBattle>,
) -> Result<Json<BattleView>, AppError> {
    let battle = battles::deal(&state, &voter, body.arena).await?;
    Ok(Json(view(&battle)))
}

async fn recent(
    State(state): State<AppState>,
    Query(query): Query<ArenaQuery>,
) -> Result<Json<Vec<BattleView>>, AppError> {
    let limit = query.limit.unwrap_or(50).clamp(1, MAX_RECENT);
    let rows = store::recent_battles(&state.db, arena_of(&query)?, limit).await?;
    Ok(Json(rows.iter().map(view).collect()))
}

async fn one(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<BattleView>, AppError> {
    let id: i64 = id.parse().map_err(|_| AppError::NotFound("battle"))?;
    let battle = store::battle(&state.db, id)
        .await?
        .ok_or(AppError::NotFound("battle"))?;
    Ok(Json(view(&battle)))
}

async fn vote(
    State(state): State<AppState>,
    voter: Voter,
    Path(id): Path<String>,
    Body(body): Body<NewVote>,
) -> Result<Json<BattleView>, AppError> {
    let id: i64 = id.parse().map_err(|_| AppError::NotFound("battle"))?;
    let reason = body
        .reason
        .as_deref()
        .map(str::trim)
        .filter(|r| !r.is_empty());
    if reason.is_some_and(|r| r.chars().count() > MAX_REASON_CHARS) {
        return Err(AppError::Invalid(format!(
            "a reason is at most {MAX_REASON_CHARS} characters"
        )));
    }
    let arena = &state.arena;
    let now = Instant::now();
    arena
        .vote_rates
        .charge(&voter.key, 1, &arena.settings.votes, now)
        .map_err(limited("votes"))?;
    arena
        .address_vote_rates
        .charge(&voter.address, 1, &arena.settings.address_votes, now)
        .map_err(limited("votes from this address"))?;
    let filters = arena.filters();
    let address = voter.address.to_string();
    let ballot = store::Ballot {
        battle: id,
        voter: &voter.key,
        address: &address,
        choice: body.choice,
        reason,
    };
    let announce = |cast: store::CastVote| {
        let event = LiveEvent::ArenaVote(ArenaVoteEvent {
            arena: cast.arena,
            battle: id,
            contenders: cast.contenders,
            choice: body.choice,
            counted: cast.counted,
        });
        let topic = Topic::Arena { arena: cast.arena };
        crate::live::bridge::payload(&topic, &event)
            .map(|payload| (crate::live::bridge::CHANNEL, payload))
    };
    let outcome = store::cast_vote(
        &state.db,
        &ballot,
        filters.same_side_run as i64,
        |taken, earlier| {
            super::integrity::exclusion(
                &filters,
                std::time::Duration::from_secs_f64(taken),
                body.choice,
                earlier,
            )
        },
        announce,
    )
    .await?;
    match outcome {
        CastOutcome::Cast { .. } => {}
        CastOutcome::NotFound => return Err(AppError::NotFound("battle")),
        CastOutcome::NotYours => {
            return Err(AppError::Forbidden("this battle was dealt to someone else"));
        }
        CastOutcome::StillAnswering => {
            return Err(AppError::Conflict(
                "the contenders are still answering: vote once both answers are in".into(),
            ));
        }
        CastOutcome::AlreadyVoted => {
            return Err(AppError::Conflict(
                "this battle already has your vote".into(),
            ));
        }
        CastOutcome::Void => {
            return Err(AppError::Conflict(
                "this battle was voided (an answer gave a contender away): deal a new one".into(),
            ));
        }
    }
    // The vote's announcement went out with its commit.
    let battle = store::battle(&state.db, id)
        .await?
        .ok_or(AppError::NotFound("battle"))?;
    Ok(Json(view(&battle)))
}

async fn leaderboard(
    State(state): State<AppState>,
    Query(query): Query<ArenaQuery>,
) -> Result<Json<LeaderboardView>, AppError> {
    let fitted = board_of(&state, arena_of(&query)?, query.style_control).await?;
    Ok(Json(fitted.view.clone()))
}

/// The arena's leaderboard, fitted again only when a vote arrived since the cached fit.
pub async fn board_of(
    state: &AppState,
    arena: ArenaKind,
    style: bool,
) -> Result<Arc<board::Fitted>, AppError> {
    let cache = &state.arena.boards;
    let last = store::last_vote(&state.db, arena).await?;
    if let Some(fitted) = cache.get(arena, style, last) {
        return Ok(fitted);
    }
    let _fitting = cache.fitting().await;
    let last = store::last_vote(&state.db, arena).await?;
    if let Some(fitted) = cache.get(arena, style, last) {
        return Ok(fitted);
    }
    let votes = store::votes(&state.db, arena).await?;
    let contenders = store::contenders(&state.db).await?;
    let rounds = state.arena.settings.bootstrap_rounds;
    let fitted = tokio::task::spawn_blocking(move || {
        board::fit(arena, style, last, &votes, &contenders, rounds)
    })
    .await
    .map_err(|e| AppError::Internal(format!("the leaderboard fit stopped: {e}")))?
    .map_err(|e| AppError::Internal(format!("the leaderboard fit failed: {e}")))?;
    let fitted = Arc::new(fitted);
    cache.put(arena, style, fitted.clone());
    Ok(fitted)
}

/// Every finished battle, voted or void, as JSON lines in Chatbot Arena's shape (`model_a`,
/// `model_b`, `winner`) with our fields beside it: `excluded` flags a vote the filters keep out of
/// the ratings, `void` a battle that took no vote.
async fn export(
    State(state): State<AppState>,
    Query(query): Query<ArenaQuery>,
) -> Result<Response, AppError> {
    let arena = arena_of(&query)?;
    let db = state.db.clone();
    let lines = futures::stream::try_unfold(0_i64, move |after| {
        let db = db.clone();
        async move {
            let page = store::export_page(&db, arena, after, EXPORT_PAGE)
                .await
                .map_err(|e| std::io::Error::other(e.to_string()))?;
            let Some(last) = page.last().map(|r| r.battle) else {
                return Ok::<_, std::io::Error>(None);
            };
            let mut chunk = Vec::new();
            for row in &page {
                serde_json::to_writer(&mut chunk, row).map_err(std::io::Error::other)?;
                chunk.push(b'\n');
            }
            Ok(Some((bytes::Bytes::from(chunk), last)))
        }
    });
    let mut response = HttpBody::from_stream(lines).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/x-ndjson"),
    );
    response.headers_mut().insert(
        header::CONTENT_DISPOSITION,
        HeaderValue::from_static("attachment; filename=\"arena-battles.jsonl\""),
    );
    Ok(response)
}
