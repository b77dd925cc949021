//! Environments: where prompts come from and how answers are scored.
//!
//! The contract follows atroposlib's `BaseEnv` lifecycle (`setup`, `get_next_item`,
//! `collect_trajectories`, `evaluate`) so a Lachesis environment behaves like an Atropos one:
//! the [`runner`] serves it to the trajectory API, [`process`] writes groups to a JSONL file and
//! an HTML viewer, and [`evaluate`] writes `metrics.json` the way `evaluate_log` does.
//!
//! Environments are driven through `&self` (state behind their own locks) so the runner can keep
//! several `collect` calls in flight on one environment at once.

pub mod arithmetic;
pub mod cat_caretaker;
pub mod chess_player;
pub mod cli;
pub mod client;
pub mod episode;
pub mod evaluate;
mod group;
pub mod in_process;
pub mod integer_answer;
pub mod letter_count;
pub mod mcp_tools;
pub mod pacing;
pub mod pay_to_play;
pub mod process;
pub mod protein_binder;
pub mod registry;
pub mod runner;
pub mod spatial;
pub mod standalone;

use std::collections::BTreeMap;

use futures::future::BoxFuture;
use lachesis_inference::ChatMessage;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::policy::{Policy, PolicyError, PolicyRequest};

pub use self::group::{Collected, EvalOutcome, ScoredGroup, ScoredSequence};

/// One unit of work (a problem, a scenario): opaque JSON, so the runner can hold items in its
/// backlog without knowing their type, as atroposlib's `Item = Any` does.
pub type Item = Value;

/// An environment's fixed settings (atroposlib's `BaseEnvConfig`, the parts that shape groups).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EnvConfig {
    /// Sequences per group (atroposlib default 4).
    pub group_size: usize,
    /// The longest sequence, prompt plus completion, this environment produces; sent to
    /// `/register-env` as `max_token_length` (atroposlib default 2048).
    pub max_token_length: usize,
    /// The completion budget asked of the policy per sequence.
    pub max_tokens: usize,
    pub temperature: f32,
    pub top_p: f32,
}

impl Default for EnvConfig {
    fn default() -> Self {
        Self {
            group_size: 4,
            max_token_length: 2048,
            max_tokens: 256,
            temperature: 1.0,
            top_p: 1.0,
        }
    }
}

/// What `build` may override; every `None` keeps the environment's own default.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EnvOptions {
    /// Seeds the item stream, so two runs with one seed see the same items in the same order.
    pub seed: u64,
    pub group_size: Option<usize>,
    pub max_tokens: Option<usize>,
    pub temperature: Option<f32>,
    /// Environment-specific keys (e.g. arithmetic's `format_bonus`); unknown keys are refused.
    pub settings: Map<String, Value>,
}

/// `item` as the environment's next work item.
pub fn some_item<T: Serialize>(item: &T) -> Result<Option<Item>, EnvError> {
    serde_json::to_value(item)
        .map(Some)
        .map_err(|e| EnvError::Other(e.to_string()))
}

/// Typed failures of environments; the runner logs them and moves on to the next item.
#[derive(Debug, thiserror::Error)]
pub enum EnvError {
    #[error("unknown environment {name:?}; built in: {}", registry::names().join(", "))]
    UnknownEnv { name: String },
    #[error("invalid option: {0}")]
    InvalidOption(String),
    #[error("malformed item: {0}")]
    InvalidItem(String),
    #[error("policy: {0}")]
    Policy(#[from] PolicyError),
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("{0}")]
    Other(String),
}

/// An environment, object-safe so runners hold a `&dyn Environment` or `Box<dyn Environment>`.
/// Environments implement [`Env`]; the blanket impl below boxes its futures.
pub trait Environment: Send + Sync {
    /// [`Env::NAME`].
    fn name(&self) -> String;

    /// [`Env::config`].
    fn config(&self) -> EnvConfig;

    /// [`Env::setup`].
    fn setup(&self) -> BoxFuture<'_, Result<(), EnvError>>;

    /// [`Env::next_item`].
    fn next_item(&self) -> BoxFuture<'_, Result<Option<Item>, EnvError>>;

    /// [`Env::collect`].
    fn collect<'a>(
        &'a self,
        item: Item,
        policy: &'a dyn Policy,
    ) -> BoxFuture<'a, Result<Collected, EnvError>>;

    /// [`Env::evaluate`].
    fn evaluate<'a>(
        &'a self,
        policy: &'a dyn Policy,
    ) -> BoxFuture<'a, Result<EvalOutcome, EnvError>>;

    /// [`Env::drain`].
    fn drain(&self) -> BoxFuture<'_, ()>;
}

/// What an environment implements, with plain `async fn`s (their futures must be `Send`); every
/// `Env` is an [`Environment`].
pub trait Env: Send + Sync {
    /// The name used for registration (`desired_name`) and for the evaluation task.
    const NAME: &'static str;

