//! OpenAI-compatible endpoints over the embedded engine, with logprobs in OpenAI's two shapes
//! (legacy completions: parallel arrays; chat: a `content` list of token entries).
//!
//! Chat completions take OpenAI's `tools` and `tool_choice`, `tool` messages and assistant
//! `tool_calls`, and answer calls as `message.tool_calls`; how, and what a malformed call becomes,
//! is in `tools.rs`.

use axum::Json;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use lachesis_inference::{Choice, Engine, GenerateRequest, Generation, TokenLogprob};
use serde::Deserialize;
use serde_json::{Value, json};

use super::quota::CallerKey;
use super::stream::{self, StreamShape};
use super::tools::{WireToolChoice, answer_message, offered};
use super::{
    CommonSampling, InferenceError, InferenceJson, engine, engine_for, request_id, sample, unix_now,
};
use crate::app::AppState;
use crate::policy::tool_chat::{
    ToolChoice, WireMessage, WireMessageError, WireTool, from_wire_messages, offer_tools,
};

pub async fn models(State(state): State<AppState>) -> Result<Json<Value>, InferenceError> {
    let engine = engine(&state)?;
    let base = &engine.info().name;
    let mut data = vec![json!({
        "id": base,
        "object": "model",
        "created": unix_now(),
        "owned_by": "lachesis",
        "max_model_len": engine.info().context_length,
        "weight_version": engine.weight_version(),
    })];
    // Adapters are listed as vLLM lists them: their own id, the base as `parent`.
    for name in state.weights.adapter_names() {
        if let Some(adapter) = state.weights.adapter(&name) {
            data.push(json!({
                "id": name,
                "object": "model",
                "created": unix_now(),
                "owned_by": "lachesis",
                "parent": base,
                "max_model_len": adapter.info().context_length,
                "weight_version": adapter.weight_version(),
            }));
        }
    }
    Ok(Json(json!({"object": "list", "data": data})))
}

/// `prompt` in `/v1/completions`: text, or token ids (one prompt per request).
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum PromptInput {
    Text(String),
    Tokens(Vec<u32>),
    Batch(Vec<PromptInput>),
}

#[derive(Debug, Deserialize)]
pub struct CompletionRequest {
    #[serde(default)]
    pub model: Option<String>,
    pub prompt: PromptInput,
    #[serde(default = "super::sixteen")]
    pub max_tokens: usize,
    /// Alternatives per token; `Some(0)` still reports the chosen token's logprob.
    #[serde(default)]
    pub logprobs: Option<usize>,
    #[serde(default)]
    pub echo: bool,
    #[serde(flatten)]
    pub sampling: CommonSampling,
}

pub async fn completions(
    State(state): State<AppState>,
    caller: CallerKey,
    InferenceJson(request): InferenceJson<CompletionRequest>,
) -> Result<Response, InferenceError> {
    let reply = Reply::to(&state, request.model)?;
    let engine = &reply.engine;
    let prompt = match request.prompt {
        PromptInput::Text(text) => engine.tokenizer().encode(&text)?,
        PromptInput::Tokens(ids) => ids,
        PromptInput::Batch(mut prompts) if prompts.len() == 1 => match prompts.remove(0) {
            PromptInput::Text(text) => engine.tokenizer().encode(&text)?,
            PromptInput::Tokens(ids) => ids,
            PromptInput::Batch(_) => {
                return Err(InferenceError::bad("nested prompt lists", "prompt"));
            }
        },
        PromptInput::Batch(_) => {
            return Err(InferenceError::bad(
                "send one prompt per request (use n for several completions)",
                "prompt",
            ));
        }
    };
    if request.echo {
        return Err(InferenceError::bad("echo is not supported", "echo"));
    }
    let params = request
        .sampling
        .to_params(request.max_tokens, request.logprobs.unwrap_or(0))?;
    if request.sampling.stream {
        if request.logprobs.is_some() {
            return Err(not_streamed("logprobs"));
        }
        let usage = request.sampling.include_usage();
        let generate = GenerateRequest { prompt, params };
        return reply.stream(&state, &caller, generate, StreamKind::Completion, usage);
    }
    let generation = sample(&state, engine, &caller, prompt, params).await?;
    let shown = |index: usize, choice: &Choice| {
        let logprobs = request
            .logprobs
            .map(|_| legacy_logprobs(engine, &choice.logprobs));
        json!({
            "index": index,
            "text": choice.text,
            "logprobs": logprobs,
            "finish_reason": choice.finish_reason.as_str(),
        })
    };
    Ok(reply
        .envelope("cmpl", "text_completion", &generation, shown)
        .into_response())
}

