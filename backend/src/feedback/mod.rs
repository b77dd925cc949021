//! `/api/feedback/...`: queues of items people judge — rank a group's answers, rate an answer,
//! compare a pair — with guidelines, an overlap (how many different people see each item), how
//! far they agree, and exports a trainer reads (preference pairs for DPO, ratings).
//!
//! A queue belongs to a team: its members (any role) judge it, owners and members fill it, and a
//! team token may fill it and read it (a program feeding items). Annotators are signed-in people.

pub mod agreement;
mod checks;
pub mod earnings;
pub mod signals;
pub mod store;

use std::collections::BTreeMap;

use axum::extract::{Path, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use lachesis_shared::accounts::Role;
use lachesis_shared::feedback::{
    AgreementReport, AnnotatorAgreement, ItemAgreement, Judgement, NewItems, NewJudgement,
    PairChoice, PairKappa, QueueView,
};
use serde::Deserialize;

use self::checks::{check_item, check_judgement};
use self::store::{ExportRow, FeedbackStoreError, Judged, JudgementRow, QueueScope, StoredQueue};
use crate::app::error::Body;
use crate::app::{AppError, AppState};
use crate::auth::store::role_in_team;
use crate::auth::{Viewer, Writer};

/// Longest prompt or answer, in characters.
const MAX_TEXT_CHARS: usize = 20_000;
/// Items added in one request.
const MAX_ITEMS_PER_REQUEST: usize = 500;
/// Items a queue holds unless the server says otherwise (`--feedback-queue-items`).
pub const DEFAULT_QUEUE_ITEMS: i64 = 20_000;
/// Judgements per page of an export (each carries its item's texts: at most some 340 KB).
const EXPORT_PAGE: i64 = 50;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/feedback/queues", get(list).post(open))
        .route("/api/feedback/queues/{id}/items", post(add_items))
        .route("/api/feedback/queues/{id}/next", get(next))
        .route("/api/feedback/queues/{id}/agreement", get(agreement_of))
        .route("/api/feedback/queues/{id}/pairs.jsonl", get(pairs))
        .route("/api/feedback/queues/{id}/ratings.jsonl", get(ratings))
        .route("/api/feedback/items/{item}/judgements", post(judge))
        .merge(earnings::routes())
        .merge(signals::routes())
}

impl From<FeedbackStoreError> for AppError {
    fn from(error: FeedbackStoreError) -> Self {
        match error {
            FeedbackStoreError::Database(e) => AppError::Database(e),
            other => AppError::Internal(other.to_string()),
        }
    }
}

/// What a caller may do with a queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Access {
    /// See it, its agreement and exports; judge it if a person.
    Read,
    /// Also add items.
    Fill,
}

/// The caller's access to a queue of `team`, or `None` (answered as not found).
async fn access(
    state: &AppState,
    viewer: &Viewer,
    team: Option<i64>,
) -> Result<Option<Access>, AppError> {
    Ok(match (viewer, team) {
        (Viewer::Open | Viewer::Admin, _) => Some(Access::Fill),
        (Viewer::User { id, .. }, Some(team)) => match role_in_team(&state.db, *id, team).await? {
            Some(Role::Owner | Role::Member) => Some(Access::Fill),
            Some(Role::Viewer) => Some(Access::Read),
            None => None,
        },
        (
            Viewer::Token {
                team_id, read_only, ..
            },
            Some(team),
        ) if *team_id == team => Some(if *read_only {
            Access::Read
        } else {
            Access::Fill
        }),
        _ => None,
    })
}

/// Queue `id` if the caller has at least `needed` on it.
async fn queue_for(
    state: &AppState,
    viewer: &Viewer,
    id: &str,
    needed: Access,
) -> Result<StoredQueue, AppError> {
    let id: i64 = id.parse().map_err(|_| AppError::NotFound("queue"))?;
    let queue = store::queues(&state.db, Some(id), QueueScope::All)
        .await?
        .pop()
        .ok_or(AppError::NotFound("queue"))?;
    match access(state, viewer, queue.team_id).await? {
        Some(have) if have >= needed => Ok(queue),
        Some(_) => Err(AppError::Forbidden("you may read this queue, not fill it")),
        None => Err(AppError::NotFound("queue")),
    }
}

