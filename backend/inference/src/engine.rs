//! The embedded engine: a llama-architecture GGUF model on the CPU, served by one supervised
//! worker thread (see [`crate::worker`]), with a bounded number of requests admitted at once.

use std::path::Path;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use candle_core::quantized::gguf_file;
use serde::{Deserialize, Serialize};
use tokio::sync::{mpsc, oneshot};

use crate::backoff::Backoff;
use crate::llama::{Llama, Precision};
use crate::worker::{Admitted, Command, Job, SharedModel, Worker, WorkerHealth};
use crate::{EngineError, ModelTokenizer, SamplingParams};

#[derive(Debug, Clone)]
pub struct EngineOptions {
    /// Requests advanced in turn, each holding its KV cache; more wait in the queue.
    pub max_active: usize,
    /// Requests allowed to wait besides the `max_active` running ones. One more is refused at
    /// once with [`EngineError::Busy`], so the engine never holds more than the two together.
    pub queue: usize,
    /// Longest sequence (prompt plus answer) served, at most the model's own context.
    pub context_cap: usize,
    /// The pause before the worker starts again after a panic.
    pub restart_backoff: Backoff,
    /// How the loaded model's matrices are held.
    pub precision: Precision,
}

impl Default for EngineOptions {
    fn default() -> Self {
        Self {
            max_active: 4,
            queue: 60,
            context_cap: 8192,
            restart_backoff: Backoff::default(),
            precision: Precision::default(),
        }
    }
}

/// What is loaded, for `/v1/models`, logs and the cost of a request.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ModelInfo {
    pub name: String,
    pub context_length: usize,
    pub vocab_size: usize,
    /// Bytes of KV cache one token of one sequence holds (every layer's key and value, f32).
    pub kv_bytes_per_token: usize,
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

/// One token as the engine samples it, before the answer is finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamedToken {
    /// Which of the request's `n` completions it belongs to.
    pub choice: usize,
    pub token: u32,
}

/// A cheap handle to the engine's worker; clone it freely.
#[derive(Clone)]
pub struct Engine {
    jobs: mpsc::Sender<Command>,
    tokenizer: Arc<ModelTokenizer>,
    info: Arc<ModelInfo>,
    /// The weights new requests start on; swapped in place by a trainer.
    model: SharedModel,
    /// Bumped by every [`Engine::swap_model`]; rollouts carry it so batches say which weights
    /// produced them.
    weight_version: Arc<AtomicI64>,
    /// Requests queued or running, against `max_active + queue`.
    admitted: Arc<Admitted>,
    /// Restarts of the worker loop after panics, and whether it is pausing before one.
    health: Arc<Mutex<WorkerHealth>>,
}

