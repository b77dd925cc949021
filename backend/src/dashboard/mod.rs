//! The run dashboards' HTTP side: which runs a caller sees, a run's history for the charts, its
//! latest groups with their texts for the rollout table, CSV/JSONL exports, and the public flag.
//! Live updates of the same numbers come over the WebSocket (`crate::live`).

mod export;
pub mod sampler;
pub(crate) mod store;

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::routing::{get, put};
use axum::{Json, Router};
use lachesis_shared::runs::{GroupDetail, GroupSummary, RunMetrics, RunSummary};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::app::AppError;
use crate::app::AppState;
use crate::app::error::Body;
use crate::auth::Writer;
use crate::auth::store::{TeamReach, team_reach};
use crate::auth::{Access, Viewer};
use crate::trajectory::valid_run_name;
pub use sampler::Activity;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/environments", get(environments))
        .route("/api/runs", get(list_runs))
        .route("/api/runs/{run}", get(one_run))
        .route("/api/runs/{run}/metrics", get(metrics))
        .route("/api/runs/{run}/groups", get(groups))
        .route("/api/runs/{run}/visibility", put(set_visibility))
        .route(
            "/api/runs/{run}/export/metrics.csv",
            get(export::metrics_csv),
        )
        .route(
            "/api/runs/{run}/export/rollouts.jsonl",
            get(export::rollouts_jsonl),
        )
}

#[derive(Serialize)]
struct EnvironmentInfo {
    name: &'static str,
    description: &'static str,
}

async fn environments() -> Json<Vec<EnvironmentInfo>> {
    Json(
        crate::envs::registry::REGISTRY
            .iter()
            .map(|env| EnvironmentInfo {
                name: env.name,
                description: env.description,
            })
            .collect(),
    )
}

/// The run, after checking the caller may read it (404 for runs of other teams).
pub(crate) async fn readable_run(
    state: &AppState,
    viewer: &Viewer,
    run: &str,
) -> Result<(), AppError> {
    if !valid_run_name(run) {
        return Err(AppError::NotFound("run"));
    }
    viewer.check_run(state, run, Access::Read, false).await?;
    // `check_run` waves full-rights callers through without looking the run up.
    if viewer.is_full_rights()
        && crate::auth::store::run_owner(&state.db, run)
            .await?
            .is_none()
    {
        return Err(AppError::NotFound("run"));
    }
    Ok(())
}

async fn list_runs(
    State(state): State<AppState>,
    viewer: Viewer,
) -> Result<Json<Vec<RunSummary>>, AppError> {
    // Anonymous visitors see public runs only.
    let seen = team_reach(&state.db, &viewer).await?;
    Ok(Json(store::runs(&state.db, &seen, None).await?))
}

