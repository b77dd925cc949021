//! The Atropos trajectory API, wire-compatible with atroposlib 0.4.0, durable in Postgres.
//!
//! The legacy paths (`/register`, `/batch`, ...) serve the run named `default`; every other run has
//! the same API under `/runs/{run}/...`. With accounts on, a run-scoped token's legacy paths serve
//! its run instead, and every call is checked against the run's team (see `crate::auth`).

pub mod batches;
pub mod body;
pub mod canonical;
pub mod error;
pub mod figures;
pub mod packing;
pub mod stats;
pub mod store;

use axum::extract::{FromRequestParts, RawPathParams, State};
use axum::http::request::Parts;
use axum::http::{Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use lachesis_shared::atropos::{
    EnvIdentifier, RegisterEnv, RegisterEnvResponse, RegisterResponse, Registration,
    ScoredDataListResponse, ScoredDataResponse,
};
use lachesis_shared::live::{LiveEvent, Topic};
use lachesis_shared::runs::TrainerReport;
use serde_json::json;

use crate::app::AppState;
use crate::auth::{Access, Viewer};
use batches::BatchOutcome;
use body::{AtroposJson, Checked};
use canonical::CheckedGroup;
use error::ApiError;
use store::Ingested;

pub const DEFAULT_RUN: &str = "default";

/// The API's routes, without the `/` root (the app decides between the page and Atropos's greeting).
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/register", post(register))
        .route("/register-env", post(register_env))
        .route("/disconnect-env", post(disconnect_env))
        .route("/wandb_info", get(wandb_info))
        .route("/info", get(info))
        .route("/batch", get(batch))
        .route("/latest_example", get(latest_example))
        .route("/scored_data", post(scored_data))
        .route("/scored_data_list", post(scored_data_list))
        .route("/status", get(status))
        .route("/status-env", get(status_env))
        .route("/reset_data", get(reset_data))
        .route("/trainer-metrics", post(trainer_metrics))
}

/// The run a request addresses: `{run}` from `/runs/{run}/...`, else the default run. Unknown runs
/// are created on first use, as atroposlib creates its state lazily.
pub struct RunId(pub String);

impl FromRequestParts<AppState> for RunId {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        let params = RawPathParams::from_request_parts(parts, state)
            .await
            .map_err(|_| ApiError::InvalidRunName)?;
        let explicit = params
            .iter()
            .find(|(key, _)| *key == "run")
            .map(|(_, run)| run);
        if explicit.is_some_and(|run| !valid_run_name(run)) {
            return Err(ApiError::InvalidRunName);
        }
        let viewer = Viewer::from_request_parts(parts, state).await?;
        let run = explicit.unwrap_or_else(|| viewer.legacy_run()).to_string();
        // `/batch` hands a batch out and `/reset_data` deletes: both change the run.
        let path = parts.uri.path();
        let reads = parts.method == Method::GET
            && !path.ends_with("/batch")
            && !path.ends_with("/reset_data");
        let access = if reads { Access::Read } else { Access::Write };
        if access == Access::Write {
            viewer.check_csrf(&parts.headers)?;
        }
        viewer.check_run(state, &run, access, true).await?;
        if viewer.is_full_rights() {
            state.ensure_run(&run).await?;
        }
        Ok(RunId(run))
    }
}

pub fn valid_run_name(name: &str) -> bool {
    let mut chars = name.chars();
    let first_ok = chars.next().is_some_and(|c| c.is_ascii_alphanumeric());
    first_ok
        && name.len() <= 64
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
}

async fn register(
    State(state): State<AppState>,
    RunId(run): RunId,
    AtroposJson(reg): AtroposJson<Registration>,
) -> Result<Json<RegisterResponse>, ApiError> {
    // Batch formation searches over the queue for packs of this size: bounded by a flag.
    let max = state.hosting.max_batch_size;
    if !(1..=max).contains(&reg.batch_size) {
        return Err(ApiError::field(
            "value_error",
            &["batch_size".into()],
            format!("batch_size must be between 1 and {max} (--max-batch-size)"),
        ));
    }
    store::register_trainer(&state.db, &run, &reg).await?;
    Ok(Json(RegisterResponse {
        uuid: rand::random::<u128>(),
    }))
}

