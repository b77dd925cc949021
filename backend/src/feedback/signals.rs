//! `GET /api/feedback/signals/{source}.jsonl`: the human signals gathered outside the queues, in
//! the ratings format the queue's own export uses (`prompt`, `answer`, `annotator`, `score`, and
//! the `item` it came from), so one reader takes them all:
//! - `chess-move-ratings`: the agent's moves people rated 1–5, the position before as the prompt;
//! - `spatial-demonstrations`: people's solutions of Padres tasks, scored by the physics checker
//!   (0–1);
//! - `cat-sessions`: dialogues a person played as the caretaker, scored by the judge (0–1).
//!
//! Each call reads one page (`limit`, at most 1,000 lines, after the cursor `after`); the header
//! `x-next-after` carries the cursor of the next page while there is one. A person reads their
//! own signals, a team's token its team's, the admin everyone's.

use axum::extract::{Path, Query, State};
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use lachesis_shared::cats::CatTurn;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::app::{AppError, AppState};
use crate::auth::Viewer;
use crate::cats::store::{SessionOwner, caretaker_sessions_after};
use crate::chess::signals::{RatedBy, rated_moves_after};
use crate::envs::cat_caretaker::data::CatData;
use crate::envs::cat_caretaker::dialogue::describe_cat_turn;
use crate::spatial::store::demonstrations_after;

/// Lines per page unless the caller asks for fewer.
const PAGE: i64 = 1_000;

pub fn routes() -> axum::Router<AppState> {
    axum::Router::new().route("/api/feedback/signals/{source}", get(signals))
}

#[derive(Deserialize)]
struct PageQuery {
    #[serde(default)]
    after: Option<String>,
    #[serde(default)]
    limit: Option<i64>,
}

/// Whose signals the caller reads.
#[derive(Clone, Copy)]
enum Scope {
    Everyone,
    User(i64),
    Team(i64),
}

async fn signals(
    State(state): State<AppState>,
    viewer: Viewer,
    Path(source): Path<String>,
    Query(page): Query<PageQuery>,
) -> Result<Response, AppError> {
    let scope = match &viewer {
        Viewer::Open | Viewer::Admin => Scope::Everyone,
        Viewer::User { id, .. } => Scope::User(*id),
        Viewer::Token { team_id, .. } => Scope::Team(*team_id),
        Viewer::Anonymous => return Err(AppError::NotSignedIn),
    };
    let limit = page.limit.unwrap_or(PAGE);
    if !(1..=PAGE).contains(&limit) {
        return Err(AppError::Invalid(format!("limit is 1 to {PAGE}")));
    }
    let after = page.after.as_deref();
    let (lines, next) = match source.as_str() {
        "chess-move-ratings.jsonl" => chess_lines(&state, scope, after, limit).await?,
        "spatial-demonstrations.jsonl" => spatial_lines(&state, scope, after, limit).await?,
        "cat-sessions.jsonl" => cat_lines(&state, scope, after, limit).await?,
        _ => return Err(AppError::NotFound("signal source")),
    };
    let mut body = String::new();
    for line in &lines {
        body.push_str(&line.to_string());
        body.push('\n');
    }
    let mut response = ([(header::CONTENT_TYPE, "application/x-ndjson")], body).into_response();
    // A full page may have more after it; a short one is the last.
    if lines.len() as i64 == limit
        && let Some(next) = next.and_then(|n| HeaderValue::from_str(&n).ok())
    {
        response.headers_mut().insert("x-next-after", next);
    }
    Ok(response)
}

fn bad_cursor() -> AppError {
    AppError::Invalid("after is a cursor from x-next-after".into())
}

/// An integer cursor (the row id), 0 before the first.
fn id_cursor(after: Option<&str>) -> Result<i64, AppError> {
    after.map_or(Ok(0), |a| a.parse().map_err(|_| bad_cursor()))
}

type Lines = (Vec<Value>, Option<String>);

