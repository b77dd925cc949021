//! Environments whose answer is one integer (`arithmetic`, `letter_count`): an
//! [`IntegerTask`] says how questions are drawn and asked; [`IntegerAnswerEnv`] does the rest the
//! same way for all, so their figures compare. It reads the model's final `Answer: <integer>`
//! with [`parse_answer`] ([`parse`]), rewards it with [`score`], draws training questions outside a fixed
//! evaluation set and evaluates with [`evaluate`].

pub mod parse;

use std::collections::HashSet;
use std::hash::Hash;
use std::sync::Mutex;

use futures::StreamExt;
use lachesis_inference::ChatMessage;
use rand::SeedableRng;
use rand::rngs::StdRng;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

pub use self::parse::{ParseError, parse_answer, render_answer};
use super::{Collected, Env, EnvConfig, EnvError, EnvOptions, EvalOutcome, Item};
use crate::policy::{Finish, Policy, PolicyRequest, Rollout};

/// Evaluation requests at most this many questions at once.
const EVAL_CONCURRENCY: usize = 8;
/// Draws tried for a training question outside the evaluation set: tiny settings may leave
/// nothing else, and then the last draw is used.
const FRESH_DRAWS: usize = 64;

/// A question whose answer is one integer.
pub trait IntegerQuestion {
    /// The question as the model reads it.
    fn question(&self) -> String;
    /// The true answer; `None` when there is none (an item not made by the environment).
    fn expected(&self) -> Option<i64>;
}

/// The reward of one rollout: 1.0 when its final answer is the expected one, `format_bonus`
/// when it gave one integer answer in the asked-for form but a wrong one (a signal that lets a
/// tiny model learn the form before the task), 0.0 for no answer, several answers, or a
/// completion cut off at `max_tokens` (its answer was not final).
fn score(expected: Option<i64>, rollout: &Rollout, format_bonus: f64) -> f64 {
    if rollout.finish == Finish::Length {
        return 0.0;
    }
    match (parse_answer(&rollout.completion), expected) {
        (Ok(given), Some(truth)) if given == truth => 1.0,
        (Ok(_), _) => format_bonus,
        (Err(_), _) => 0.0,
    }
}

/// A training question that is not in `held_out` (within [`FRESH_DRAWS`] draws).
fn draw_unseen<Q: Eq + Hash>(held_out: &HashSet<Q>, mut draw: impl FnMut() -> Q) -> Q {
    let mut question = draw();
    for _ in 1..FRESH_DRAWS {
        if !held_out.contains(&question) {
            break;
        }
        question = draw();
    }
    question
}

/// Asks every question of `set` once (a few at a time) and scores the answers with `score_of`:
/// `eval/percent_correct`, `eval/format_rate` (one integer answer in the asked-for form),
/// `eval/mean_score`, `eval/policy_errors` and `eval/n`, with one sample per question. A policy
/// that fails every request is an error, not a model that scores zero.
async fn evaluate<Q: IntegerQuestion>(
    set: &[Q],
    policy: &dyn Policy,
    request: impl Fn(&Q) -> PolicyRequest,
    score_of: impl Fn(&Q, &Rollout) -> f64,
) -> Result<EvalOutcome, EnvError> {
    // The requests are made eagerly (each is a boxed future) and awaited a few at a time.
    let requests: Vec<_> = set.iter().map(|q| policy.complete(request(q))).collect();
    let outcomes: Vec<_> = futures::stream::iter(requests)
        .buffered(EVAL_CONCURRENCY)
        .collect()
        .await;
    let total = set.len();
    let (mut correct, mut formatted, mut score_sum, mut failures) = (0usize, 0usize, 0.0, 0usize);
    let mut samples = Vec::with_capacity(total);
    let mut last_error = None;
    for (id, (question, outcome)) in set.iter().zip(outcomes).enumerate() {
        let failed = |error: String| {
            json!({"id": id, "question": question.question(), "expected": question.expected(),
                "error": error, "correct": false, "score": 0.0})
        };
        let rollout = match outcome.map(|mut r| r.pop()) {
            Ok(Some(rollout)) => rollout,
            Ok(None) => {
                failures += 1;
                samples.push(failed("the policy returned no rollout".into()));
                continue;
            }
            Err(e) => {
                failures += 1;
                samples.push(failed(e.to_string()));
                last_error = Some(e);
                continue;
            }
        };
        let parsed = parse_answer(&rollout.completion);
        let score = score_of(question, &rollout);
        let is_correct = score >= 1.0;
        correct += usize::from(is_correct);
        formatted += usize::from(parsed.is_ok());
        score_sum += score;
        samples.push(json!({
            "id": id,
            "question": question.question(),
            "expected": question.expected(),
            "response": rollout.completion,
            "parsed": parsed.as_ref().ok(),
            "error": parsed.err().map(|e| e.to_string()),
            "finish": rollout.finish,
            "correct": is_correct,
            "score": score,
        }));
    }
    if let Some(e) = last_error.filter(|_| total > 0 && failures == total) {
        return Err(e.into());
    }
    let share = |value: f64| {
        if total == 0 {
            0.0
        } else {
            value / total as f64
        }
    };
    let metrics = super::metrics(&[
        ("eval/percent_correct", share(correct as f64)),
        ("eval/format_rate", share(formatted as f64)),
        ("eval/mean_score", share(score_sum)),
        ("eval/policy_errors", failures as f64),
        ("eval/n", total as f64),
    ]);
    Ok(EvalOutcome { metrics, samples })
}

