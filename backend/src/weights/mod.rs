//! New weights for the running server, from a trainer in another process, through the requests
//! trainers already send to vLLM and SGLang:
//!
//! - `POST /v1/load_lora_adapter {lora_name, lora_path}` applies a PEFT adapter beside the
//!   matrices of one shared copy of the served base (`--inference-trained-precision`: f32, so the
//!   adapter serves exactly the trainer's model, or Q8_0) and serves it under `lora_name`:
//!   requests naming it as their `model` get it, every other request the base.
//!   `POST /v1/unload_lora_adapter {lora_name}` drops it.
//! - `POST /update_weights_from_disk {model_path}` replaces the base itself with a Hugging Face
//!   llama folder, held at the same precision: everything the platform runs on the embedded model
//!   (the showcases, in-process environments, the chess judge) moves to the new weights.
//!
//! Each load bumps the weight version of what it replaced (an adapter name keeps its count across
//! unloads), and completions report the version that answered them. Loading reads the server's
//! disk, and the first adapter costs a copy of the model in memory, so only the admin may do it,
//! one load at a time, within `--inference-max-lora-adapters` and `--inference-max-weights-mib`.

mod error;
pub mod load;

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::{Mutex, RwLock};

use axum::Json;
use axum::Router;
use axum::extract::{Request, State};
use axum::routing::post;
use lachesis_inference::llama::Llama;
use lachesis_inference::{Engine, EngineOptions};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::app::AppState;
pub use error::WeightsError;
use load::{LoadLimits, TrainedPrecision};

/// Longest adapter name accepted; names go into logs and `/v1/models`.
const MAX_NAME_BYTES: usize = 128;

/// The loaded adapters and what loading more may use.
pub struct Weights {
    /// The file or folder the base engine was loaded from: adapters are served on a copy of it.
    source: Option<PathBuf>,
    options: EngineOptions,
    max_adapters: usize,
    limits: LoadLimits,
    adapters: RwLock<BTreeMap<String, Engine>>,
    /// The base under every adapter, loaded at the first adapter and shared by all.
    adapter_base: tokio::sync::OnceCell<Llama>,
    trained_precision: TrainedPrecision,
    /// The last version each adapter name was served at, kept across unloads.
    versions: Mutex<HashMap<String, i64>>,
    /// One load at a time: each holds the base in f32 while it merges.
    loading: tokio::sync::Mutex<()>,
}

impl Weights {
    pub fn new(
        source: Option<PathBuf>,
        options: EngineOptions,
        limits: &crate::inference::limits::InferenceLimits,
    ) -> Self {
        Self {
            source,
            limits: LoadLimits {
                max_bytes: limits.max_weights_bytes,
                context_cap: options.context_cap,
            },
            options,
            max_adapters: limits.max_lora_adapters,
            adapters: RwLock::default(),
            adapter_base: tokio::sync::OnceCell::new(),
            trained_precision: limits.trained_precision,
            versions: Mutex::default(),
            loading: tokio::sync::Mutex::new(()),
        }
    }

    /// The engine serving adapter `name`, when one is loaded under it.
    pub fn adapter(&self, name: &str) -> Option<Engine> {
        self.adapters
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(name)
            .cloned()
    }

    /// The loaded adapters' names, in order.
    pub fn adapter_names(&self) -> Vec<String> {
        self.adapters
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .keys()
            .cloned()
            .collect()
    }

    fn count(&self) -> usize {
        self.adapters
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .len()
    }
}

/// The admin's routes (the caller is checked by the layer `app::router` puts around them).
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/v1/load_lora_adapter", post(load_adapter))
        .route("/v1/unload_lora_adapter", post(unload_adapter))
        .route("/update_weights_from_disk", post(update_from_disk))
}

async fn body<T: DeserializeOwned>(state: &AppState, req: Request) -> Result<T, WeightsError> {
    let bytes = crate::trajectory::body::read_body(req, state.body_limit)
        .await
        .map_err(|e| WeightsError::BadRequest(e.to_string()))?;
    let mut de = serde_json::Deserializer::from_slice(&bytes);
    serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let path = e.path().to_string();
        WeightsError::BadRequest(format!("{path}: {}", e.into_inner()))
    })
}

/// Reading and checking weights takes seconds of CPU: off the async workers.
async fn blocking<T: Send + 'static>(
    load: impl FnOnce() -> Result<T, WeightsError> + Send + 'static,
) -> Result<T, WeightsError> {
    tokio::task::spawn_blocking(load)
        .await
        .map_err(|e| WeightsError::Internal(e.to_string()))?
}