async fn register_env(
    State(state): State<AppState>,
    RunId(run): RunId,
    AtroposJson(env): AtroposJson<RegisterEnv>,
) -> Result<Json<RegisterEnvResponse>, ApiError> {
    let max = state.hosting.max_group_size;
    if !(1..=max).contains(&env.group_size) {
        return Err(ApiError::field(
            "value_error",
            &["group_size".into()],
            format!("group_size must be between 1 and {max} (--max-group-size)"),
        ));
    }
    Ok(Json(
        match store::register_env(&state.db, &run, &env).await? {
            Some(registered) => RegisterEnvResponse::Registered(registered),
            None => RegisterEnvResponse::Waiting {
                status: "wait for trainer to start".into(),
            },
        },
    ))
}

async fn disconnect_env(
    State(state): State<AppState>,
    RunId(run): RunId,
    AtroposJson(env): AtroposJson<EnvIdentifier>,
) -> Result<Json<serde_json::Value>, ApiError> {
    Ok(Json(
        if store::disconnect_env(&state.db, &run, env.env_id).await? {
            json!({"status": "success"})
        } else {
            json!({"status": "failure", "error": format!("environment {} is not registered", env.env_id)})
        },
    ))
}

async fn wandb_info(
    State(state): State<AppState>,
    RunId(run): RunId,
) -> Result<Json<serde_json::Value>, ApiError> {
    let row = store::load_run(&mut *state.db.acquire().await?, &run, false).await?;
    Ok(Json(
        json!({"group": row.wandb_group, "project": row.wandb_project}),
    ))
}

async fn info(
    State(state): State<AppState>,
    RunId(run): RunId,
) -> Result<Json<serde_json::Value>, ApiError> {
    let row = store::load_run(&mut *state.db.acquire().await?, &run, false).await?;
    let (batch_size, max_token_len) = if row.registered {
        (row.batch_size, row.max_token_len)
    } else {
        (-1, -1)
    };
    Ok(Json(
        json!({"batch_size": batch_size, "max_token_len": max_token_len}),
    ))
}

async fn batch(
    State(state): State<AppState>,
    RunId(run): RunId,
    headers: axum::http::HeaderMap,
) -> Result<Response, ApiError> {
    let (outcome, formed) = batches::next_batch(&state.db, &run).await?;
    state.activity.touch(&run);
    for groups in &formed {
        state.metrics.batch_formed(&run, *groups);
    }
    Ok(match outcome {
        BatchOutcome::NotRegistered => Json(json!({
            "status": "error",
            "message": "Trainer not registered. Call /register first.",
            "batch": [],
        }))
        .into_response(),
        BatchOutcome::Empty => Json(json!({"batch": null})).into_response(),
        BatchOutcome::Batch {
            payloads,
            weight_versions,
        } => {
            state.metrics.batch_served(&run);
            // The payloads are stored as the exact JSON to serve: splice them, no re-encoding.
            let size: usize = payloads.iter().map(Vec::len).sum::<usize>() + payloads.len() + 64;
            let mut out = Vec::with_capacity(size);
            out.extend_from_slice(b"{\"batch\":[");
            for (i, payload) in payloads.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                out.extend_from_slice(payload);
            }
            out.extend_from_slice(b"],\"weight_versions\":");
            out.extend_from_slice(
                &serde_json::to_vec(&weight_versions).expect("integers serialise"),
            );
            out.push(b'}');
            let mut response = if state.batch_gzip && accepts_gzip(&headers) {
                gzip_json(out)
            } else {
                json_bytes(out)
            };
            response
                .extensions_mut()
                .insert(crate::app::SkipCompression);
            response
        }
    })
}

fn accepts_gzip(headers: &axum::http::HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT_ENCODING)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|coding| {
            let mut parts = coding.trim().split(';');
            let name = parts.next().unwrap_or("").trim();
            let refused = parts.any(|p| matches!(p.trim(), "q=0" | "q=0.0" | "q=0.00" | "q=0.000"));
            name.eq_ignore_ascii_case("gzip") && !refused
        })
}

/// A batch, gzipped in one pass at the fastest level.
fn gzip_json(json: Vec<u8>) -> Response {
    use std::io::Write;
    let mut encoder = flate2::write::GzEncoder::new(
        Vec::with_capacity(json.len() / 2),
        flate2::Compression::fast(),
    );
    if encoder.write_all(&json).is_err() {
        return json_bytes(json);
    }
    match encoder.finish() {
        Ok(packed) => (
            [
                (header::CONTENT_TYPE, "application/json"),
                (header::CONTENT_ENCODING, "gzip"),
                (header::VARY, "accept-encoding"),
            ],
            packed,
        )
            .into_response(),
        Err(_) => json_bytes(json),
    }
}