impl Engine {
    /// Loads a model and starts its worker thread: a GGUF file (weights and tokenizer), or a
    /// Hugging Face llama directory (`config.json`, `*.safetensors`, `tokenizer.json`).
    pub fn load(path: &Path, options: EngineOptions) -> Result<Self, EngineError> {
        let (model, tokenizer, name) = if path.is_dir() {
            let quantize = options.precision == Precision::Quantized;
            let model = Llama::from_safetensors(path, options.context_cap, quantize)?;
            let tokenizer = ModelTokenizer::from_hf_dir(path)?;
            let name = path
                .file_name()
                .map_or_else(|| "model".into(), |s| s.to_string_lossy().into_owned());
            (model, tokenizer, name)
        } else {
            load_gguf(path, options.context_cap, options.precision)?
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
            kv_bytes_per_token: model.kv_bytes_per_token(),
        };
        let max_active = options.max_active.max(1);
        let admitted = Admitted::new(max_active + options.queue);
        // Every queued job holds an admission slot, so the channel is never the tighter bound.
        let (jobs, queue) = mpsc::channel(admitted.limit);
        let model: SharedModel = Arc::new(RwLock::new(Arc::new(model)));
        let health = Arc::new(Mutex::new(WorkerHealth::default()));
        let worker = Worker {
            model: model.clone(),
            tokenizer: tokenizer.clone(),
            context,
            max_active,
            backoff: options.restart_backoff,
            health: health.clone(),
        };
        std::thread::Builder::new()
            .name("lachesis-engine".into())
            .spawn(move || worker.supervise(queue))
            .map_err(|e| EngineError::Io(format!("starting the engine thread: {e}")))?;
        Ok(Self {
            jobs,
            tokenizer: Arc::new(tokenizer),
            info: Arc::new(info),
            model,
            weight_version: Arc::new(AtomicI64::new(0)),
            admitted,
            health,
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
        // Callers priced their requests' memory with the loaded shape; a new one would lie to them.
        if model.kv_bytes_per_token() != self.info.kv_bytes_per_token {
            return Err(EngineError::Model(format!(
                "the new weights hold {} KV bytes per token, the loaded ones {}",
                model.kv_bytes_per_token(),
                self.info.kv_bytes_per_token
            )));
        }
        let mut slot = self
            .model
            .write()
            .map_err(|_| EngineError::Model("the model lock is poisoned".into()))?;
        *slot = Arc::new(model);
        Ok(self.weight_version.fetch_add(1, Ordering::SeqCst) + 1)
    }

    /// Starts this engine's weight count at `version` instead of 0: a server that replaces a
    /// named adapter with a new engine keeps counting where the old one stopped.
    pub fn with_weight_version(self, version: i64) -> Self {
        self.weight_version.store(version, Ordering::SeqCst);
        self
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

    /// How many times the worker panicked and was restarted since the engine started.
    pub fn restarts(&self) -> u64 {
        self.health().restarts
    }

    /// The worker's restarts, last panic and whether it is pausing before starting again.
    pub fn health(&self) -> WorkerHealth {
        self.health
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Makes the worker panic at its next turn, to exercise the restart. Not for production use.
    #[doc(hidden)]
    pub fn crash_worker_for_tests(&self) -> Result<(), EngineError> {
        self.jobs.try_send(Command::Crash).map_err(|e| match e {
            mpsc::error::TrySendError::Full(_) => EngineError::Busy(self.admitted.limit),
            mpsc::error::TrySendError::Closed(_) => EngineError::Stopped,
        })
    }

    /// Generates `params.n` completions of `prompt`. Dropping the future cancels the work.
    pub async fn generate(&self, request: GenerateRequest) -> Result<Generation, EngineError> {
        self.run(request, None).await
    }

    /// As [`Engine::generate`], also sending every token to `tokens` the moment it is sampled
    /// (the end-of-sequence token included, and tokens past a stop string that the finished
    /// text leaves out).
    pub async fn generate_streaming(
        &self,
        request: GenerateRequest,
        tokens: mpsc::UnboundedSender<StreamedToken>,
    ) -> Result<Generation, EngineError> {
        self.run(request, Some(tokens)).await
    }

    /// The checks every request passes before it is queued: sampling parameters, a prompt of
    /// known tokens, and room in the context for the answer.
    pub fn check(&self, request: &GenerateRequest) -> Result<(), EngineError> {
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
        let needed = request
            .prompt
            .len()
            .saturating_add(request.params.max_tokens);
        if needed > self.info.context_length {
            return Err(EngineError::ContextLength {
                prompt: request.prompt.len(),
                max_tokens: request.params.max_tokens,
                context: self.info.context_length,
            });
        }
        Ok(())
    }

    async fn run(
        &self,
        request: GenerateRequest,
        tokens: Option<mpsc::UnboundedSender<StreamedToken>>,
    ) -> Result<Generation, EngineError> {
        self.check(&request)?;
        let slot = self
            .admitted
            .claim()
            .ok_or(EngineError::Busy(self.admitted.limit))?;
        let (reply, answer) = oneshot::channel();
        self.jobs
            .try_send(Command::Generate(Job {
                request,
                reply,
                tokens,
                _slot: slot,
            }))
            .map_err(|e| match e {
                mpsc::error::TrySendError::Full(_) => EngineError::Busy(self.admitted.limit),
                mpsc::error::TrySendError::Closed(_) => EngineError::Stopped,
            })?;
        answer.await.map_err(|_| EngineError::Stopped)?
    }
}

/// A GGUF file's model, tokenizer and name.
fn load_gguf(
    path: &Path,
    context_cap: usize,
    precision: Precision,
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
    let model = Llama::from_gguf(&content, &mut file, context_cap, precision)?;
    Ok((model, tokenizer, name))
}
