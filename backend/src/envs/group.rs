//! What an environment hands back: scored sequences grouped for GRPO (and their Atropos wire
//! form), what a `collect` yields, and what an evaluation pass measured.

use std::collections::BTreeMap;

use lachesis_inference::ChatMessage;
use lachesis_shared::atropos::ScoredData;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::{EnvConfig, EnvError, Item, generation_params};
use crate::policy::{Policy, Rollout};

/// One scored sequence: the conversation that produced it, the rollout and its reward.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScoredSequence {
    /// The prompt messages followed by the assistant's completion.
    pub messages: Vec<ChatMessage>,
    pub rollout: Rollout,
    pub score: f64,
    /// Per-sequence trainer hints (atroposlib's `overrides[i]`, e.g. `set_advantage_to_zero`).
    pub overrides: Option<Map<String, Value>>,
}

/// A group of sequences answering one item, ready to be judged by the runner and sent.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ScoredGroup {
    pub sequences: Vec<ScoredSequence>,
    /// How the rollouts were sampled (temperature, max_tokens, the policy's name).
    pub generation_params: Map<String, Value>,
    /// atroposlib's `group_overrides` (e.g. `group_size` for a variable-size group).
    pub group_overrides: Option<Map<String, Value>>,
}

impl ScoredSequence {
    /// A rollout of `prompt` scored `score`: the conversation is the prompt and the completion.
    pub fn answered(prompt: &[ChatMessage], rollout: Rollout, score: f64) -> Self {
        let mut messages = prompt.to_vec();
        messages.push(ChatMessage::new("assistant", rollout.completion.clone()));
        Self {
            messages,
            score,
            rollout,
            overrides: None,
        }
    }
}

impl Collected {
    /// One group of `sequences` from `policy` under `config`, and nothing for the backlog.
    pub fn group(sequences: Vec<ScoredSequence>, config: &EnvConfig, policy: &dyn Policy) -> Self {
        Self {
            group: Some(ScoredGroup {
                sequences,
                generation_params: generation_params(config, policy),
                group_overrides: None,
            }),
            backlog: Vec::new(),
        }
    }

    /// One group of completions of `messages`, as many and as hot as `config` asks, each scored
    /// by `score(index, count, rollout)` in order (`count`: the completions the policy returned).
    pub async fn sampled(
        config: &EnvConfig,
        policy: &dyn Policy,
        messages: Vec<ChatMessage>,
        mut score: impl FnMut(usize, usize, &Rollout) -> f64,
    ) -> Result<Self, EnvError> {
        let request = config.request(messages, config.group_size, config.temperature);
        let prompt = request.messages.clone();
        let rollouts = policy.complete(request).await?;
        let count = rollouts.len();
        let sequences = rollouts
            .into_iter()
            .enumerate()
            .map(|(index, rollout)| {
                let score = score(index, count, &rollout);
                ScoredSequence::answered(&prompt, rollout, score)
            })
            .collect();
        Ok(Self::group(sequences, config, policy))
    }
}

impl ScoredGroup {
    pub fn scores(&self) -> Vec<f64> {
        self.sequences.iter().map(|s| s.score).collect()
    }

    /// The group in Atropos's wire format. `messages` is filled only when asked for, as
    /// atroposlib's `include_messages` does: trainers do not need it and it is often the bulk.
    pub fn to_scored_data(&self, env_id: Option<i64>, include_messages: bool) -> ScoredData {
        let seqs = &self.sequences;
        let messages = include_messages.then(|| {
            seqs.iter()
                .map(|s| s.messages.iter().map(message_map).collect())
                .collect()
        });
        // atroposlib's trainer indexes `overrides[i]`, so one entry per sequence or none at all.
        let overrides = seqs.iter().any(|s| s.overrides.is_some()).then(|| {
            seqs.iter()
                .map(|s| s.overrides.clone().unwrap_or_default())
                .collect()
        });
        ScoredData {
            tokens: seqs
                .iter()
                .map(|s| s.rollout.tokens.iter().map(|&t| i64::from(t)).collect())
                .collect(),
            masks: seqs.iter().map(|s| s.rollout.masks.clone()).collect(),
            scores: self.scores(),
            messages,
            generation_params: Some(self.generation_params.clone()),
            inference_logprobs: Some(
                seqs.iter()
                    .map(|s| s.rollout.inference_logprobs.clone())
                    .collect(),
            ),
            overrides,
            group_overrides: self.group_overrides.clone(),
            env_id,
            ..ScoredData::default()
        }
    }
}

fn message_map(message: &ChatMessage) -> Map<String, Value> {
    let mut map = Map::new();
    map.insert("role".into(), Value::String(message.role.clone()));
    map.insert("content".into(), Value::String(message.content.clone()));
    map
}

/// What `collect` gives back: a group (or none, when the item produced nothing worth training on)
/// and items to retry later (atroposlib's `backlog`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Collected {
    pub group: Option<ScoredGroup>,
    pub backlog: Vec<Item>,
}

/// The result of one `evaluate` pass: metrics for `metrics.json` and one JSON object per sample.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct EvalOutcome {
    pub metrics: BTreeMap<String, f64>,
    pub samples: Vec<Value>,
}