async fn list(
    State(state): State<AppState>,
    viewer: Viewer,
) -> Result<Json<Vec<QueueView>>, AppError> {
    let scope = match &viewer {
        Viewer::Open | Viewer::Admin => QueueScope::All,
        Viewer::User { id, .. } => QueueScope::MemberOf(*id),
        Viewer::Token { team_id, .. } => QueueScope::Team(*team_id),
        Viewer::Anonymous => return Err(AppError::NotSignedIn),
    };
    let queues = store::queues(&state.db, None, scope).await?;
    Ok(Json(queues.into_iter().map(|q| q.view).collect()))
}

#[derive(Deserialize)]
struct OpenQueue {
    /// The team's name; may be absent only for the server's admin.
    #[serde(default)]
    team: Option<String>,
    #[serde(flatten)]
    queue: lachesis_shared::feedback::NewQueue,
}

async fn open(
    State(state): State<AppState>,
    Writer(viewer): Writer,
    Body(body): Body<OpenQueue>,
) -> Result<Json<QueueView>, AppError> {
    let q = &body.queue;
    let name = q.name.trim();
    if name.is_empty() || name.chars().count() > 80 {
        return Err(AppError::Invalid(
            "a queue's name is 1 to 80 characters".into(),
        ));
    }
    if q.guidelines.chars().count() > MAX_TEXT_CHARS {
        return Err(AppError::Invalid(format!(
            "guidelines are at most {MAX_TEXT_CHARS} characters"
        )));
    }
    if !(1..=20).contains(&q.overlap) {
        return Err(AppError::Invalid(
            "overlap is 1 to 20 people per item".into(),
        ));
    }
    let team = match &body.team {
        Some(team) => Some(
            crate::auth::store::team_id_by_name(&state.db, team)
                .await?
                .ok_or(AppError::NotFound("team"))?,
        ),
        None if viewer.is_full_rights() => None,
        None => {
            return Err(AppError::Invalid(
                "name the team the queue belongs to".into(),
            ));
        }
    };
    if access(&state, &viewer, team).await? != Some(Access::Fill) {
        return Err(AppError::NotFound("team"));
    }
    let id = store::insert_queue(
        &state.db,
        team,
        name,
        q.kind,
        &q.guidelines,
        q.overlap as i32,
    )
    .await
    .map_err(|e| AppError::conflict_on_unique(e, format!("a queue named {name:?} exists")))?;
    let queue = store::queues(&state.db, Some(id), QueueScope::All)
        .await?
        .pop()
        .ok_or(AppError::NotFound("queue"))?;
    Ok(Json(queue.view))
}

async fn add_items(
    State(state): State<AppState>,
    Writer(viewer): Writer,
    Path(id): Path<String>,
    Body(body): Body<NewItems>,
) -> Result<Json<serde_json::Value>, AppError> {
    let queue = queue_for(&state, &viewer, &id, Access::Fill).await?;
    if body.items.is_empty() || body.items.len() > MAX_ITEMS_PER_REQUEST {
        return Err(AppError::Invalid(format!(
            "add 1 to {MAX_ITEMS_PER_REQUEST} items at a time"
        )));
    }
    for (k, item) in body.items.iter().enumerate() {
        check_item(queue.view.kind, item)
            .map_err(|why| AppError::Invalid(format!("item {k}: {why}")))?;
    }
    let cap = state.hosting.feedback_queue_items;
    let added = store::insert_items(&state.db, queue.view.id, &body.items, cap, None)
        .await?
        .ok_or_else(|| {
            AppError::Conflict(format!(
                "a queue holds at most {cap} items on this server (--feedback-queue-items); \
                 open another queue"
            ))
        })?;
    Ok(Json(serde_json::json!({ "added": added.len() })))
}

/// The signed-in person judging, or why not.
fn annotator(viewer: &Viewer) -> Result<i64, AppError> {
    match viewer {
        Viewer::User { id, .. } => Ok(*id),
        Viewer::Anonymous => Err(AppError::NotSignedIn),
        _ => Err(AppError::Forbidden(
            "judgements come from signed-in people, not tokens or the admin",
        )),
    }
}

