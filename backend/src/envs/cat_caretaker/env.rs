//! `cat_caretaker`: the model is the caretaker of a simulated cat, over up to `max_turns` turns.
//! Each sequence of a group is its own dialogue from the same opening; the rubric judges the whole
//! dialogue (remedies named, fewer turns better). The rollout trained on is the last caretaker
//! turn, conditioned on the whole dialogue before it, so every turn's context is in the tokens.

use std::sync::{Arc, Mutex};

use futures::future::join_all;
use lachesis_inference::ChatMessage;
use lachesis_shared::cats::{CatTask, CatTurn};
use lachesis_shared::marketplace::JudgeBackend;
use rand::SeedableRng;
use rand::rngs::StdRng;
use serde::Deserialize;
use serde_json::json;

use super::data::CatData;
use super::dialogue::{
    caretaker_messages, caretaker_turns, cat_reply, is_final, opening, rubric_verdict,
};
use super::judge::{
    EndpointJudge, JudgeCallError, ModelVerdictError, judge_messages, model_verdict,
};
use super::verdict::parse_judge_score;
use crate::envs::{
    Collected, Env, EnvConfig, EnvError, EnvOptions, EvalOutcome, Item, ScoredSequence, SeedItem,
    parse_settings, some_item,
};
use crate::policy::{Policy, PolicyRequest, Rollout};

pub const NAME: &str = "cat_caretaker";
const EVAL_SEED: u64 = 0xca7_0000;

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Settings {
    /// Caretaker turns before the judge decides (1 makes it single-turn).
    pub max_turns: usize,
    pub eval_size: usize,
    /// Who gives the final verdict: the rubric (no model), or a model judge with its system
    /// prompt (`embedded`: the policy itself; `openai`: an endpoint). A model verdict that cannot
    /// be read falls back to the rubric's, and the sequence's messages say so.
    pub judge: JudgeBackend,
}

/// Why a model judge's verdict could not be had; the rubric's stands in and the messages say why.
#[derive(Debug, thiserror::Error)]
enum JudgeFailed {
    #[error("model: {0}")]
    Model(#[from] ModelVerdictError),
    #[error("{0}")]
    Endpoint(JudgeCallError),
    #[error("no endpoint judge was given to this environment")]
    NoEndpoint,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            max_turns: 3,
            eval_size: 20,
            judge: JudgeBackend::Rubric { lens: None },
        }
    }
}

pub struct CatCaretakerEnv {
    config: EnvConfig,
    settings: Settings,
    data: &'static CatData,
    rng: Mutex<StdRng>,
    /// Calls `openai` judges; the registry gives it the platform's outbound client.
    endpoint: Option<Arc<dyn EndpointJudge>>,
}

/// One finished dialogue: its turns, the last caretaker rollout and the verdict's score.
pub struct Dialogue {
    pub turns: Vec<CatTurn>,
    pub last: Rollout,
    pub score: f64,
    /// The judge's verdict text.
    pub verdict: String,
}

/// What every caretaker environment starts from (this one, and Pay-to-Play's judged version):
/// short answers in groups of four, and the shipped cat data.
pub fn caretaker_basics(options: &EnvOptions) -> Result<(EnvConfig, &'static CatData), EnvError> {
    let defaults = EnvConfig {
        group_size: 4,
        max_tokens: 64,
        ..EnvConfig::default()
    };
    let config = EnvConfig::from_options(options, defaults)?;
    let data = CatData::builtin().map_err(|e| EnvError::Other(e.to_string()))?;
    Ok((config, data))
}

impl CatCaretakerEnv {
    pub fn new(options: &EnvOptions) -> Result<Self, EnvError> {
        let settings: Settings = parse_settings(NAME, options)?;
        if !(1..=8).contains(&settings.max_turns) {
            return Err(EnvError::InvalidOption("max_turns must be 1..=8".into()));
        }
        if matches!(settings.judge, JudgeBackend::Human { .. }) {
            return Err(EnvError::InvalidOption(
                "people judge through a human card in Pay-to-Play (settings.human_card), not \
                 as this environment's judge"
                    .into(),
            ));
        }
        let (config, data) = caretaker_basics(options)?;
        Ok(Self {
            config,
            settings,
            data,
            rng: Mutex::new(StdRng::seed_from_u64(options.seed)),
            endpoint: None,
        })
    }

    /// Calls `openai` judges through `endpoint`; without one they fail and the rubric stands in.
    pub fn with_endpoint_judge(mut self, endpoint: Arc<dyn EndpointJudge>) -> Self {
        self.endpoint = Some(endpoint);
        self
    }

    fn request(&self, turns: &[CatTurn], n: usize, temperature: f32) -> PolicyRequest {
        PolicyRequest {
            tools: Vec::new(),
            messages: caretaker_messages(self.data, turns),
            n,
            max_tokens: self.config.max_tokens,
            temperature,
            top_p: self.config.top_p,
            stop: vec!["\n\n".into()],
        }
    }

