//! One environment's evaluation set, run once against the server's embedded model: started
//! through MCP's `start_evaluation`, read back with `evaluation`, kept in Postgres so any
//! instance answers for it.
//!
//! It spends the model for minutes, so it is bounded as the model is: only a token with the
//! inference scope (not read-only, not run-scoped) or the admin may start one; one caller has at
//! most one running (Postgres enforces it across instances); `--evaluations-at-once` run on an
//! instance, more are refused as busy; each stops at `--evaluation-timeout-s`. Environments that
//! pay judges are not evaluated here: an evaluation never moves money.

pub mod store;

use std::sync::Arc;

use lachesis_shared::mcp::{EvaluationStatus, EvaluationView, MAX_EVALUATION_SAMPLES};
use serde_json::{Map, Value};

use crate::app::{AppError, AppState};
use crate::auth::Viewer;
use crate::envs::registry::{self, ServerNeeds};
use crate::envs::{EnvOptions, Environment};
use crate::policy::EmbeddedPolicy;
pub use store::Readers;

/// The largest evaluation set one request may ask for.
pub const MAX_EVAL_SIZE: usize = 64;

/// Who is asking, as the table records it: their team (none for the admin) and their key for
/// the one-running rule.
fn starter(viewer: &Viewer) -> Result<(Option<i64>, String), AppError> {
    match viewer {
        Viewer::Open | Viewer::Admin => Ok((None, "admin".into())),
        Viewer::Token {
            read_only: true, ..
        } => Err(AppError::Forbidden(
            "a read-only token cannot start an evaluation",
        )),
        Viewer::Token { run: Some(_), .. } => Err(AppError::Forbidden(
            "a run-scoped token acts only on its run: start evaluations with a team token",
        )),
        Viewer::Token {
            inference: false, ..
        } => Err(AppError::Forbidden(
            "an evaluation spends the server's model: use a token with the inference scope",
        )),
        Viewer::Token { id, team_id, .. } => Ok((Some(*team_id), format!("token:{id}"))),
        Viewer::User { .. } | Viewer::Anonymous => Err(AppError::Forbidden(
            "evaluations are started with an API token",
        )),
    }
}

/// Which evaluations `viewer` may read.
pub fn readers(viewer: &Viewer) -> Result<Readers, AppError> {
    match viewer {
        Viewer::Open | Viewer::Admin => Ok(Readers::All),
        Viewer::Token { team_id, .. } => Ok(Readers::Team(*team_id)),
        Viewer::User { .. } | Viewer::Anonymous => Err(AppError::NotSignedIn),
    }
}

/// The environment `name` built for evaluation, `eval_size` items when given.
fn environment(name: &str, eval_size: Option<usize>) -> Result<Box<dyn Environment>, AppError> {
    let shown: String = name.chars().take(64).collect();
    let descriptor = registry::find(name).ok_or_else(|| {
        AppError::Invalid(format!(
            "no environment named {shown:?}; list_environments names them"
        ))
    })?;
    if descriptor.needs == ServerNeeds::Ledger || descriptor.build.is_none() {
        return Err(AppError::Invalid(format!(
            "{shown} pays its judges, and an evaluation never moves money: run it with `lachesis env evaluate`"
        )));
    }
    let mut settings = Map::new();
    if let Some(size) = eval_size {
        if !(1..=MAX_EVAL_SIZE).contains(&size) {
            return Err(AppError::Invalid(format!(
                "eval_size must be 1 to {MAX_EVAL_SIZE}"
            )));
        }
        settings.insert("eval_size".into(), Value::from(size));
    }
    let options = EnvOptions {
        settings,
        ..EnvOptions::default()
    };
    crate::envs::build(name, &options).map_err(|e| AppError::Invalid(e.to_string()))
}

/// Starts an evaluation of `name` for `viewer` and returns it, running.
pub async fn start(
    state: &AppState,
    viewer: &Viewer,
    name: &str,
    eval_size: Option<usize>,
) -> Result<EvaluationView, AppError> {
    let (team_id, caller) = starter(viewer)?;
    let engine = state.engine.clone().ok_or_else(|| {
        AppError::Invalid("this server runs no embedded model to evaluate".into())
    })?;
    let env = environment(name, eval_size)?;
    let permit = state
        .evaluation_slots
        .clone()
        .try_acquire_owned()
        .map_err(|_| AppError::Busy {
            what: "the evaluation runner",
            retry_after_s: 60,
        })?;
    let timeout = state.hosting.evaluation_timeout;
    let id = store::start(&state.db, name, team_id, &caller, timeout.as_secs() as i64)
        .await?
        .ok_or_else(|| {
            AppError::Conflict(
                "you already have an evaluation running: read it with the `evaluation` tool".into(),
            )
        })?;
    let db = state.db.clone();
    let env: Arc<dyn Environment> = Arc::from(env);
    tokio::spawn(async move {
        let _permit = permit;
        let policy = EmbeddedPolicy::new(engine);
        let run = async {
            env.setup().await?;
            env.evaluate(&policy).await
        };
        let result = match tokio::time::timeout(timeout, run).await {
            Ok(Ok(outcome)) => {
                let samples: Vec<Value> = outcome
                    .samples
                    .into_iter()
                    .take(MAX_EVALUATION_SAMPLES)
                    .collect();
                store::finish(&db, id, Ok((&outcome.metrics, &samples))).await
            }
            Ok(Err(e)) => store::finish(&db, id, Err(&e.to_string())).await,
            Err(_) => {
                let reason = format!(
                    "stopped after {} s (--evaluation-timeout-s)",
                    timeout.as_secs()
                );
                store::finish(&db, id, Err(&reason)).await
            }
        };
        if let Err(e) = result {
            tracing::warn!(evaluation = id, error = %e, "the evaluation's outcome was not recorded");
        }
    });
    Ok(EvaluationView {
        id,
        environment: name.to_string(),
        status: EvaluationStatus::Running,
        metrics: Default::default(),
        samples: Vec::new(),
        error: None,
        seconds: 0.0,
    })
}

/// Evaluation `id`, if `viewer` may read it.
pub async fn get(state: &AppState, viewer: &Viewer, id: i64) -> Result<EvaluationView, AppError> {
    store::get(&state.db, id, readers(viewer)?)
        .await?
        .ok_or(AppError::NotFound("evaluation"))
}
