//! The embedded model's HTTP face: OpenAI-compatible `/v1/models`, `/v1/completions` and
//! `/v1/chat/completions`, and vLLM's `/generate` as atroposlib's `VLLMServer` calls it, with
//! `/health` and `/health_generate`. All of it on the server's own address.

mod admission;
mod error;
pub mod limits;
mod openai;
mod quota;
mod stream;
mod tools;
mod vllm;

use axum::extract::{FromRequest, Request, State};
use axum::routing::{get, post};
use axum::{Json, Router};
use lachesis_inference::{Engine, GenerateRequest, Generation, SamplingParams};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::json;

use crate::app::AppState;
pub use error::InferenceError;
use quota::CallerKey;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/v1/models", get(openai::models))
        .route("/v1/completions", post(openai::completions))
        .route("/v1/chat/completions", post(openai::chat_completions))
        .route("/generate", post(vllm::generate))
        .route("/health", get(health))
        .route("/health_generate", get(health_generate))
}

/// The loaded engine, or the typed reason there is none.
fn engine(state: &AppState) -> Result<&Engine, InferenceError> {
    state.engine.as_ref().ok_or(InferenceError::NoModel)
}

/// The engine a request names in `model`: a loaded LoRA adapter by its name, otherwise the base
/// (which answers to any other name, as it always has).
fn engine_for(state: &AppState, model: Option<&str>) -> Result<Engine, InferenceError> {
    let base = engine(state)?;
    Ok(model
        .and_then(|name| state.weights.adapter(name))
        .unwrap_or_else(|| base.clone()))
}

/// 200 when a model is loaded (vLLM's health check, polled by atroposlib every second).
async fn health(State(state): State<AppState>) -> Result<Json<serde_json::Value>, InferenceError> {
    let engine = engine(&state)?;
    Ok(Json(json!({"status": "ok", "model": engine.info().name})))
}

/// Generates one token end to end, proving the engine answers (vLLM's `/health_generate`).
async fn health_generate(
    State(state): State<AppState>,
) -> Result<Json<serde_json::Value>, InferenceError> {
    let engine = engine(&state)?;
    let prompt = engine.tokenizer().encode("Hello")?;
    let params = SamplingParams {
        temperature: 0.0,
        max_tokens: 1,
        ..SamplingParams::default()
    };
    engine.generate(GenerateRequest { prompt, params }).await?;
    Ok(Json(json!({"status": "ok"})))
}

/// A JSON body decoded into `T`; failures name the offending field, in OpenAI's error shape.
pub struct InferenceJson<T>(pub T);

impl<T: DeserializeOwned> FromRequest<AppState> for InferenceJson<T> {
    type Rejection = InferenceError;

    async fn from_request(req: Request, state: &AppState) -> Result<Self, Self::Rejection> {
        let bytes = crate::trajectory::body::read_body(req, state.body_limit)
            .await
            .map_err(|e| InferenceError::bad(e.to_string(), "body"))?;
        let mut de = serde_json::Deserializer::from_slice(&bytes);
        serde_path_to_error::deserialize(&mut de)
            .map(InferenceJson)
            .map_err(|e| {
                // A syntax error has no field to blame: the body as a whole is wrong.
                let path = match e.path().to_string() {
                    p if p == "?" || p == "." => "body".to_owned(),
                    p => p,
                };
                InferenceError::bad(e.into_inner().to_string(), &path)
            })
    }
}

/// `stop` is a string or a list of strings in both APIs.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(untagged)]
pub enum StopStrings {
    #[default]
    None,
    One(String),
    Many(Vec<String>),
}

impl StopStrings {
    pub fn into_vec(self) -> Vec<String> {
        match self {
            StopStrings::None => Vec::new(),
            StopStrings::One(s) => vec![s],
            StopStrings::Many(v) => v,
        }
    }
}

/// Sampling fields common to every endpoint, with OpenAI's defaults.
#[derive(Debug, Clone, Deserialize)]
pub struct CommonSampling {
    #[serde(default = "one_f32")]
    pub temperature: f32,
    #[serde(default = "one_f32")]
    pub top_p: f32,
    #[serde(default = "one_usize")]
    pub n: usize,
    #[serde(default)]
    pub stop: StopStrings,
    #[serde(default)]
    pub seed: Option<u64>,
    #[serde(default)]
    pub stream: bool,
    #[serde(default)]
    pub stream_options: Option<stream::StreamOptions>,
}

impl CommonSampling {
    /// Whether a streamed answer ends with a usage chunk.
    pub fn include_usage(&self) -> bool {
        self.stream_options
            .as_ref()
            .is_some_and(|o| o.include_usage)
    }

    /// The engine's parameters: these fields, `max_tokens`, and `top_logprobs` alternatives per
    /// token. Whether to stream is the route's to act on.
    pub fn to_params(
        &self,
        max_tokens: usize,
        top_logprobs: usize,
    ) -> Result<SamplingParams, InferenceError> {
        Ok(SamplingParams {
            temperature: self.temperature,
            top_p: self.top_p,
            max_tokens,
            n: self.n,
            stop: self.stop.clone().into_vec(),
            seed: self.seed,
            top_logprobs,
            prompt_logprobs: None,
        })
    }
}

/// Runs `prompt` with `params` for `caller` through [`admission`]: the server's limits and the
/// caller's quota first, then the engine.
async fn sample(
    state: &AppState,
    engine: &Engine,
    caller: &CallerKey,
    prompt: Vec<u32>,
    params: SamplingParams,
) -> Result<Generation, InferenceError> {
    let request = GenerateRequest { prompt, params };
    admission::generate(&state.inference_limits, engine, caller, request).await
}

fn one_f32() -> f32 {
    1.0
}

fn one_usize() -> usize {
    1
}

/// `max_tokens`' default in `/v1/completions` and `/generate`.
fn sixteen() -> usize {
    16
}

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// A request id in OpenAI's style (`cmpl-…`), unique enough for logs.
fn request_id(prefix: &str) -> String {
    format!("{prefix}-{:016x}", rand::random::<u64>())
}
