//! vLLM's `/generate`, in the shape the Atropos example trainer's vLLM server answers and
//! atroposlib's `VLLMServer` reads: prompt token ids in; per choice the text, token ids and, for each
//! token, `[{"<token id>": logprob, ...}]` with the sampled token first.

use axum::Json;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use lachesis_inference::TokenLogprob;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use super::quota::CallerKey;
use super::{CommonSampling, InferenceError, InferenceJson, engine_for, sample};
use crate::app::AppState;

#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum GeneratePrompt {
    Text(String),
    Tokens { prompt_token_ids: Vec<u32> },
}

#[derive(Debug, Deserialize)]
pub struct VllmGenerateRequest {
    /// Not in vLLM's `/generate`: a loaded LoRA adapter's name picks it, as `model` does in the
    /// OpenAI routes; absent or any other name, the base answers.
    #[serde(default)]
    pub model: Option<String>,
    pub prompt: GeneratePrompt,
    #[serde(default = "super::sixteen")]
    pub max_tokens: usize,
    /// Alternatives per generated token; present (even 0) means "report logprobs".
    #[serde(default)]
    pub logprobs: Option<usize>,
    #[serde(default)]
    pub prompt_logprobs: Option<usize>,
    #[serde(flatten)]
    pub sampling: CommonSampling,
}

pub async fn generate(
    State(state): State<AppState>,
    caller: CallerKey,
    InferenceJson(request): InferenceJson<VllmGenerateRequest>,
) -> Result<Response, InferenceError> {
    let engine = &engine_for(&state, request.model.as_deref())?;
    let weight_version = engine.weight_version();
    let prompt = match request.prompt {
        GeneratePrompt::Text(text) => engine.tokenizer().encode(&text)?,
        GeneratePrompt::Tokens { prompt_token_ids } => prompt_token_ids,
    };
    let mut params = request
        .sampling
        .to_params(request.max_tokens, request.logprobs.unwrap_or(0))?;
    params.prompt_logprobs = request.prompt_logprobs;
    let generation = sample(&state, engine, &caller, prompt, params).await?;
    let prompt_text = engine.tokenizer().decode(&generation.prompt_tokens)?;
    let logprobs = request.logprobs.map(|_| {
        generation
            .choices
            .iter()
            .map(|c| c.logprobs.iter().map(|lp| [token_entry(lp)]).collect())
            .collect()
    });
    let prompt_logprobs = generation
        .prompt_logprobs
        .as_ref()
        .map(|scored| scored.iter().map(|e| e.as_ref().map(token_entry)).collect());
    Ok(Json(GenerateResponse {
        text: generation.choices.iter().map(|c| c.text.as_str()).collect(),
        prompt: prompt_text,
        finish_reasons: generation
            .choices
            .iter()
            .map(|c| c.finish_reason.as_str())
            .collect(),
        prompt_token_ids: &generation.prompt_tokens,
        token_ids: generation
            .choices
            .iter()
            .map(|c| c.tokens.as_slice())
            .collect(),
        logprobs,
        prompt_logprobs,
        weight_version,
    })
    .into_response())
}

#[derive(Serialize)]
struct GenerateResponse<'a> {
    text: Vec<&'a str>,
    prompt: String,
    finish_reasons: Vec<&'static str>,
    prompt_token_ids: &'a [u32],
    token_ids: Vec<&'a [u32]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    logprobs: Option<Vec<Vec<[Box<RawValue>; 1]>>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    prompt_logprobs: Option<Vec<Option<Box<RawValue>>>>,
    /// Not in vLLM's answer: which weights answered (see the OpenAI routes).
    weight_version: i64,
}

/// `{"<chosen id>": logprob, "<alternative id>": logprob, ...}`, the chosen token first: atroposlib
/// reads the first key as the sampled token, and serde_json's maps would sort the keys.
fn token_entry(lp: &TokenLogprob) -> Box<RawValue> {
    let mut text = String::from("{");
    let mut seen = Vec::with_capacity(lp.top.len() + 1);
    for (id, logprob) in std::iter::once((lp.token, lp.logprob)).chain(lp.top.iter().copied()) {
        if seen.contains(&id) {
            continue;
        }
        if !seen.is_empty() {
            text.push(',');
        }
        seen.push(id);
        // Non-finite logprobs become null, as serde_json writes them.
        let value = serde_json::to_string(&logprob).unwrap_or_else(|_| "null".into());
        text.push_str(&format!("\"{id}\":{value}"));
    }
    text.push('}');
    RawValue::from_string(text).expect("token ids and numbers form valid JSON")
}