    fn config(&self) -> &EnvConfig;

    /// One-time preparation (loading data) before any other call; most need none.
    fn setup(&self) -> impl Future<Output = Result<(), EnvError>> + Send {
        std::future::ready(Ok(()))
    }

    /// The next training item, or `None` when the environment has run out.
    fn next_item(&self) -> impl Future<Output = Result<Option<Item>, EnvError>> + Send;

    /// Rolls out one item with the policy and scores the rollouts.
    fn collect(
        &self,
        item: Item,
        policy: &dyn Policy,
    ) -> impl Future<Output = Result<Collected, EnvError>> + Send;

    /// Runs the environment's evaluation set once.
    fn evaluate(
        &self,
        policy: &dyn Policy,
    ) -> impl Future<Output = Result<EvalOutcome, EnvError>> + Send;

    /// Finishes, as the runner stops, what must not be cut off: work whose caller stopped
    /// waiting but which already spent money (a round that paid its judges must record them).
    /// Most environments have none.
    fn drain(&self) -> impl Future<Output = ()> + Send {
        std::future::ready(())
    }
}

impl<E: Env> Environment for E {
    fn name(&self) -> String {
        E::NAME.to_string()
    }

    fn config(&self) -> EnvConfig {
        Env::config(self).clone()
    }

    fn setup(&self) -> BoxFuture<'_, Result<(), EnvError>> {
        Box::pin(Env::setup(self))
    }

    fn next_item(&self) -> BoxFuture<'_, Result<Option<Item>, EnvError>> {
        Box::pin(Env::next_item(self))
    }

    fn collect<'a>(
        &'a self,
        item: Item,
        policy: &'a dyn Policy,
    ) -> BoxFuture<'a, Result<Collected, EnvError>> {
        Box::pin(Env::collect(self, item, policy))
    }

    fn evaluate<'a>(
        &'a self,
        policy: &'a dyn Policy,
    ) -> BoxFuture<'a, Result<EvalOutcome, EnvError>> {
        Box::pin(Env::evaluate(self, policy))
    }

    fn drain(&self) -> BoxFuture<'_, ()> {
        Box::pin(Env::drain(self))
    }
}

/// Builds a built-in environment by name (see [`registry`]).
pub fn build(name: &str, options: &EnvOptions) -> Result<Box<dyn Environment>, EnvError> {
    let descriptor = registry::find(name).ok_or_else(|| EnvError::UnknownEnv {
        name: name.to_string(),
    })?;
    match descriptor.build {
        Some(build) => build(options),
        None => Err(EnvError::InvalidOption(format!(
            "{name} needs the platform's ledger: run it inside `lachesis serve --env {name}`, or give `lachesis env` the platform's --database-url"
        ))),
    }
}

impl EnvConfig {
    /// The environment's defaults with what `options` overrides; group size and completion budget
    /// must stay positive.
    pub fn from_options(options: &EnvOptions, defaults: EnvConfig) -> Result<Self, EnvError> {
        let config = EnvConfig {
            group_size: options.group_size.unwrap_or(defaults.group_size),
            max_tokens: options.max_tokens.unwrap_or(defaults.max_tokens),
            temperature: options.temperature.unwrap_or(defaults.temperature),
            ..defaults
        };
        if config.group_size == 0 || config.max_tokens == 0 {
            return Err(EnvError::InvalidOption(
                "group_size and max_tokens must be positive".into(),
            ));
        }
        Ok(config)
    }

    /// A request for `n` completions of `messages` at `temperature`, within this configuration's
    /// budget, with no tools and no stop strings.
    pub fn request(&self, messages: Vec<ChatMessage>, n: usize, temperature: f32) -> PolicyRequest {
        PolicyRequest {
            messages,
            n,
            max_tokens: self.max_tokens,
            temperature,
            top_p: self.top_p,
            stop: Vec::new(),
            tools: Vec::new(),
        }
    }
}

/// An environment's own settings from `options.settings`, unknown keys refused.
pub fn parse_settings<T: serde::de::DeserializeOwned>(
    name: &str,
    options: &EnvOptions,
) -> Result<T, EnvError> {
    serde_json::from_value(Value::Object(options.settings.clone()))
        .map_err(|e| EnvError::InvalidOption(format!("{name}: {e}")))
}

/// An item as the environment's own item type; anything else is an invalid item.
pub fn parse_item<T: serde::de::DeserializeOwned>(item: Item) -> Result<T, EnvError> {
    serde_json::from_value(item).map_err(|e| EnvError::InvalidItem(e.to_string()))
}