async fn chess_lines(
    state: &AppState,
    scope: Scope,
    after: Option<&str>,
    limit: i64,
) -> Result<Lines, AppError> {
    let cursor = match after {
        None => (0, -1),
        Some(text) => {
            let (game, ply) = text.split_once('.').ok_or_else(bad_cursor)?;
            (
                game.parse().map_err(|_| bad_cursor())?,
                ply.parse().map_err(|_| bad_cursor())?,
            )
        }
    };
    let by = match scope {
        Scope::Everyone => RatedBy::Anyone,
        Scope::User(user) => RatedBy::User(user),
        Scope::Team(team) => RatedBy::Team(team),
    };
    let rows = rated_moves_after(&state.db, by, cursor, limit).await?;
    let next = rows.last().map(|r| format!("{}.{}", r.game_id, r.ply));
    let lines = rows
        .into_iter()
        .map(|r| {
            json!({"source": "chess", "item": format!("game/{}/ply/{}", r.game_id, r.ply),
                "prompt": r.fen_before, "answer": r.san, "annotator": r.username,
                "score": r.rating})
        })
        .collect();
    Ok((lines, next))
}

async fn spatial_lines(
    state: &AppState,
    scope: Scope,
    after: Option<&str>,
    limit: i64,
) -> Result<Lines, AppError> {
    let user = match scope {
        Scope::Everyone => None,
        Scope::User(user) => Some(user),
        // Demonstrations belong to people, not teams.
        Scope::Team(_) => return Ok((Vec::new(), None)),
    };
    let rows = demonstrations_after(&state.db, user, id_cursor(after)?, limit).await?;
    let next = rows.last().map(|r| r.id.to_string());
    let lines = rows
        .into_iter()
        .map(|r| {
            let difficulty = u8::try_from(r.difficulty).unwrap_or(1);
            let task = crate::envs::spatial::generate::generate(r.seed as u64, difficulty);
            json!({"source": "spatial", "item": format!("demonstration/{}", r.id),
                "prompt": lachesis_shared::spatial::describe_task(&task),
                "answer": r.actions.to_string(), "annotator": r.username,
                "score": r.score, "scored_by": "physics checker"})
        })
        .collect();
    Ok((lines, next))
}

async fn cat_lines(
    state: &AppState,
    scope: Scope,
    after: Option<&str>,
    limit: i64,
) -> Result<Lines, AppError> {
    let owner = match scope {
        Scope::Everyone => None,
        Scope::User(user) => Some(SessionOwner {
            user: Some(user),
            team: None,
        }),
        Scope::Team(team) => Some(SessionOwner {
            user: None,
            team: Some(team),
        }),
    };
    let data = CatData::builtin().map_err(|e| AppError::Internal(e.to_string()))?;
    let rows = caretaker_sessions_after(&state.db, owner, id_cursor(after)?, limit).await?;
    let next = rows.last().map(|r| r.id.to_string());
    let mut lines = Vec::with_capacity(rows.len());
    for row in rows {
        // A row this build cannot read is left out of the export, not a failed page.
        let Ok(turns) = serde_json::from_value::<Vec<CatTurn>>(row.turns) else {
            continue;
        };
        let said = |turn: &CatTurn| match turn {
            CatTurn::Cat { behaviors, sound } => {
                describe_cat_turn(data, behaviors, sound.as_deref())
            }
            CatTurn::Caretaker { text } => format!("Caretaker: {text}"),
        };
        let Some((first, rest)) = turns.split_first() else {
            continue;
        };
        // The answer ends with the caretaker's last turn: the cat's reaction after it is not
        // the caretaker's doing.
        let last = rest
            .iter()
            .rposition(|t| matches!(t, CatTurn::Caretaker { .. }))
            .map_or(0, |i| i + 1);
        let answer: Vec<String> = rest[..last].iter().map(said).collect();
        lines.push(
            json!({"source": "cats", "item": format!("session/{}", row.id),
            "prompt": said(first), "answer": answer.join("\n"), "annotator": row.username,
            "score": row.verdict["score"], "scored_by": "caretaker judge"}),
        );
    }
    Ok((lines, next))
}
