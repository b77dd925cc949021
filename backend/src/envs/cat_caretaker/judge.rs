//! How a model judges a caretaker: what it is shown, how it is asked, and the seam through which an
//! OpenAI-compatible endpoint judge is reached. The environment runs the rubric and the embedded
//! model itself; an endpoint needs the platform's outbound client, which lives with the judge
//! marketplace, so the environment is handed one as an [`EndpointJudge`] instead of depending on
//! the marketplace (which depends on this module for the same prompt and protocol).

use std::error::Error;

use futures::future::BoxFuture;
use lachesis_inference::ChatMessage;
use lachesis_shared::cats::CatTask;
use lachesis_shared::marketplace::JudgeBackend;

use crate::policy::{Policy, PolicyError, PolicyRequest};

/// Enough for a sentence of reasons and the box; judges that ramble are cut and usually unreadable.
pub const JUDGE_MAX_TOKENS: usize = 96;

/// Why a judge's call failed, as whoever made the call reports it.
pub type JudgeCallError = Box<dyn Error + Send + Sync>;

/// A judge the environment cannot run on its own: an OpenAI-compatible endpoint
/// (`JudgeBackend::Openai`), called the way the platform calls the operator's judges.
pub trait EndpointJudge: Send + Sync {
    /// The judge's verdict text on `answer` to `task`, ending in `\boxed{score}` when it behaves.
    fn judge<'a>(
        &'a self,
        backend: &'a JudgeBackend,
        task: &'a CatTask,
        answer: &'a str,
    ) -> BoxFuture<'a, Result<String, JudgeCallError>>;
}

/// Why a model judge gave no text.
#[derive(Debug, thiserror::Error)]
pub enum ModelVerdictError {
    #[error("{0}")]
    Policy(#[from] PolicyError),
    #[error("no completion")]
    NoCompletion,
}

/// A model judge's text for the messages given (a card's, or a dialogue's judge).
pub async fn model_verdict(
    model: &dyn Policy,
    messages: Vec<ChatMessage>,
) -> Result<String, ModelVerdictError> {
    let request = PolicyRequest {
        tools: Vec::new(),
        messages,
        n: 1,
        max_tokens: JUDGE_MAX_TOKENS,
        temperature: 0.3,
        top_p: 1.0,
        stop: Vec::new(),
    };
    let rollouts = model.complete(request).await?;
    rollouts
        .into_iter()
        .next()
        .map(|r| r.completion)
        .ok_or(ModelVerdictError::NoCompletion)
}

/// What a model judge is shown: the behaviors the caretaker saw (not the hidden need: judges earn
/// their price by knowing cats) and the answer.
pub fn judge_messages(system_prompt: &str, task: &CatTask, answer: &str) -> Vec<ChatMessage> {
    let seen: Vec<String> = task
        .observed
        .iter()
        .map(|b| format!("- {}: {}", b.behavior, b.description))
        .collect();
    vec![
        ChatMessage::new("system", system_prompt),
        ChatMessage::new(
            "user",
            format!(
                "A cat shows these behaviors:\n{}\n\nA caretaker answered:\n{}\n\nHow well does \
                 the answer meet the cat's need? Give one sentence of reasons, then the score from \
                 0 to 1 as \\boxed{{score}}.",
                seen.join("\n"),
                answer.trim()
            ),
        ),
    ]
}