async fn next(
    State(state): State<AppState>,
    viewer: Viewer,
    Path(id): Path<String>,
) -> Result<Response, AppError> {
    let queue = queue_for(&state, &viewer, &id, Access::Read).await?;
    let me = annotator(&viewer)?;
    Ok(match store::next_item(&state.db, &queue.view, me).await? {
        Some(item) => Json(item).into_response(),
        None => StatusCode::NO_CONTENT.into_response(),
    })
}

async fn judge(
    State(state): State<AppState>,
    Writer(viewer): Writer,
    Path(item): Path<String>,
    Body(body): Body<NewJudgement>,
) -> Result<Json<serde_json::Value>, AppError> {
    let item: i64 = item.parse().map_err(|_| AppError::NotFound("item"))?;
    let rules = store::item_rules(&state.db, item)
        .await?
        .ok_or(AppError::NotFound("item"))?;
    let queue = queue_for(&state, &viewer, &rules.queue.to_string(), Access::Read).await?;
    let me = annotator(&viewer)?;
    check_judgement(queue.view.kind, rules.answers, &body.judgement).map_err(AppError::Invalid)?;
    match store::judge(&state.db, item, me, &body.judgement).await? {
        Judged::Stored => Ok(Json(serde_json::json!({ "item": item }))),
        Judged::AlreadyJudged => Err(AppError::Conflict("you have judged this item".into())),
        Judged::Complete => Err(AppError::Conflict(
            "this item has all the judgements its queue asks for".into(),
        )),
        Judged::Closed => Err(AppError::Conflict(
            "this item is closed: the round that asked for it has ended".into(),
        )),
        Judged::NotFound => Err(AppError::NotFound("item")),
    }
}

async fn agreement_of(
    State(state): State<AppState>,
    viewer: Viewer,
    Path(id): Path<String>,
) -> Result<Json<AgreementReport>, AppError> {
    let queue = queue_for(&state, &viewer, &id, Access::Read).await?;
    let rows = store::judgements(&state.db, queue.view.id).await?;
    Ok(Json(report(queue.view.id, &rows)))
}

/// Agreement figures from a queue's judgements.
pub fn report(queue: i64, rows: &[JudgementRow]) -> AgreementReport {
    let mut by_item: BTreeMap<i64, Vec<&JudgementRow>> = BTreeMap::new();
    for row in rows {
        by_item.entry(row.item).or_default().push(row);
    }
    let grouped: Vec<Vec<&Judgement>> = by_item
        .values()
        .map(|rows| rows.iter().map(|r| &r.judgement).collect())
        .collect();
    let (units, metric) = agreement::units(&grouped);
    let alpha = agreement::krippendorff_alpha(&units, metric);
    let mut items = Vec::new();
    let mut per_annotator: BTreeMap<&str, (usize, f64, usize)> = BTreeMap::new();
    for (item, judged) in &by_item {
        for row in judged {
            per_annotator.entry(row.annotator.as_str()).or_default().0 += 1;
        }
        if judged.len() < 2 {
            continue;
        }
        let mut sum = 0.0;
        let mut pairs = 0;
        for (i, a) in judged.iter().enumerate() {
            for b in &judged[i + 1..] {
                if let Some(agree) = agreement::pair_agreement(&a.judgement, &b.judgement) {
                    sum += agree;
                    pairs += 1;
                    for who in [a.annotator.as_str(), b.annotator.as_str()] {
                        let entry = per_annotator.entry(who).or_default();
                        entry.1 += agree;
                        entry.2 += 1;
                    }
                }
            }
        }
        if pairs > 0 {
            items.push(ItemAgreement {
                item: *item,
                judgements: judged.len(),
                agreement: sum / pairs as f64,
            });
        }
    }
    let annotators = per_annotator
        .into_iter()
        .map(|(who, (judgements, sum, pairs))| AnnotatorAgreement {
            annotator: who.to_string(),
            judgements,
            agreement: (pairs > 0).then(|| sum / pairs as f64),
        })
        .collect();
    AgreementReport {
        queue,
        alpha,
        kappas: kappas(&by_item),
        items,
        annotators,
    }
}

