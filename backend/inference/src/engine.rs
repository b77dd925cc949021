//! The embedded engine: a llama-architecture GGUF model on the CPU, served by one worker thread.
//!
//! The worker holds up to `max_active` requests at once and advances them in turn, one decoding
//! step each, so a short request is never stuck behind a long one. The `n` completions of one
//! request are decoded together as a batch (the GRPO case: a group of answers to one prompt), which
//! reads the weights once per step for all of them.

use std::path::Path;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Instant;

use candle_core::quantized::gguf_file;
use candle_core::{Device, Tensor};
use rand::rngs::StdRng;
use serde::{Deserialize, Serialize};
use tokio::sync::{mpsc, oneshot};

use crate::llama::{KvCache, Llama, rows};
use crate::sampling::{log_softmax, sample, top_k};
use crate::{EngineError, ModelTokenizer, SamplingParams};

#[derive(Debug, Clone)]
pub struct EngineOptions {
    /// Requests advanced in turn; more wait in the queue.
    pub max_active: usize,
    /// Requests allowed to wait; beyond it callers get [`EngineError::Busy`].
    pub queue: usize,
    /// Longest sequence (prompt plus answer) served, at most the model's own context.
    pub context_cap: usize,
}

impl Default for EngineOptions {
    fn default() -> Self {
        Self {
            max_active: 4,
            queue: 256,
            context_cap: 8192,
        }
    }
}

/// What is loaded, for `/v1/models` and logs.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ModelInfo {
    pub name: String,
    pub context_length: usize,
    pub vocab_size: usize,
}

#[derive(Debug, Clone)]
pub struct GenerateRequest {
    pub prompt: Vec<u32>,
    pub params: SamplingParams,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FinishReason {
    /// The model ended its answer or a stop string appeared.
    Stop,
    /// `max_tokens` was reached.
    Length,
}

impl FinishReason {
    pub fn as_str(self) -> &'static str {
        match self {
            FinishReason::Stop => "stop",
            FinishReason::Length => "length",
        }
    }
}