async fn one_run(
    State(state): State<AppState>,
    viewer: Viewer,
    Path(run): Path<String>,
) -> Result<Json<RunSummary>, AppError> {
    readable_run(&state, &viewer, &run).await?;
    store::runs(&state.db, &TeamReach::All, Some(&run))
        .await?
        .pop()
        .map(Json)
        .ok_or(AppError::NotFound("run"))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct HistoryQuery {
    limit: Option<i64>,
}

const DEFAULT_HISTORY: i64 = 2_000;
const MAX_HISTORY: i64 = 20_000;

async fn metrics(
    State(state): State<AppState>,
    viewer: Viewer,
    Path(run): Path<String>,
    Query(query): Query<HistoryQuery>,
) -> Result<Json<RunMetrics>, AppError> {
    readable_run(&state, &viewer, &run).await?;
    let limit = query.limit.unwrap_or(DEFAULT_HISTORY).clamp(1, MAX_HISTORY);
    let mut groups = store::latest_groups(&state.db, &run, None, None, limit).await?;
    groups.reverse();
    Ok(Json(RunMetrics {
        groups,
        status: store::status_points(&state.db, &run, limit).await?,
        trainer: store::trainer_points(&state.db, &run, limit).await?,
    }))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct GroupsQuery {
    limit: Option<i64>,
    env: Option<i64>,
    /// Only groups older than this id (paging back).
    before: Option<i64>,
}

async fn groups(
    State(state): State<AppState>,
    viewer: Viewer,
    Path(run): Path<String>,
    Query(query): Query<GroupsQuery>,
) -> Result<Json<Vec<GroupDetail>>, AppError> {
    readable_run(&state, &viewer, &run).await?;
    let limit = query.limit.unwrap_or(50).clamp(1, 200);
    let summaries = store::latest_groups(&state.db, &run, query.env, query.before, limit).await?;
    Ok(Json(with_texts(&state, summaries).await?))
}

/// Adds each group's texts, read from its stored payload while it is still there.
pub(crate) async fn with_texts(
    state: &AppState,
    summaries: Vec<GroupSummary>,
) -> Result<Vec<GroupDetail>, AppError> {
    let details = load_details(state, summaries, false).await?;
    Ok(details.into_iter().map(|(detail, _)| detail).collect())
}

/// Each group's texts and, with `keep_group`, the group as the trainer received it (`None` once
/// `/reset_data` removed it), kept as raw JSON to be written out unchanged. Each payload is
/// fetched and decompressed once.
async fn load_details(
    state: &AppState,
    summaries: Vec<GroupSummary>,
    keep_group: bool,
) -> Result<Vec<(GroupDetail, Option<Box<RawValue>>)>, AppError> {
    let ids: Vec<i64> = summaries.iter().map(|s| s.id).collect();
    let payloads = store::payloads(&state.db, &ids).await?;
    let engine = state.engine.clone();
    // Decompressing and detokenizing is CPU work: off the async workers.
    tokio::task::spawn_blocking(move || {
        summaries
            .into_iter()
            .map(|summary| {
                let json = payloads
                    .iter()
                    .find(|(id, _)| *id == summary.id)
                    .and_then(|(_, stored)| crate::trajectory::store::decode_payload(stored).ok());
                let texts = json
                    .as_deref()
                    .and_then(|json| texts_of(json, engine.as_ref()))
                    .unwrap_or_else(|| vec![None; summary.scores.len()]);
                let group = json
                    .filter(|_| keep_group)
                    .and_then(|json| serde_json::from_slice(&json).ok());
                (GroupDetail { summary, texts }, group)
            })
            .collect()
    })
    .await
    .map_err(|e| AppError::Internal(e.to_string()))
}

#[derive(Deserialize)]
struct StoredGroup {
    tokens: Vec<Vec<i64>>,
    masks: Vec<Vec<i64>>,
    #[serde(default)]
    messages: Option<Vec<Vec<Map<String, Value>>>>,
}

/// Each sequence's text: its chat messages when sent, else its completion (the unmasked tokens)
/// decoded by the embedded model's tokenizer; `None` for a group that does not parse.
fn texts_of(
    json: &[u8],
    engine: Option<&lachesis_inference::Engine>,
) -> Option<Vec<Option<String>>> {
    let group: StoredGroup = serde_json::from_slice(json).ok()?;
    if let Some(messages) = group.messages {
        return Some(
            messages
                .iter()
                .map(|conversation| Some(render_messages(conversation)))
                .collect(),
        );
    }
    let tokenizer = engine.map(|e| e.tokenizer());
    Some(
        group
            .tokens
            .iter()
            .zip(&group.masks)
            .map(|(tokens, masks)| {
                let completion: Vec<u32> = tokens
                    .iter()
                    .zip(masks)
                    .filter(|(_, mask)| **mask != -100)
                    .filter_map(|(token, _)| u32::try_from(*token).ok())
                    .collect();
                tokenizer.and_then(|t| t.decode(&completion).ok())
            })
            .collect(),
    )
}

fn render_messages(conversation: &[Map<String, Value>]) -> String {
    conversation
        .iter()
        .map(|message| {
            let role = message.get("role").and_then(Value::as_str).unwrap_or("?");
            let content = match message.get("content") {
                Some(Value::String(text)) => text.clone(),
                Some(other) => other.to_string(),
                None => String::new(),
            };
            format!("{role}: {content}")
        })
        .collect::<Vec<_>>()
        .join("\n\n")
}

async fn set_visibility(
    State(state): State<AppState>,
    Writer(viewer): Writer,
    Path(run): Path<String>,
    Body(visibility): Body<lachesis_shared::accounts::Visibility>,
) -> Result<StatusCode, AppError> {
    readable_run(&state, &viewer, &run).await?;
    viewer.check_run(&state, &run, Access::Write, false).await?;
    // Publishing a run shows its data to everyone: its team's owners decide, not every member or
    // token that may write to it.
    match &viewer {
        Viewer::Open | Viewer::Admin => {}
        Viewer::User { id, .. } => {
            let team = crate::auth::store::run_owner(&state.db, &run)
                .await?
                .and_then(|owner| owner.team_id);
            let role = match team {
                Some(team) => crate::auth::store::role_in_team(&state.db, *id, team).await?,
                None => None,
            };
            if role != Some(lachesis_shared::accounts::Role::Owner) {
                return Err(AppError::Forbidden(
                    "only the team's owners change a run's visibility",
                ));
            }
        }
        _ => {
            return Err(AppError::Forbidden(
                "only the team's owners change a run's visibility",
            ));
        }
    }
    crate::auth::store::set_public(&state.db, &run, visibility.public).await?;
    state.auth.forget_cached();
    Ok(StatusCode::NO_CONTENT)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_render_as_role_and_content() {
        let conversation: Vec<Map<String, Value>> = serde_json::from_str(
            r#"[{"role":"user","content":"What is 2 + 2?"},{"role":"assistant","content":"Answer: 4"}]"#,
        )
        .unwrap();
        assert_eq!(
            render_messages(&conversation),
            "user: What is 2 + 2?\n\nassistant: Answer: 4"
        );
    }

    #[test]
    fn unparsable_groups_have_no_texts() {
        assert_eq!(texts_of(b"not json", None), None);
    }
}
