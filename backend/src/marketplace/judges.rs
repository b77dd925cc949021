//! Running a card's judge on one answer: the built-in rubric (no model at all), the embedded model
//! with the card's system prompt, or an OpenAI-compatible endpoint. Every judge answers in text
//! ending with `\boxed{score}`, read by one parser ([`super::verdict`]).

use std::sync::Arc;
use std::time::Duration;

use lachesis_inference::ChatMessage;
use lachesis_shared::cats::CatTask;
use lachesis_shared::marketplace::JudgeBackend;
use serde_json::{Value, json};

use crate::envs::cat_caretaker::rubric::score_answer;
use crate::policy::{Policy, PolicyRequest};

/// Enough for a sentence of reasons and the box; judges that ramble are cut and usually unreadable.
const JUDGE_MAX_TOKENS: usize = 96;
const OPENAI_TIMEOUT: Duration = Duration::from_secs(60);

/// What can run judges here: the rubric always; model cards only with a model.
#[derive(Clone, Default)]
pub struct Judges {
    /// The embedded model (or whatever policy the server was given), for `embedded` cards.
    pub model: Option<Arc<dyn Policy>>,
    http: reqwest::Client,
}

/// Why a judge gave no text (the episode leaves that judge out for that answer).
#[derive(Debug, thiserror::Error)]
pub enum JudgeError {
    #[error("no model is loaded to run this card")]
    NoModel,
    #[error("model: {0}")]
    Model(String),
    #[error("endpoint: {0}")]
    Endpoint(String),
}

impl Judges {
    pub fn new(model: Option<Arc<dyn Policy>>) -> Self {
        Self {
            model,
            http: reqwest::Client::builder()
                .timeout(OPENAI_TIMEOUT)
                .build()
                .unwrap_or_default(),
        }
    }

    /// Whether a card with this backend can judge here.
    pub fn can_run(&self, backend: &JudgeBackend) -> bool {
        match backend {
            JudgeBackend::Rubric { .. } | JudgeBackend::Openai { .. } => true,
            JudgeBackend::Embedded { .. } => self.model.is_some(),
        }
    }

    /// The judge's verdict text on one answer to one task.
    pub async fn verdict(
        &self,
        backend: &JudgeBackend,
        task: &CatTask,
        answer: &str,
    ) -> Result<String, JudgeError> {
        match backend {
            JudgeBackend::Rubric { lens } => Ok(rubric_verdict(*lens, task, answer)),
            JudgeBackend::Embedded { system_prompt } => {
                let model = self.model.as_ref().ok_or(JudgeError::NoModel)?;
                model_verdict(model.as_ref(), judge_messages(system_prompt, task, answer)).await
            }
            JudgeBackend::Openai {
                base_url,
                model,
                system_prompt,
                api_key_env,
            } => {
                let body = json!({
                    "model": model,
                    "messages": judge_messages(system_prompt, task, answer),
                    "max_tokens": JUDGE_MAX_TOKENS,
                    "temperature": 0.3,
                });
                let url = format!("{}/chat/completions", base_url.trim_end_matches('/'));
                let mut request = self.http.post(url).json(&body);
                if let Some(key) = api_key_env.as_deref().and_then(|v| std::env::var(v).ok()) {
                    request = request.bearer_auth(key);
                }
                let reply: Value = request
                    .send()
                    .await
                    .and_then(|r| r.error_for_status())
                    .map_err(|e| JudgeError::Endpoint(e.to_string()))?
                    .json()
                    .await
                    .map_err(|e| JudgeError::Endpoint(e.to_string()))?;
                reply["choices"][0]["message"]["content"]
                    .as_str()
                    .map(str::to_string)
                    .ok_or_else(|| JudgeError::Endpoint("no choices[0].message.content".into()))
            }
        }
    }
}

/// A model judge's text for the messages given (a card's, or a dialogue's judge).
pub async fn model_verdict(
    model: &dyn Policy,
    messages: Vec<ChatMessage>,
) -> Result<String, JudgeError> {
    let request = PolicyRequest {
        messages,
        n: 1,
        max_tokens: JUDGE_MAX_TOKENS,
        temperature: 0.3,
        top_p: 1.0,
        stop: Vec::new(),
    };
    let rollouts = model
        .complete(request)
        .await
        .map_err(|e| JudgeError::Model(e.to_string()))?;
    rollouts
        .into_iter()
        .next()
        .map(|r| r.completion)
        .ok_or_else(|| JudgeError::Model("no completion".into()))
}

/// A rubric card's verdict text. A specialist reads needs of its own category closely; others it
/// only sorts roughly into bad, middling and good, pulled towards the middle.
fn rubric_verdict(
    lens: Option<lachesis_shared::cats::CareCategory>,
    task: &CatTask,
    answer: &str,
) -> String {
    let mut verdict = score_answer(answer, &task.scenario);
    if let Some(lens) = lens
        && lens != task.scenario.category
    {
        let rough = (verdict.score * 2.0).round() / 2.0;
        verdict.score = 0.5 + (rough - 0.5) * 0.5;
    }
    verdict.to_judge_text()
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