/// Cohen's kappa for every pair of annotators who compared the same items.
fn kappas(by_item: &BTreeMap<i64, Vec<&JudgementRow>>) -> Vec<PairKappa> {
    let mut choices: BTreeMap<(&str, &str), Vec<(PairChoice, PairChoice)>> = BTreeMap::new();
    for judged in by_item.values() {
        for (i, a) in judged.iter().enumerate() {
            for b in &judged[i + 1..] {
                if let (Judgement::Compare { choice: x }, Judgement::Compare { choice: y }) =
                    (&a.judgement, &b.judgement)
                {
                    let (first, second, x, y) = if a.annotator <= b.annotator {
                        (a.annotator.as_str(), b.annotator.as_str(), *x, *y)
                    } else {
                        (b.annotator.as_str(), a.annotator.as_str(), *y, *x)
                    };
                    choices.entry((first, second)).or_default().push((x, y));
                }
            }
        }
    }
    choices
        .into_iter()
        .map(|((first, second), pairs)| PairKappa {
            first: first.to_string(),
            second: second.to_string(),
            shared: pairs.len(),
            kappa: agreement::cohen_kappa(&pairs),
        })
        .collect()
}

/// A queue's judgements as JSON lines, one `line` per judgement that gives one, streamed a page
/// at a time: an export never holds more than a page of items' texts.
fn export(
    state: &AppState,
    queue: i64,
    name: &'static str,
    line: fn(&ExportRow) -> Option<serde_json::Value>,
) -> Response {
    let db = state.db.clone();
    let lines = futures::stream::try_unfold(0_i64, move |after| {
        let db = db.clone();
        async move {
            let page = store::export_page(&db, queue, after, EXPORT_PAGE)
                .await
                .map_err(|e| std::io::Error::other(e.to_string()))?;
            let Some(last) = page.last().map(|r| r.id) else {
                return Ok::<_, std::io::Error>(None);
            };
            let mut chunk = Vec::new();
            for value in page.iter().filter_map(line) {
                serde_json::to_writer(&mut chunk, &value).map_err(std::io::Error::other)?;
                chunk.push(b'\n');
            }
            Ok(Some((bytes::Bytes::from(chunk), last)))
        }
    });
    let mut response = axum::body::Body::from_stream(lines).into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/x-ndjson"),
    );
    if let Ok(disposition) = HeaderValue::from_str(&format!("attachment; filename=\"{name}\"")) {
        headers.insert(header::CONTENT_DISPOSITION, disposition);
    }
    response
}

/// A preference pair in the shape TRL's DPO trainer reads (`prompt`, `chosen`, `rejected`): a
/// comparison gives its pair (ties give none), a ranking its best against its worst.
pub fn preference_pair(row: &ExportRow) -> Option<serde_json::Value> {
    let (chosen, rejected) = match &row.judged.judgement {
        Judgement::Compare {
            choice: PairChoice::A,
        } => (0, 1),
        Judgement::Compare {
            choice: PairChoice::B,
        } => (1, 0),
        Judgement::Rank { order } if order.len() >= 2 => (order[0], order[order.len() - 1]),
        _ => return None,
    };
    Some(serde_json::json!({
        "prompt": row.prompt,
        "chosen": row.answers.get(chosen)?,
        "rejected": row.answers.get(rejected)?,
    }))
}

/// A rating with its answer and who gave it.
fn rating_line(row: &ExportRow) -> Option<serde_json::Value> {
    match &row.judged.judgement {
        Judgement::Rate { score } => Some(serde_json::json!({
            "item": row.judged.item,
            "prompt": row.prompt,
            "answer": row.answers.first()?,
            "annotator": row.judged.annotator,
            "score": score,
        })),
        _ => None,
    }
}

async fn pairs(
    State(state): State<AppState>,
    viewer: Viewer,
    Path(id): Path<String>,
) -> Result<Response, AppError> {
    let queue = queue_for(&state, &viewer, &id, Access::Read).await?;
    Ok(export(
        &state,
        queue.view.id,
        "preference-pairs.jsonl",
        preference_pair,
    ))
}

async fn ratings(
    State(state): State<AppState>,
    viewer: Viewer,
    Path(id): Path<String>,
) -> Result<Response, AppError> {
    let queue = queue_for(&state, &viewer, &id, Access::Read).await?;
    Ok(export(&state, queue.view.id, "ratings.jsonl", rating_line))
}
