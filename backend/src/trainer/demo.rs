//! The proof that the trainer learns: a tiny llama, randomly initialised, learns a toy verifiable
//! task by GRPO through the real loop — an in-process environment posting groups to the
//! trajectory API, answered by the embedded engine, the trainer pulling `/batch` and swapping its
//! weights into that engine after every step.
//!
//! The task: the prompt is a digit d, the answer must be the digit (7·d + 3) mod 10 (a bijection,
//! so the model has to condition on the prompt, not emit one favourite token). A random model
//! answers right about once in twelve (ten digits, `=` and EOS).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use lachesis_inference::{ChatMessage, Engine, EngineOptions};
use lachesis_train::tiny::{tiny_config, tiny_tokenizer};
use lachesis_train::{
    LossConfig, OptimConfig, RowOptions, TrainConfig, TrainLlama, TrainMode, Trainer, Variant,
    inference_model,
};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::Value;
use tokio::sync::watch;

use super::{LoopConfig, TrainLoop, WeightSync};
use crate::envs::runner::{self, RunnerConfig};
use crate::envs::{Collected, Env, EnvConfig, EnvError, EvalOutcome, Item, ScoredSequence};
use crate::policy::{EmbeddedPolicy, Policy, PolicyRequest};

pub const NAME: &str = "digits";

/// The digit a prompt `d` asks for.
pub fn target(d: u32) -> u32 {
    (7 * d + 3) % 10
}

/// 1 when the completion is exactly the target digit.
pub fn reward(prompt: u32, completion: &str) -> f64 {
    if completion == target(prompt).to_string() {
        1.0
    } else {
        0.0
    }
}

pub struct DigitsEnv {
    config: EnvConfig,
    rng: Mutex<StdRng>,
    /// Samples per digit in `evaluate`.
    eval_samples: usize,
}

impl DigitsEnv {
    pub fn new(seed: u64, group_size: usize, eval_samples: usize) -> Self {
        Self {
            config: EnvConfig {
                group_size,
                max_token_length: 8,
                max_tokens: 1,
                temperature: 1.0,
                top_p: 1.0,
            },
            rng: Mutex::new(StdRng::seed_from_u64(seed)),
            eval_samples,
        }
    }

    fn request(&self, digit: u32, n: usize) -> PolicyRequest {
        PolicyRequest {
            tools: Vec::new(),
            messages: vec![ChatMessage::new("user", digit.to_string())],
            n,
            max_tokens: self.config.max_tokens,
            temperature: self.config.temperature,
            top_p: self.config.top_p,
            stop: Vec::new(),
        }
    }
}

impl Env for DigitsEnv {
    const NAME: &str = NAME;

    fn config(&self) -> &EnvConfig {
        &self.config
    }

    async fn next_item(&self) -> Result<Option<Item>, EnvError> {
        let digit = match self.rng.lock() {
            Ok(mut rng) => rng.random_range(0..10u32),
            Err(poisoned) => poisoned.into_inner().random_range(0..10u32),
        };
        Ok(Some(Value::from(digit)))
    }

    async fn collect(&self, item: Item, policy: &dyn Policy) -> Result<Collected, EnvError> {
        let digit = item
            .as_u64()
            .filter(|&d| d < 10)
            .ok_or_else(|| EnvError::InvalidItem(format!("{item} is not a digit")))?
            as u32;
        let request = self.request(digit, self.config.group_size);
        let prompt = request.messages.clone();
        let rollouts = policy.complete(request).await?;
        let sequences = rollouts
            .into_iter()
            .map(|rollout| {
                let score = reward(digit, &rollout.completion);
                ScoredSequence::answered(&prompt, rollout, score)
            })
            .collect();
        Ok(Collected::group(sequences, &self.config, policy))
    }

    /// Mean reward of `eval_samples` sampled answers to each of the ten prompts.
    async fn evaluate(&self, policy: &dyn Policy) -> Result<EvalOutcome, EnvError> {
        let mut total = 0.0;
        let mut count = 0usize;
        for digit in 0..10 {
            let rollouts = policy
                .complete(self.request(digit, self.eval_samples))
                .await?;
            total += rollouts
                .iter()
                .map(|r| reward(digit, &r.completion))
                .sum::<f64>();
            count += rollouts.len();
        }
        let mut outcome = EvalOutcome::default();
        outcome
            .metrics
            .insert("mean_reward".into(), total / count.max(1) as f64);
        Ok(outcome)
    }
}

#[derive(Debug, Clone)]
pub struct DemoOptions {
    pub seed: u64,
    pub steps: usize,
    pub group_size: usize,
    pub groups_per_batch: usize,
    pub lr: f64,
    pub eval_samples: usize,
    /// The trajectory-API run the demo uses (a fresh name keeps it apart from other data).
    pub run: String,
}

impl DemoOptions {
    pub fn new(seed: u64) -> Self {
        Self {
            seed,
            steps: 150,
            group_size: 8,
            groups_per_batch: 8,
            lr: 5e-3,
            eval_samples: 32,
            run: format!("train-demo-{seed}-{:08x}", rand::random::<u32>()),
        }
    }
}