#[derive(Debug, Deserialize)]
pub struct ChatRequest {
    #[serde(default)]
    pub model: Option<String>,
    /// OpenAI's shape: assistant messages may carry `tool_calls` (content then may be `null`),
    /// `tool` messages a `tool_call_id`.
    pub messages: Vec<WireMessage>,
    #[serde(default)]
    pub tools: Vec<WireTool>,
    #[serde(default)]
    pub tool_choice: Option<WireToolChoice>,
    #[serde(default)]
    pub max_tokens: Option<usize>,
    #[serde(default)]
    pub max_completion_tokens: Option<usize>,
    #[serde(default)]
    pub logprobs: bool,
    #[serde(default)]
    pub top_logprobs: Option<usize>,
    #[serde(flatten)]
    pub sampling: CommonSampling,
}

pub async fn chat_completions(
    State(state): State<AppState>,
    caller: CallerKey,
    InferenceJson(request): InferenceJson<ChatRequest>,
) -> Result<Response, InferenceError> {
    let reply = Reply::to(&state, request.model)?;
    let engine = &reply.engine;
    if request.messages.is_empty() {
        return Err(InferenceError::bad(
            "messages must not be empty",
            "messages",
        ));
    }
    let (tools, tool_choice) =
        offered(&state.inference_limits, request.tools, request.tool_choice)?;
    let messages = from_wire_messages(request.messages).map_err(|e| {
        let index = match &e {
            WireMessageError::NoContent { index } | WireMessageError::Call { index, .. } => *index,
        };
        InferenceError::bad(e.to_string(), &format!("messages[{index}]"))
    })?;
    // Rendered as the embedded policy renders a request with tools, so what a client sees here is
    // what an environment's rollouts see.
    let tools_offered = !tools.is_empty() && tool_choice != ToolChoice::None;
    let messages = offer_tools(&messages, &tools, &tool_choice);
    let text = engine.tokenizer().apply_chat_template(&messages, true)?;
    let prompt = engine.tokenizer().encode(&text)?;
    // Without a limit the answer may fill the context; 512 keeps a forgotten field from doing so.
    let max_tokens = request
        .max_completion_tokens
        .or(request.max_tokens)
        .unwrap_or(512)
        .min(
            engine
                .info()
                .context_length
                .saturating_sub(prompt.len())
                .max(1),
        );
    let params = request
        .sampling
        .to_params(max_tokens, request.top_logprobs.unwrap_or(0))?;
    if request.sampling.stream {
        if request.logprobs {
            return Err(not_streamed("logprobs"));
        }
        let usage = request.sampling.include_usage();
        let generate = GenerateRequest { prompt, params };
        let kind = StreamKind::Chat { tools_offered };
        return reply.stream(&state, &caller, generate, kind, usage);
    }
    let generation = sample(&state, engine, &caller, prompt, params).await?;
    let shown = |index: usize, choice: &Choice| {
        let logprobs = request.logprobs.then(|| {
            json!({"content": choice.logprobs.iter()
                .filter(|lp| lp.token != engine.tokenizer().eos_token_id())
                .map(|lp| chat_token_entry(engine, lp))
                .collect::<Vec<_>>()})
        });
        let (message, finish_reason) =
            answer_message(&choice.text, tools_offered, choice.finish_reason.as_str());
        json!({
            "index": index,
            "message": message,
            "logprobs": logprobs,
            "finish_reason": finish_reason,
        })
    };
    Ok(reply
        .envelope("chatcmpl", "chat.completion", &generation, shown)
        .into_response())
}

/// What a completion answer names besides its choices: the engine the request's `model` picked,
/// the version of its weights when the request came (before sampling), and that `model`.
struct Reply {
    engine: Engine,
    weight_version: i64,
    model: Option<String>,
}

/// Which endpoint's chunks a streamed answer is made of.
enum StreamKind {
    Completion,
    Chat { tools_offered: bool },
}