fn json_bytes(bytes: Vec<u8>) -> Response {
    ([(header::CONTENT_TYPE, "application/json")], bytes).into_response()
}

async fn latest_example(
    State(state): State<AppState>,
    RunId(run): RunId,
) -> Result<Response, ApiError> {
    Ok(match store::latest_example(&state.db, &run).await? {
        Some(payload) => json_bytes(payload),
        None => Json(json!({
            "tokens": [], "masks": [], "scores": [], "advantages": [], "ref_logprobs": [],
            "generation_params": [], "inference_logprobs": [], "messages": [], "images": [],
        }))
        .into_response(),
    })
}

async fn scored_data(
    State(state): State<AppState>,
    RunId(run): RunId,
    Checked(group): Checked<CheckedGroup>,
) -> Result<Json<ScoredDataResponse>, ApiError> {
    let mut conn = state.db.acquire().await?;
    let outcome = store::ingest(&mut conn, &run, &group).await?;
    state.metrics.group_received(&run, outcome);
    state.activity.touch(&run);
    Ok(Json(match outcome {
        Ingested::Queued => ScoredDataResponse {
            status: "received".into(),
            buffer_size: None,
        },
        Ingested::Buffered { buffer_size } => ScoredDataResponse {
            status: "buffered".into(),
            buffer_size: Some(buffer_size),
        },
    }))
}

async fn scored_data_list(
    State(state): State<AppState>,
    RunId(run): RunId,
    Checked(groups): Checked<Vec<CheckedGroup>>,
) -> Result<Json<ScoredDataListResponse>, ApiError> {
    // One transaction: the whole list is acknowledged, or none of it is stored; its live events
    // go out on commit.
    let mut tx = state.db.begin().await?;
    let mut outcomes = Vec::with_capacity(groups.len());
    for group in &groups {
        outcomes.push(store::ingest(&mut tx, &run, group).await?);
    }
    tx.commit().await?;
    state.activity.touch(&run);
    let mut buffered = 0;
    let mut last_buffer_size = None;
    for outcome in outcomes {
        state.metrics.group_received(&run, outcome);
        if let Ingested::Buffered { buffer_size } = outcome {
            buffered += 1;
            last_buffer_size = Some(buffer_size);
        }
    }
    Ok(Json(ScoredDataListResponse {
        status: "received".into(),
        groups_processed: groups.len() as i64,
        buffered: (buffered > 0).then_some(buffered),
        last_buffer_size,
    }))
}

async fn status(
    State(state): State<AppState>,
    RunId(run): RunId,
) -> Result<Json<serde_json::Value>, ApiError> {
    let (current_step, queue_size) = store::status(&state.db, &run).await?;
    Ok(Json(
        json!({"current_step": current_step, "queue_size": queue_size}),
    ))
}

async fn status_env(
    State(state): State<AppState>,
    RunId(run): RunId,
    AtroposJson(env): AtroposJson<EnvIdentifier>,
) -> Result<Json<lachesis_shared::atropos::StatusEnv>, ApiError> {
    Ok(Json(store::status_env(&state.db, &run, env.env_id).await?))
}

async fn reset_data(
    State(state): State<AppState>,
    RunId(run): RunId,
) -> Result<Response, ApiError> {
    store::reset(&state.db, &run).await?;
    Ok((
        StatusCode::OK,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        "Reset successful",
    )
        .into_response())
}

/// Lachesis: a trainer reports its numbers for a step (loss, KL, clip fraction, ...). Stored for the
/// dashboards and pushed to the run's live subscribers.
async fn trainer_metrics(
    State(state): State<AppState>,
    RunId(run): RunId,
    AtroposJson(report): AtroposJson<TrainerReport>,
) -> Result<StatusCode, ApiError> {
    let mut tx = state.db.begin().await?;
    let point = store::record_trainer_metrics(&mut tx, &run, &report).await?;
    let topic = Topic::Run { run: run.clone() };
    crate::live::publish(&mut *tx, &topic, &LiveEvent::Trainer(point)).await?;
    tx.commit().await?;
    Ok(StatusCode::NO_CONTENT)
}