/// One token with its log-probability under the model (before temperature and top-p).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TokenLogprob {
    pub token: u32,
    pub logprob: f32,
    /// The most likely alternatives, most likely first, when asked for.
    pub top: Vec<(u32, f32)>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Choice {
    /// Generated token ids, the end-of-sequence token included when the model emitted it.
    pub tokens: Vec<u32>,
    pub logprobs: Vec<TokenLogprob>,
    /// The generated text, without the end-of-sequence token and cut before any stop string.
    pub text: String,
    pub finish_reason: FinishReason,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Generation {
    pub prompt_tokens: Vec<u32>,
    /// One entry per prompt token; the first is `None` (nothing precedes it).
    pub prompt_logprobs: Option<Vec<Option<TokenLogprob>>>,
    pub choices: Vec<Choice>,
    pub prompt_seconds: f64,
    pub generation_seconds: f64,
}

impl Generation {
    pub fn completion_tokens(&self) -> usize {
        self.choices.iter().map(|c| c.tokens.len()).sum()
    }
}

/// A cheap handle to the engine's worker; clone it freely.
#[derive(Clone)]
pub struct Engine {
    jobs: mpsc::Sender<Job>,
    tokenizer: Arc<ModelTokenizer>,
    info: Arc<ModelInfo>,
    /// The weights new requests start on; swapped in place by a trainer.
    model: SharedModel,
    /// Bumped by every [`Engine::swap_model`]; rollouts carry it so batches say which weights
    /// produced them.
    weight_version: Arc<AtomicI64>,
}

type SharedModel = Arc<RwLock<Arc<Llama>>>;

struct Job {
    request: GenerateRequest,
    reply: oneshot::Sender<Result<Generation, EngineError>>,
}

impl Engine {
    /// Loads a model and starts its worker thread: a GGUF file (weights and tokenizer), or a
    /// Hugging Face llama directory (`config.json`, `*.safetensors`, `tokenizer.json`).
    pub fn load(path: &Path, options: EngineOptions) -> Result<Self, EngineError> {
        let (model, tokenizer, name) = if path.is_dir() {
            let model = Llama::from_safetensors(path, options.context_cap, true)?;
            let tokenizer = ModelTokenizer::from_hf_dir(path)?;
            let name = path
                .file_name()
                .map_or_else(|| "model".into(), |s| s.to_string_lossy().into_owned());
            (model, tokenizer, name)
        } else {
            load_gguf(path, options.context_cap)?
        };
        Self::from_model(model, tokenizer, name, options)
    }

    /// Starts a worker on a model already in memory (a trainer's, or a test's).
    pub fn from_model(
        model: Llama,
        tokenizer: ModelTokenizer,
        name: String,
        options: EngineOptions,
    ) -> Result<Self, EngineError> {
        let context = model.context_length.min(options.context_cap);
        let info = ModelInfo {
            name,
            context_length: context,
            vocab_size: tokenizer.vocab_size(),
        };
        let (jobs, queue) = mpsc::channel(options.queue.max(1));
        let model: SharedModel = Arc::new(RwLock::new(Arc::new(model)));
        let worker = Worker {
            model: model.clone(),
            tokenizer: tokenizer.clone(),
            context,
            max_active: options.max_active.max(1),
        };
        std::thread::Builder::new()
            .name("lachesis-engine".into())
            .spawn(move || worker.run(queue))
            .map_err(|e| EngineError::Io(format!("starting the engine thread: {e}")))?;
        Ok(Self {
            jobs,
            tokenizer: Arc::new(tokenizer),
            info: Arc::new(info),
            model,
            weight_version: Arc::new(AtomicI64::new(0)),
        })
    }

    /// Replaces the weights: requests already running finish on the old ones (their caches were
    /// computed with them), every later request uses the new. Returns the new weight version.
    pub fn swap_model(&self, model: Llama) -> Result<i64, EngineError> {
        let vocab = model.vocab_size();
        if vocab < self.info.vocab_size {
            return Err(EngineError::Model(format!(
                "the new weights have {vocab} embeddings, the tokenizer {} tokens",
                self.info.vocab_size
            )));
        }
        if model.context_length < self.info.context_length {
            return Err(EngineError::Model(format!(
                "the new weights serve {} positions, fewer than the engine's {}",
                model.context_length, self.info.context_length
            )));
        }
        let mut slot = self
            .model
            .write()
            .map_err(|_| EngineError::Model("the model lock is poisoned".into()))?;
        *slot = Arc::new(model);
        Ok(self.weight_version.fetch_add(1, Ordering::SeqCst) + 1)
    }

    /// The version of the weights new requests run on: 0 as loaded, plus one per swap.
    pub fn weight_version(&self) -> i64 {
        self.weight_version.load(Ordering::SeqCst)
    }

    pub fn tokenizer(&self) -> &ModelTokenizer {
        &self.tokenizer
    }

    pub fn info(&self) -> &ModelInfo {
        &self.info
    }

    /// Generates `params.n` completions of `prompt`. Dropping the future cancels the work.
    pub async fn generate(&self, request: GenerateRequest) -> Result<Generation, EngineError> {
        request.params.validate()?;
        if request.prompt.is_empty() {
            return Err(EngineError::InvalidRequest("the prompt is empty".into()));
        }
        let vocab = self.info.vocab_size as u32;
        if let Some(bad) = request.prompt.iter().find(|&&t| t >= vocab) {
            return Err(EngineError::InvalidRequest(format!(
                "token id {bad} is outside the vocabulary of {vocab}"
            )));
        }
        let needed = request.prompt.len() + request.params.max_tokens;
        if needed > self.info.context_length {
            return Err(EngineError::ContextLength {
                prompt: request.prompt.len(),
                max_tokens: request.params.max_tokens,
                context: self.info.context_length,
            });
        }
        let (reply, answer) = oneshot::channel();
        self.jobs
            .try_send(Job { request, reply })
            .map_err(|e| match e {
                mpsc::error::TrySendError::Full(_) => EngineError::Busy(self.jobs.max_capacity()),
                mpsc::error::TrySendError::Closed(_) => EngineError::Stopped,
            })?;
        answer.await.map_err(|_| EngineError::Stopped)?
    }
}

/// A GGUF file's model, tokenizer and name.
fn load_gguf(
    path: &Path,
    context_cap: usize,
) -> Result<(Llama, ModelTokenizer, String), EngineError> {
    let mut file = std::fs::File::open(path)
        .map_err(|e| EngineError::Model(format!("opening {}: {e}", path.display())))?;
    let content = gguf_file::Content::read(&mut file)
        .map_err(|e| EngineError::Model(format!("{} is not a GGUF file: {e}", path.display())))?;
    let architecture = content
        .metadata
        .get("general.architecture")
        .and_then(|v| v.to_string().ok().cloned())
        .unwrap_or_default();
    if architecture != "llama" {
        return Err(EngineError::Model(format!(
            "architecture {architecture:?} is not supported (llama is)"
        )));
    }
    let tokenizer = ModelTokenizer::from_gguf(&content)?;
    let name = content
        .metadata
        .get("general.name")
        .and_then(|v| v.to_string().ok().cloned())
        .or_else(|| path.file_stem().map(|s| s.to_string_lossy().into_owned()))
        .unwrap_or_else(|| "model".into());
    let model = Llama::from_gguf(&content, &mut file, context_cap, true)?;
    Ok((model, tokenizer, name))
}

struct Worker {
    model: SharedModel,
    tokenizer: ModelTokenizer,
    context: usize,
    max_active: usize,
}

impl Worker {
    fn current(&self) -> Arc<Llama> {
        // A poisoned lock only means a swap panicked midway; the Arc inside is still whole.
        match self.model.read() {
            Ok(model) => model.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    fn run(self, mut queue: mpsc::Receiver<Job>) {
        let mut active: Vec<Session> = Vec::new();
        loop {
            while active.len() < self.max_active {
                match queue.try_recv() {
                    Ok(job) => active.push(Session::new(job, self.current())),
                    Err(_) => break,
                }
            }
            if active.is_empty() {
                match queue.blocking_recv() {
                    Some(job) => active.push(Session::new(job, self.current())),
                    None => return,
                }
                continue;
            }
            let mut index = 0;
            while index < active.len() {
                let session = &mut active[index];
                let outcome = if session.job.reply.is_closed() {
                    Some(Err(EngineError::Stopped))
                } else {
                    session.step(&self.tokenizer, self.context).transpose()
                };
                match outcome {
                    None => index += 1,
                    Some(result) => {
                        let session = active.swap_remove(index);
                        // A caller that went away no longer wants the answer.
                        let _ = session.job.reply.send(result);
                    }
                }
            }
        }
    }
}

struct ChoiceState {
    tokens: Vec<u32>,
    logprobs: Vec<TokenLogprob>,
    text: String,
    finished: Option<FinishReason>,
}

/// One request in progress, with its own KV cache (the weights are shared).
struct Session {
    job: Job,
    model: Arc<Llama>,
    cache: KvCache,
    rng: StdRng,
    choices: Vec<ChoiceState>,
    prompt_logprobs: Option<Vec<Option<TokenLogprob>>>,
    /// Position of the next token fed to the model; 0 until the prompt has been read.
    position: usize,
    started: Instant,
    prompt_seconds: f64,
}

impl Session {
    fn new(job: Job, model: Arc<Llama>) -> Self {
        let n = job.request.params.n;
        Self {
            cache: model.new_cache(),
            rng: job.request.params.rng(),
            job,
            model,
            choices: (0..n)
                .map(|_| ChoiceState {
                    tokens: Vec::new(),
                    logprobs: Vec::new(),
                    text: String::new(),
                    finished: None,
                })
                .collect(),
            prompt_logprobs: None,
            position: 0,
            started: Instant::now(),
            prompt_seconds: 0.0,
        }
    }

    /// Advances by one token per choice (the first step reads the whole prompt). Returns the
    /// finished generation when every choice is done.
    fn step(
        &mut self,
        tokenizer: &ModelTokenizer,
        context: usize,
    ) -> Result<Option<Generation>, EngineError> {
        let prompt = &self.job.request.prompt;
        let params = &self.job.request.params;
        let n = params.n;
        let rows = if self.position == 0 {
            // The prompt is read once, for one row; its cache is then repeated for the n answers.
            let input = Tensor::new(prompt.as_slice(), &Device::Cpu)?.unsqueeze(0)?;
            let every_position = params.prompt_logprobs.is_some();
            let logits = self
                .model
                .forward(&input, 0, &mut self.cache, every_position)?;
            let mut all = rows(&logits)?;
            let last = all.pop().unwrap_or_default();
            if let Some(k) = params.prompt_logprobs {
                self.prompt_logprobs = Some(score_prompt(prompt, &all, k));
            }
            if n > 1 {
                self.cache = self.cache.repeat_rows(n)?;
            }
            self.position = prompt.len();
            self.prompt_seconds = self.started.elapsed().as_secs_f64();
            vec![last; n]
        } else {
            let last: Vec<u32> = self
                .choices
                .iter()
                .map(|c| c.tokens.last().copied().unwrap_or(0))
                .collect();
            let input = Tensor::new(last.as_slice(), &Device::Cpu)?.unsqueeze(1)?;
            let logits = self
                .model
                .forward(&input, self.position, &mut self.cache, false)?;
            self.position += 1;
            rows(&logits)?
        };
        let eos = tokenizer.eos_token_id();
        for (choice, row) in self.choices.iter_mut().zip(rows) {
            if choice.finished.is_some() {
                continue;
            }
            let lps = log_softmax(&row);
            let token = sample(&lps, params.temperature, params.top_p, &mut self.rng)?;
            choice.tokens.push(token);
            choice.logprobs.push(TokenLogprob {
                token,
                logprob: lps[token as usize],
                top: top_k(&lps, params.top_logprobs),
            });
            if token == eos {
                choice.finished = Some(FinishReason::Stop);
                continue;
            }
            // Stop strings need the text at every step; otherwise it is decoded once at the end.
            if !params.stop.is_empty() {
                choice.text = tokenizer.decode(&choice.tokens)?;
                if let Some(cut) = first_stop(&choice.text, &params.stop) {
                    choice.text.truncate(cut);
                    choice.finished = Some(FinishReason::Stop);
                    continue;
                }
            }
            if choice.tokens.len() >= params.max_tokens || self.position + 1 >= context {
                choice.finished = Some(FinishReason::Length);
            }
        }
        if self.choices.iter().any(|c| c.finished.is_none()) {
            return Ok(None);
        }
        let mut choices = Vec::with_capacity(self.choices.len());
        for c in self.choices.drain(..) {
            let text = if params.stop.is_empty() {
                let spoken = match c.tokens.split_last() {
                    Some((&last, rest)) if last == eos => rest,
                    _ => &c.tokens[..],
                };
                tokenizer.decode(spoken)?
            } else {
                c.text
            };
            choices.push(Choice {
                tokens: c.tokens,
                logprobs: c.logprobs,
                text,
                finish_reason: c.finished.unwrap_or(FinishReason::Length),
            });
        }
        let total = self.started.elapsed().as_secs_f64();
        Ok(Some(Generation {
            prompt_tokens: prompt.clone(),
            prompt_logprobs: self.prompt_logprobs.take(),
            choices,
            prompt_seconds: self.prompt_seconds,
            generation_seconds: total - self.prompt_seconds,
        }))
    }
}

/// Byte offset of the earliest stop string in `text`.
fn first_stop(text: &str, stops: &[String]) -> Option<usize> {
    stops.iter().filter_map(|s| text.find(s.as_str())).min()
}

/// The log-probability of each prompt token given the ones before it, from the logits of every
/// prompt position but the last (`rows[i]` predicts token `i + 1`).
fn score_prompt(prompt: &[u32], rows: &[Vec<f32>], k: usize) -> Vec<Option<TokenLogprob>> {
    let mut scored = vec![None];
    for (row, &token) in rows.iter().zip(prompt.iter().skip(1)) {
        let lps = log_softmax(row);
        scored.push(Some(TokenLogprob {
            token,
            logprob: lps
                .get(token as usize)
                .copied()
                .unwrap_or(f32::NEG_INFINITY),
            top: top_k(&lps, k),
        }));
    }
    scored
}

#[cfg(test)]
mod tests {
    use super::first_stop;

    #[test]
    fn the_earliest_stop_string_wins() {
        let stops = vec!["\n\n".to_owned(), "Answer".to_owned()];
        assert_eq!(first_stop("x = 4\n\nAnswer", &stops), Some(5));
        assert_eq!(first_stop("no stop here", &stops), None);
    }
}