fn not_streamed(param: &str) -> InferenceError {
    InferenceError::bad(
        format!("{param} are not sent in a streamed answer; send stream: false for them"),
        param,
    )
}

impl Reply {
    /// Checks, admits and charges `request` as an unstreamed one would be (a refusal is an HTTP
    /// status), then answers with its chunks as they are written.
    fn stream(
        &self,
        state: &AppState,
        caller: &CallerKey,
        request: GenerateRequest,
        kind: StreamKind,
        include_usage: bool,
    ) -> Result<Response, InferenceError> {
        self.engine.check(&request)?;
        let reservation =
            super::admission::reserve(&state.inference_limits, &self.engine, caller, &request)?;
        let (chat, tools_offered, id_prefix) = match kind {
            StreamKind::Completion => (false, false, "cmpl"),
            StreamKind::Chat { tools_offered } => (true, tools_offered, "chatcmpl"),
        };
        let shape = StreamShape {
            id: request_id(id_prefix),
            model: self
                .model
                .clone()
                .unwrap_or_else(|| self.engine.info().name.clone()),
            created: unix_now(),
            weight_version: self.weight_version,
            chat,
            tools_offered,
            include_usage,
        };
        Ok(stream::respond(self.engine.clone(), reservation, request, shape).into_response())
    }

    fn to(state: &AppState, model: Option<String>) -> Result<Self, InferenceError> {
        let engine = engine_for(state, model.as_deref())?;
        Ok(Self {
            weight_version: engine.weight_version(),
            engine,
            model,
        })
    }

    /// `generation`'s choices, each as `choice` shows it at its index, in the fields every OpenAI
    /// completion answer carries.
    fn envelope(
        &self,
        id_prefix: &str,
        object: &str,
        generation: &Generation,
        choice: impl Fn(usize, &Choice) -> Value,
    ) -> Json<Value> {
        let choices: Vec<Value> = generation
            .choices
            .iter()
            .enumerate()
            .map(|(index, c)| choice(index, c))
            .collect();
        let model = self.model.as_deref().unwrap_or(&self.engine.info().name);
        Json(json!({
            "id": request_id(id_prefix),
            "object": object,
            "created": unix_now(),
            "model": model,
            "choices": choices,
            "usage": usage(generation),
            // Not in OpenAI's answer: which weights answered (0 as loaded, one more per load), so
            // a rollout from another process can say which policy version produced it.
            "weight_version": self.weight_version,
        }))
    }
}

fn usage(generation: &Generation) -> Value {
    let prompt = generation.prompt_tokens.len();
    let completion = generation.completion_tokens();
    json!({
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    })
}

/// A token's text as OpenAI shows it: the decoded string, not the byte-level vocabulary form.
fn token_text(engine: &Engine, token: u32) -> String {
    engine.tokenizer().decode(&[token]).unwrap_or_default()
}

fn chat_token_entry(engine: &Engine, lp: &TokenLogprob) -> Value {
    let text = token_text(engine, lp.token);
    json!({
        "token": text,
        "logprob": lp.logprob,
        "bytes": text.as_bytes(),
        "top_logprobs": lp.top.iter().map(|(id, logprob)| {
            let alt = token_text(engine, *id);
            json!({"token": alt, "logprob": logprob, "bytes": alt.as_bytes()})
        }).collect::<Vec<_>>(),
    })
}

fn legacy_logprobs(engine: &Engine, logprobs: &[TokenLogprob]) -> Value {
    let mut offset = 0;
    let mut tokens = Vec::with_capacity(logprobs.len());
    let mut offsets = Vec::with_capacity(logprobs.len());
    for lp in logprobs {
        let text = token_text(engine, lp.token);
        offsets.push(offset);
        offset += text.len();
        tokens.push(text);
    }
    json!({
        "tokens": tokens,
        "token_logprobs": logprobs.iter().map(|lp| lp.logprob).collect::<Vec<_>>(),
        "top_logprobs": logprobs.iter().map(|lp| {
            lp.top.iter()
                .map(|(id, logprob)| (token_text(engine, *id), json!(logprob)))
                .collect::<serde_json::Map<String, Value>>()
        }).collect::<Vec<_>>(),
        "text_offset": offsets,
    })
}
