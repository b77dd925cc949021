//! Inference for Lachesis: the embedded engine that runs a llama-architecture GGUF model on the CPU
//! with candle, its tokenizer and chat template, and token sampling.
//!
//! Kept apart from the server crate so candle is compiled once and the server rebuilds quickly.

pub mod backoff;
mod engine;
mod hf;
mod incremental;
pub mod llama;
mod sampling;
mod tokenizer;
mod worker;

pub use engine::{
    Choice, Engine, EngineOptions, FinishReason, GenerateRequest, Generation, ModelInfo,
    StreamedToken, TokenLogprob,
};
pub use incremental::IncrementalText;
pub use llama::Precision;
pub use sampling::{MAX_CHOICES, MAX_TOP_LOGPROBS, SamplingParams, log_softmax, sample, top_k};
pub use tokenizer::{ChatMessage, ModelTokenizer};
pub use worker::WorkerHealth;

/// Everything the engine can refuse or fail at, each kind mapped to one HTTP status by callers.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum EngineError {
    /// The request asks for something impossible (a 400 or 422).
    #[error("{0}")]
    InvalidRequest(String),
    /// The prompt plus `max_tokens` does not fit the model's context (a 400).
    #[error(
        "the prompt ({prompt} tokens) plus max_tokens ({max_tokens}) exceeds the context of {context} tokens"
    )]
    ContextLength {
        prompt: usize,
        max_tokens: usize,
        context: usize,
    },
    /// As many requests as the engine admits are already queued or running (a 503 with
    /// `Retry-After`; retry later).
    #[error("the engine is busy: {0} requests are already running or waiting; retry later")]
    Busy(usize),
    /// The engine's worker has stopped.
    #[error("the engine has stopped")]
    Stopped,
    /// The worker panicked while running this request; it was restarted and serves later ones
    /// (a 500).
    #[error("the engine failed while running this request and was restarted")]
    WorkerCrashed,
    /// The model file is missing, unreadable or of an unsupported kind.
    #[error("model: {0}")]
    Model(String),
    #[error("tokenizer: {0}")]
    Tokenizer(String),
    #[error("chat template: {0}")]
    Template(String),
    #[error("{0}")]
    Io(String),
}

impl From<candle_core::Error> for EngineError {
    fn from(e: candle_core::Error) -> Self {
        EngineError::Model(e.to_string())
    }
}
