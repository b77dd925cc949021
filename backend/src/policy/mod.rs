//! Policies: whatever answers an environment's prompts. An LLM behind an OpenAI-compatible or vLLM
//! server, the embedded model, or a built-in baseline. Every policy returns rollouts in Atropos's
//! training format (token ids, masks, inference logprobs), so environments never care which it is.

pub mod client;
pub mod embedded;
pub mod openai;
pub mod openai_policy;
pub mod rollout;
pub mod tool_chat;
pub mod vllm;
mod wire;

#[cfg(test)]
mod parse_props;
#[cfg(test)]
mod testing;
#[cfg(test)]
mod tool_policy_tests;

pub use client::{Backoff, ServerPool, ServerPoolConfig, ServerStatus};
pub use embedded::EmbeddedPolicy;
pub use openai_policy::OpenAiPolicy;
pub use rollout::{join_turns, rollout_from_ids};
pub use vllm::VllmPolicy;

use futures::future::BoxFuture;
use lachesis_inference::ChatMessage;
use lachesis_shared::tools::ToolSpec;
use serde::{Deserialize, Serialize};

/// One prompt to complete `n` times.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PolicyRequest {
    pub messages: Vec<ChatMessage>,
    pub n: usize,
    pub max_tokens: usize,
    pub temperature: f32,
    pub top_p: f32,
    pub stop: Vec<String>,
    /// Tools the model may call; empty for a plain completion. Each policy offers them the way
    /// its model expects and returns calls in `Rollout::completion` as `<tool_call>` blocks
    /// (see `lachesis_shared::tools`).
    #[serde(default)]
    pub tools: Vec<ToolSpec>,
}

/// Why a completion ended, as OpenAI and vLLM report it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Finish {
    Stop,
    Length,
}

/// One completion in Atropos's training format.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rollout {
    /// The assistant's answer as text.
    pub completion: String,
    /// Prompt tokens (the chat template applied to `messages` with the generation prompt) followed
    /// by the completion's tokens.
    pub tokens: Vec<u32>,
    /// -100 at prompt positions, the token id at completion positions (atroposlib's convention).
    pub masks: Vec<i64>,
    /// 1.0 at prompt positions, the sampling engine's logprob at completion positions.
    pub inference_logprobs: Vec<f64>,
    pub finish: Finish,
}

/// Typed failures of a policy; environments skip the item or retry, never panic.
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    #[error("inference server: {0}")]
    Server(String),
    #[error("the inference server's answer is malformed: {0}")]
    MalformedResponse(String),
    /// The request itself cannot be sent (a dialogue the server's format cannot express).
    #[error("the request cannot be sent: {0}")]
    BadRequest(String),
    #[error("timed out after {0:?}")]
    Timeout(std::time::Duration),
    #[error(transparent)]
    Engine(#[from] lachesis_inference::EngineError),
}

/// A source of completions. Object-safe so runners hold an `Arc<dyn Policy>`.
pub trait Policy: Send + Sync {
    /// A short name for logs and `generation_params` (the model name, or the baseline's).
    fn name(&self) -> String;

    fn complete(&self, request: PolicyRequest) -> BoxFuture<'_, Result<Vec<Rollout>, PolicyError>>;

    /// The version of the weights answering now, when the policy knows it (the embedded engine
    /// counts its weight swaps; a trainer's sync sets it for remote servers).
    fn weight_version(&self) -> Option<i64> {
        None
    }
}