fn check_name(name: &str) -> Result<(), WeightsError> {
    if name.is_empty() || name.len() > MAX_NAME_BYTES || name.chars().any(char::is_control) {
        return Err(WeightsError::BadRequest(format!(
            "lora_name must be 1 to {MAX_NAME_BYTES} bytes without control characters"
        )));
    }
    Ok(())
}

/// vLLM's request; its other optional fields are ignored, as the base is always the served model.
#[derive(Deserialize)]
struct LoadAdapter {
    lora_name: String,
    lora_path: PathBuf,
}

async fn load_adapter(State(state): State<AppState>, req: Request) -> Result<String, WeightsError> {
    let request: LoadAdapter = body(&state, req).await?;
    check_name(&request.lora_name)?;
    let base = state.engine.clone().ok_or(WeightsError::NoModel)?;
    let weights = state.weights.clone();
    let source = weights.source.clone().ok_or(WeightsError::NoModel)?;
    let name = request.lora_name;
    let _one_at_a_time = weights.loading.lock().await;
    if weights.adapter(&name).is_some() {
        return Err(WeightsError::AlreadyLoaded(name));
    }
    if weights.count() >= weights.max_adapters {
        return Err(WeightsError::TooManyAdapters {
            limit: weights.max_adapters,
        });
    }
    let precision = weights.trained_precision;
    let adapter_base = weights
        .adapter_base
        .get_or_try_init(|| blocking(move || load::adapter_base(&source, precision)))
        .await?
        .clone();
    let limits = weights.limits;
    let path = request.lora_path;
    let model = blocking(move || load::adapter_model(&adapter_base, &path, &limits)).await?;
    let version = weights
        .versions
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .get(&name)
        .map_or(1, |v| v + 1);
    let engine = Engine::from_model(
        model,
        base.tokenizer().clone(),
        name.clone(),
        weights.options.clone(),
    )
    .map_err(|e| WeightsError::Internal(e.to_string()))?
    .with_weight_version(version);
    weights
        .versions
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(name.clone(), version);
    weights
        .adapters
        .write()
        .unwrap_or_else(|p| p.into_inner())
        .insert(name.clone(), engine);
    tracing::info!(adapter = %name, version, "LoRA adapter loaded");
    Ok(format!(
        "Success: LoRA adapter '{name}' added successfully (weight version {version})."
    ))
}

#[derive(Deserialize)]
struct UnloadAdapter {
    lora_name: String,
}

async fn unload_adapter(
    State(state): State<AppState>,
    req: Request,
) -> Result<String, WeightsError> {
    let request: UnloadAdapter = body(&state, req).await?;
    let removed = state
        .weights
        .adapters
        .write()
        .unwrap_or_else(|p| p.into_inner())
        .remove(&request.lora_name);
    match removed {
        // Requests already running keep their handle and finish; the worker stops after them.
        Some(_) => Ok(format!(
            "Success: LoRA adapter '{}' removed successfully.",
            request.lora_name
        )),
        None => Err(WeightsError::UnknownAdapter(request.lora_name)),
    }
}

#[derive(Deserialize)]
struct UpdateFromDisk {
    model_path: PathBuf,
    /// SGLang's optional field; only safetensors folders are read.
    #[serde(default)]
    load_format: Option<String>,
}

async fn update_from_disk(
    State(state): State<AppState>,
    req: Request,
) -> Result<Json<Value>, WeightsError> {
    let request: UpdateFromDisk = body(&state, req).await?;
    if request
        .load_format
        .as_deref()
        .is_some_and(|f| f != "auto" && f != "safetensors")
    {
        return Err(WeightsError::BadRequest(
            "load_format must be \"auto\" or \"safetensors\"".into(),
        ));
    }
    let engine = state.engine.clone().ok_or(WeightsError::NoModel)?;
    let weights = state.weights.clone();
    let _one_at_a_time = weights.loading.lock().await;
    let limits = weights.limits;
    let path = request.model_path;
    let precision = weights.trained_precision;
    let model = blocking(move || load::full_model(&path, &limits, precision)).await?;
    let version = engine
        .swap_model(model)
        .map_err(|e| WeightsError::BadRequest(e.to_string()))?;
    tracing::info!(version, "base weights replaced from disk");
    Ok(Json(json!({
        "success": true,
        "message": format!("the served model now runs weight version {version}"),
        "weight_version": version,
    })))
}