    /// Plays one dialogue on from `turns` (ending with a caretaker turn whose rollout is `last`).
    async fn play_on(
        &self,
        task: &CatTask,
        mut turns: Vec<CatTurn>,
        mut last: Rollout,
        policy: &dyn Policy,
        temperature: f32,
    ) -> Result<Dialogue, EnvError> {
        while !is_final(&last.completion) && caretaker_turns(&turns) < self.settings.max_turns {
            turns.push(cat_reply(task, &turns));
            let mut rollouts = policy
                .complete(self.request(&turns, 1, temperature))
                .await?;
            last = rollouts
                .pop()
                .ok_or_else(|| EnvError::Other("the policy returned no rollout".into()))?;
            turns.push(CatTurn::Caretaker {
                text: last.completion.trim().to_string(),
            });
        }
        let (score, verdict) = self.verdict(task, &turns, policy).await;
        Ok(Dialogue {
            turns,
            last,
            score,
            verdict,
        })
    }

    /// The final verdict on a dialogue: its score and the judge's text.
    async fn verdict(
        &self,
        task: &CatTask,
        turns: &[CatTurn],
        policy: &dyn Policy,
    ) -> (f64, String) {
        let rubric = rubric_verdict(task, turns);
        let transcript = caretaker_messages(self.data, turns)
            .iter()
            .skip(1)
            .map(|m| {
                let who = if m.role == "assistant" {
                    "Caretaker"
                } else {
                    "Cat"
                };
                format!("{who}: {}", m.content)
            })
            .collect::<Vec<_>>()
            .join("\n");
        let text = match &self.settings.judge {
            JudgeBackend::Rubric { .. } => return (rubric.score, rubric.text),
            JudgeBackend::Embedded { system_prompt } => {
                model_verdict(policy, judge_messages(system_prompt, task, &transcript))
                    .await
                    .map_err(JudgeFailed::from)
            }
            backend @ JudgeBackend::Openai { .. } => match &self.endpoint {
                Some(endpoint) => endpoint
                    .judge(backend, task, &transcript)
                    .await
                    .map_err(JudgeFailed::Endpoint),
                None => Err(JudgeFailed::NoEndpoint),
            },
            // Refused when the environment is built.
            JudgeBackend::Human { .. } => Err(JudgeFailed::NoEndpoint),
        };
        match text.map(|t| (parse_judge_score(&t), t)) {
            Ok((Ok(score), text)) => (score, text),
            Ok((Err(e), _)) => (
                rubric.score,
                format!("{} (model verdict unreadable: {e})", rubric.text),
            ),
            Err(e) => (
                rubric.score,
                format!("{} (model judge failed: {e})", rubric.text),
            ),
        }
    }

    /// A group of dialogues from one task's opening.
    pub async fn dialogues(
        &self,
        task: &CatTask,
        n: usize,
        policy: &dyn Policy,
        temperature: f32,
    ) -> Result<Vec<Dialogue>, EnvError> {
        let start = vec![opening(task)];
        let firsts = policy
            .complete(self.request(&start, n, temperature))
            .await?;
        let plays = firsts.into_iter().map(|first| {
            let mut turns = start.clone();
            turns.push(CatTurn::Caretaker {
                text: first.completion.trim().to_string(),
            });
            self.play_on(task, turns, first, policy, temperature)
        });
        join_all(plays).await.into_iter().collect()
    }
}

impl Env for CatCaretakerEnv {
    const NAME: &str = NAME;

    fn config(&self) -> &EnvConfig {
        &self.config
    }

    async fn next_item(&self) -> Result<Option<Item>, EnvError> {
        some_item(&SeedItem {
            seed: SeedItem::draw(&self.rng),
        })
    }

    async fn collect(&self, item: Item, policy: &dyn Policy) -> Result<Collected, EnvError> {
        let SeedItem { seed } = SeedItem::parse(item)?;
        let task = self.data.task(seed);
        let dialogues = self
            .dialogues(
                &task,
                self.config.group_size,
                policy,
                self.config.temperature,
            )
            .await?;
        let sequences = dialogues
            .into_iter()
            .map(|d| {
                let mut messages = caretaker_messages(self.data, &d.turns);
                messages.push(ChatMessage::new("user", format!("Judge: {}", d.verdict)));
                ScoredSequence {
                    messages,
                    score: d.score,
                    rollout: d.last,
                    overrides: None,
                }
            })
            .collect();
        Ok(Collected::group(sequences, &self.config, policy))
    }

    async fn evaluate(&self, policy: &dyn Policy) -> Result<EvalOutcome, EnvError> {
        let mut samples = Vec::new();
        let (mut total, mut solved, mut turns_used) = (0.0, 0usize, 0usize);
        for i in 0..self.settings.eval_size {
            let task = self.data.task(EVAL_SEED + i as u64);
            let mut dialogues = self.dialogues(&task, 1, policy, 0.0).await?;
            let Some(d) = dialogues.pop() else { continue };
            let verdict = rubric_verdict(&task, &d.turns);
            total += d.score;
            solved += usize::from(!verdict.matched.is_empty());
            turns_used += d.turns.len() / 2;
            samples.push(json!({"id": i, "scenario": task.scenario.scenario,
                "category": task.scenario.category, "turns": d.turns, "score": d.score,
                "matched": verdict.matched}));
        }
        let n = self.settings.eval_size.max(1) as f64;
        let metrics = crate::envs::metrics(&[
            ("eval/mean_score", total / n),
            ("eval/need_addressed_rate", solved as f64 / n),
            ("eval/mean_turns", turns_used as f64 / n),
            ("eval/n", self.settings.eval_size as f64),
        ]);
        Ok(EvalOutcome { metrics, samples })
    }
}