#[derive(Debug, Clone, Default)]
pub struct DemoReport {
    /// Evaluated mean reward before training, then after each step.
    pub curve: Vec<f64>,
    /// Mean training tokens/s over the steps.
    pub tokens_per_second: f64,
    /// Weight versions the batches carried, per step (the oldest group's).
    pub batch_versions: Vec<i64>,
}

impl DemoReport {
    pub fn final_reward(&self) -> f64 {
        self.curve.last().copied().unwrap_or(0.0)
    }
}

/// Runs the demo against the trajectory API at `api`; `on_step(step, mean_reward)` is called
/// before training (step 0) and after every step.
pub async fn run_demo(
    api: &str,
    options: &DemoOptions,
    mut on_step: impl FnMut(usize, f64),
) -> anyhow::Result<DemoReport> {
    let model = TrainLlama::random(tiny_config(), options.seed, TrainMode::Full)?;
    let engine = Engine::from_model(
        inference_model(&model, false)?,
        tiny_tokenizer()?,
        "tiny-digits".into(),
        EngineOptions {
            max_active: 16,
            queue: 256,
            context_cap: 32,
            ..EngineOptions::default()
        },
    )?;
    let env = Arc::new(DigitsEnv::new(
        options.seed,
        options.group_size,
        options.eval_samples,
    ));
    let policy: Arc<dyn Policy> = Arc::new(EmbeddedPolicy::new(engine.clone()));
    let mut report = DemoReport::default();
    let start = mean_reward(env.as_ref(), policy.as_ref()).await?;
    report.curve.push(start);
    on_step(0, start);

    let trainer = Trainer::new(
        model,
        TrainConfig {
            loss: LossConfig {
                variant: Variant::Grpo,
                ..LossConfig::default()
            },
            // Falling to a tenth by the last step: once nearly every answer is right, the rare
            // wrong sample gets a large normalised advantage, and a full-size step on it can
            // knock a prompt off its answer late in the run.
            optim: OptimConfig {
                lr: options.lr,
                decay_steps: options.steps,
                final_lr_ratio: 0.1,
                ..OptimConfig::default()
            },
            micro_batch: 64,
        },
    )?;
    let config = LoopConfig {
        run: options.run.clone(),
        api_token: None,
        batch_size: options.group_size * options.groups_per_batch,
        max_token_len: 8,
        steps: options.steps,
        checkpoint_dir: None,
        checkpoint_interval: 0,
        sync_interval: 1,
        rows: RowOptions {
            variant: Variant::Grpo,
            drop_uniform_groups: false,
        },
        poll_interval: Duration::from_millis(20),
        batch_timeout: Duration::from_secs(120),
        base_model: "tiny-digits".into(),
    };
    let sync = WeightSync::Embedded {
        engine,
        quantize: false,
    };
    let mut train = TrainLoop::connect(api, trainer, sync, None, config).await?;

    let (stop, stopped) = watch::channel(false);
    let runner_config = RunnerConfig {
        run: options.run.clone(),
        // Groups whose answers all agree carry no signal but keep batches coming once the model
        // is right every time; the trainer gives them zero advantage.
        ensure_scores_are_not_same: false,
        max_batches_offpolicy: 1,
        total_steps: Some(0),
        poll_interval: Duration::from_millis(20),
        register_interval: Duration::from_millis(100),
        ..RunnerConfig::default()
    };
    let runner = {
        let api = api.to_owned();
        let env = env.clone();
        let policy = policy.clone();
        tokio::spawn(async move {
            runner::run(&api, env.as_ref(), policy, runner_config, stopped).await
        })
    };
    let mut tokens_per_second = Vec::new();
    let result: anyhow::Result<()> = async {
        while let Some(outcome) = train.next_step().await? {
            tokens_per_second.push(outcome.report.tokens_per_second());
            report
                .batch_versions
                .push(outcome.batch_versions.first().copied().unwrap_or(-1));
            let reward = mean_reward(env.as_ref(), policy.as_ref()).await?;
            report.curve.push(reward);
            on_step(outcome.step, reward);
        }
        Ok(())
    }
    .await;
    let _ = stop.send(true);
    let _ = runner.await;
    result?;
    report.tokens_per_second =
        tokens_per_second.iter().sum::<f64>() / tokens_per_second.len().max(1) as f64;
    Ok(report)
}

async fn mean_reward(env: &DigitsEnv, policy: &dyn Policy) -> anyhow::Result<f64> {
    let outcome = env.evaluate(policy).await?;
    Ok(outcome.metrics.get("mean_reward").copied().unwrap_or(0.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_target_is_a_bijection_of_the_prompt_and_only_it_scores() {
        let mut targets: Vec<u32> = (0..10).map(target).collect();
        targets.sort_unstable();
        assert_eq!(targets, (0..10).collect::<Vec<_>>());
        assert_eq!(reward(1, "0"), 1.0);
        assert_eq!(reward(1, "1"), 0.0);
        assert_eq!(reward(1, "0="), 0.0);
        assert_eq!(reward(1, ""), 0.0);
    }
}
