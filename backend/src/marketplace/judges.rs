//! Running a card's judge on one answer: the built-in rubric (no model at all), the embedded model
//! with the card's system prompt, or an OpenAI-compatible endpoint. Judges follow the cat
//! caretaker's judging protocol (`envs::cat_caretaker::judge`): they are shown the same prompt and
//! answer in text ending with `\boxed{score}`, read by one parser
//! (`envs::cat_caretaker::verdict`). [`Judges`] is also the cat caretaker environment's
//! [`EndpointJudge`], so that environment reaches endpoints through this outbound client without
//! depending on the marketplace.

use std::sync::Arc;

use futures::FutureExt;
use futures::future::BoxFuture;
use lachesis_shared::cats::CatTask;
use lachesis_shared::marketplace::JudgeBackend;
use serde_json::{Value, json};

use super::outbound::{JudgeHttp, OutboundError, OutboundLimits};
use super::panel::Card;
use super::probation::ProbationRules;
use super::sealed::{SealError, SecretsKey};
use crate::envs::cat_caretaker::judge::{
    EndpointJudge, JUDGE_MAX_TOKENS, JudgeCallError, judge_messages, model_verdict,
};
use crate::envs::cat_caretaker::rubric::score_answer;
use crate::policy::Policy;

/// What can run judges here: the rubric always; model cards only with a model; teams' endpoint
/// cards through the public-only client, with the key their team sealed.
#[derive(Clone)]
pub struct Judges {
    /// The embedded model (or whatever policy the server was given), for `embedded` cards.
    pub model: Option<Arc<dyn Policy>>,
    http: JudgeHttp,
    /// Opens teams' sealed endpoint keys; without it, team cards that carry a key cannot judge.
    secrets: Option<SecretsKey>,
    /// The platform's own showcase runs hear (and pay) only the platform's cards.
    pub platform_only: bool,
    /// When teams' cards may be chosen (see [`super::probation`]).
    pub probation: ProbationRules,
}

impl Default for Judges {
    fn default() -> Self {
        Self::new(None)
    }
}

/// Why a judge gave no text (the episode leaves that judge out for that answer).
#[derive(Debug, thiserror::Error)]
pub enum JudgeError {
    #[error("no model is loaded to run this card")]
    NoModel,
    #[error("model: {0}")]
    Model(String),
    #[error("endpoint: {0}")]
    Endpoint(#[from] OutboundError),
    #[error("the card's key: {0}")]
    Key(#[from] SealError),
    #[error("people judge through their queue, not one answer at a time")]
    Human,
}

impl Judges {
    pub fn new(model: Option<Arc<dyn Policy>>) -> Self {
        Self {
            model,
            http: JudgeHttp::new(OutboundLimits::default()),
            secrets: None,
            platform_only: false,
            probation: ProbationRules::default(),
        }
    }

    pub fn with_secrets(mut self, secrets: Option<SecretsKey>) -> Self {
        self.secrets = secrets;
        self
    }

    pub fn with_limits(mut self, limits: OutboundLimits) -> Self {
        self.http = JudgeHttp::new(limits);
        self
    }

    pub fn with_probation(mut self, probation: ProbationRules) -> Self {
        self.probation = probation;
        self
    }

    pub fn platform_cards_only(mut self) -> Self {
        self.platform_only = true;
        self
    }

    /// Whether a card with this backend can judge here (`sealed_key`: the card carries one).
    pub fn can_run(&self, backend: &JudgeBackend, sealed_key: bool) -> bool {
        match backend {
            JudgeBackend::Rubric { .. } => true,
            JudgeBackend::Openai { .. } => !sealed_key || self.secrets.is_some(),
            JudgeBackend::Embedded { .. } => self.model.is_some(),
            // People answer through their queue, in a round of their own (`super::human`).
            JudgeBackend::Human { .. } => false,
        }
    }

    /// A listed card's verdict: a team's endpoint is called as a team's (public addresses only,
    /// its own sealed key, never a server variable); the platform's as the operator configured.
    pub async fn card_verdict(
        &self,
        card: &Card,
        task: &CatTask,
        answer: &str,
    ) -> Result<String, JudgeError> {
        match (&card.judge, card.owner_team) {
            (
                JudgeBackend::Openai {
                    base_url,
                    model,
                    system_prompt,
                    ..
                },
                Some(_),
            ) => {
                let key = match (&card.sealed_key, &self.secrets) {
                    (Some(sealed), Some(secrets)) => Some(secrets.open(&card.slug, sealed)?),
                    (Some(_), None) => return Err(SealError::Open.into()),
                    (None, _) => None,
                };
                self.endpoint_verdict(true, base_url, model, system_prompt, key, task, answer)
                    .await
            }
            (backend, _) => self.verdict(backend, task, answer).await,
        }
    }

    /// The judge's verdict text on one answer to one task, configured by the operator (a card of
    /// the platform's, or an environment's judge option).
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
                model_verdict(model.as_ref(), judge_messages(system_prompt, task, answer))
                    .await
                    .map_err(|e| JudgeError::Model(e.to_string()))
            }
            JudgeBackend::Openai {
                base_url,
                model,
                system_prompt,
                api_key_env,
            } => {
                let key = api_key_env.as_deref().and_then(|v| std::env::var(v).ok());
                self.endpoint_verdict(false, base_url, model, system_prompt, key, task, answer)
                    .await
            }
            JudgeBackend::Human { .. } => Err(JudgeError::Human),
        }
    }

    #[allow(clippy::too_many_arguments)]
    async fn endpoint_verdict(
        &self,
        team_endpoint: bool,
        base_url: &str,
        model: &str,
        system_prompt: &str,
        key: Option<String>,
        task: &CatTask,
        answer: &str,
    ) -> Result<String, JudgeError> {
        let body = json!({
            "model": model,
            "messages": judge_messages(system_prompt, task, answer),
            "max_tokens": JUDGE_MAX_TOKENS,
            "temperature": 0.3,
        });
        let url = format!("{}/chat/completions", base_url.trim_end_matches('/'));
        let reply: Value = self
            .http
            .post_json(team_endpoint, &url, key.as_deref(), &body)
            .await?;
        reply["choices"][0]["message"]["content"]
            .as_str()
            .map(str::to_string)
            .ok_or_else(|| {
                JudgeError::Endpoint(OutboundError::Http("no choices[0].message.content".into()))
            })
    }
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

/// The operator's endpoint judges, for the cat caretaker environment's `openai` judge option.
impl EndpointJudge for Judges {
    fn judge<'a>(
        &'a self,
        backend: &'a JudgeBackend,
        task: &'a CatTask,
        answer: &'a str,
    ) -> BoxFuture<'a, Result<String, JudgeCallError>> {
        async move {
            self.verdict(backend, task, answer)
                .await
                .map_err(JudgeCallError::from)
        }
        .boxed()
    }
}