/// A fixed evaluation set: `size` items drawn from `seed`, the same at every run.
pub fn fixed_set<T>(
    seed: u64,
    size: usize,
    mut draw: impl FnMut(&mut rand::rngs::StdRng) -> T,
) -> Vec<T> {
    use rand::SeedableRng;
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    (0..size).map(|_| draw(&mut rng)).collect()
}

/// A one-key item that only carries the seed its task is drawn from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SeedItem {
    pub seed: u64,
}

impl SeedItem {
    pub fn parse(item: Item) -> Result<Self, EnvError> {
        parse_item(item)
    }

    /// The next seed of an environment's stream (a poisoned lock still holds a usable RNG).
    pub fn draw(rng: &std::sync::Mutex<rand::rngs::StdRng>) -> u64 {
        use rand::Rng;
        rng.lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .random::<u64>()
    }
}

/// `metrics.json`'s map from (name, value) pairs.
pub fn metrics(pairs: &[(&str, f64)]) -> BTreeMap<String, f64> {
    pairs.iter().map(|&(k, v)| (k.to_string(), v)).collect()
}

/// `generation_params` shared by every environment: what was asked of which policy.
pub fn generation_params(config: &EnvConfig, policy: &dyn Policy) -> Map<String, Value> {
    let mut params = Map::new();
    params.insert("model".into(), Value::String(policy.name()));
    params.insert(
        "temperature".into(),
        Value::from(f64::from(config.temperature)),
    );
    params.insert("top_p".into(), Value::from(f64::from(config.top_p)));
    params.insert("max_tokens".into(), Value::from(config.max_tokens));
    params.insert("n".into(), Value::from(config.group_size));
    params
}

/// A short test-only rollout: `prompt` prompt tokens then `completion` ids.
#[cfg(test)]
pub(crate) fn test_rollout(prompt: &[u32], completion: &[u32]) -> crate::policy::Rollout {
    let logprobs = vec![-0.5; completion.len()];
    crate::policy::rollout_from_ids(
        prompt,
        completion,
        &logprobs,
        String::new(),
        crate::policy::Finish::Stop,
    )
}

/// A fresh directory under the system's temp dir, removed when dropped.
#[cfg(test)]
pub(crate) struct TempDir(pub std::path::PathBuf);

#[cfg(test)]
impl TempDir {
    pub(crate) fn new(tag: &str) -> Self {
        let path = std::env::temp_dir().join(format!(
            "lachesis-{tag}-{}-{:016x}",
            std::process::id(),
            rand::random::<u64>()
        ));
        std::fs::create_dir_all(&path).expect("temp dir");
        Self(path)
    }
}

#[cfg(test)]
impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn group(scores: &[f64]) -> ScoredGroup {
        ScoredGroup {
            sequences: scores
                .iter()
                .map(|&score| ScoredSequence {
                    messages: vec![
                        ChatMessage::new("user", "1 + 1?"),
                        ChatMessage::new("assistant", "Answer: 2"),
                    ],
                    rollout: test_rollout(&[1, 2], &[3]),
                    score,
                    overrides: None,
                })
                .collect(),
            ..ScoredGroup::default()
        }
    }

    #[test]
    fn a_scored_group_becomes_atropos_scored_data_field_for_field() {
        let data = group(&[1.0, 0.0]).to_scored_data(Some(7), true);
        assert_eq!(data.tokens, vec![vec![1, 2, 3]; 2]);
        assert_eq!(data.masks, vec![vec![-100, -100, 3]; 2]);
        assert_eq!(data.scores, vec![1.0, 0.0]);
        assert_eq!(data.inference_logprobs, Some(vec![vec![1.0, 1.0, -0.5]; 2]));
        assert_eq!(data.env_id, Some(7));
        assert_eq!(data.overrides, None);
        let messages = data.messages.expect("messages were asked for");
        assert_eq!(messages[0][1]["role"], "assistant");
        assert_eq!(messages[0][1]["content"], "Answer: 2");
    }

    #[test]
    fn messages_are_left_out_unless_asked_for_and_overrides_cover_every_sequence() {
        let mut g = group(&[1.0, 0.0]);
        g.sequences[1].overrides = Some(Map::from_iter([(
            "set_advantage_to_zero".to_string(),
            Value::Bool(true),
        )]));
        let data = g.to_scored_data(None, false);
        assert_eq!(data.messages, None);
        let overrides = data.overrides.expect("one sequence has overrides");
        assert_eq!(overrides.len(), 2);
        assert!(overrides[0].is_empty());
    }

    #[test]
    fn the_registry_builds_arithmetic_and_names_the_known_envs_otherwise() {
        let env = build("arithmetic", &EnvOptions::default()).expect("built in");
        assert_eq!(env.name(), "arithmetic");
        let err = build("chess", &EnvOptions::default())
            .err()
            .expect("not built in");
        assert!(err.to_string().contains("arithmetic"), "{err}");
    }
}