/// What one integer-answer environment is: its questions and how they are asked.
pub trait IntegerTask: Send + Sync + 'static {
    const NAME: &'static str;
    /// The evaluation set's seed: fixed, so every model is measured on the same questions.
    const EVAL_SEED: u64;
    /// A question; also the environment's `Item`.
    type Question: IntegerQuestion + Clone + Eq + Hash + Serialize + DeserializeOwned + Send + Sync;

    /// A random question.
    fn draw(&self, rng: &mut StdRng) -> Self::Question;
    /// The conversation that asks it.
    fn messages(&self, question: &Self::Question) -> Vec<ChatMessage>;
    /// Refuses an item this task would never make, before any policy is asked.
    fn check(&self, _question: &Self::Question) -> Result<(), EnvError> {
        Ok(())
    }
}

/// The settings every integer-answer environment takes, beside its task's own.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Scoring {
    /// The reward of a well-formed wrong answer (see [`score`]).
    pub format_bonus: f64,
    /// Questions in the evaluation set.
    pub eval_size: usize,
    /// The sampling temperature of evaluation answers.
    pub eval_temperature: f32,
}

impl Default for Scoring {
    fn default() -> Self {
        Self {
            format_bonus: 0.1,
            eval_size: 32,
            eval_temperature: 0.0,
        }
    }
}

/// The keys of [`Scoring`], which `settings` splits off before the task reads the rest.
const SCORING_KEYS: [&str; 3] = ["format_bonus", "eval_size", "eval_temperature"];

/// `options.settings` read as the shared [`Scoring`] and the task's own settings `S`; both refuse
/// keys they do not know, so a misspelt setting is an error rather than a silent default.
pub fn settings<S: DeserializeOwned>(
    name: &str,
    options: &EnvOptions,
) -> Result<(Scoring, S), EnvError> {
    let (scoring, own): (Map<String, Value>, Map<String, Value>) = options
        .settings
        .clone()
        .into_iter()
        .partition(|(key, _)| SCORING_KEYS.contains(&key.as_str()));
    fn read<T: DeserializeOwned>(name: &str, settings: Map<String, Value>) -> Result<T, EnvError> {
        let options = EnvOptions {
            settings,
            ..EnvOptions::default()
        };
        super::parse_settings(name, &options)
    }
    Ok((read(name, scoring)?, read(name, own)?))
}

pub struct IntegerAnswerEnv<T: IntegerTask> {
    config: EnvConfig,
    task: T,
    scoring: Scoring,
    rng: Mutex<StdRng>,
    eval_set: Vec<T::Question>,
    /// The evaluation set again, for the membership test of every training draw.
    held_out: HashSet<T::Question>,
}

impl<T: IntegerTask> IntegerAnswerEnv<T> {
    /// The environment of `task`: groups of 8 and 96 new tokens unless `options` say otherwise.
    pub fn with_task(task: T, scoring: Scoring, options: &EnvOptions) -> Result<Self, EnvError> {
        let defaults = EnvConfig {
            group_size: 8,
            max_token_length: 1024,
            max_tokens: 96,
            ..EnvConfig::default()
        };
        let config = EnvConfig::from_options(options, defaults)?;
        let eval_set = super::fixed_set(T::EVAL_SEED, scoring.eval_size, |rng| task.draw(rng));
        let held_out = eval_set.iter().cloned().collect();
        Ok(Self {
            config,
            task,
            scoring,
            rng: Mutex::new(StdRng::seed_from_u64(options.seed)),
            eval_set,
            held_out,
        })
    }

    pub fn task(&self) -> &T {
        &self.task
    }

    pub fn eval_set(&self) -> &[T::Question] {
        &self.eval_set
    }

    /// The reward of one rollout (see [`score`]).
    pub fn score(&self, question: &T::Question, rollout: &Rollout) -> f64 {
        score(question.expected(), rollout, self.scoring.format_bonus)
    }
}

impl<T: IntegerTask> Env for IntegerAnswerEnv<T> {
    const NAME: &str = T::NAME;

    fn config(&self) -> &EnvConfig {
        &self.config
    }

    /// A training question, never one of the evaluation set (within [`FRESH_DRAWS`] draws).
    async fn next_item(&self) -> Result<Option<Item>, EnvError> {
        let mut rng = self
            .rng
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let question = draw_unseen(&self.held_out, || self.task.draw(&mut rng));
        super::some_item(&question)
    }

    async fn collect(&self, item: Item, policy: &dyn Policy) -> Result<Collected, EnvError> {
        let question: T::Question = super::parse_item(item)?;
        self.task.check(&question)?;
        let messages = self.task.messages(&question);
        Collected::sampled(&self.config, policy, messages, |_, _, rollout| {
            self.score(&question, rollout)
        })
        .await
    }

    /// The fixed set (seed `T::EVAL_SEED`), answered once each at the evaluation temperature,
    /// scored with the training reward.
    async fn evaluate(&self, policy: &dyn Policy) -> Result<EvalOutcome, EnvError> {
        let temperature = self.scoring.eval_temperature;
        evaluate(
            &self.eval_set,
            policy,
            |question| {
                self.config
                    .request(self.task.messages(question), 1, temperature)
            },
            |question, rollout| self.score(question, rollout),
        )
        .await
    }
}
