//! The spatial evaluation: fixed tasks (seeds from [`super::EVAL_SEED`], the same number at every
//! difficulty), answered once each at the evaluation temperature, judged like training.

use futures::StreamExt;
use serde_json::json;

use super::{EVAL_SEED, SpatialEnv, generate::generate, judge, parse_actions, solve::SOLVED_AT};
use crate::envs::{EnvError, EvalOutcome};
use crate::policy::Policy;

const EVAL_CONCURRENCY: usize = 4;

impl SpatialEnv {
    /// The evaluation tasks, in order: every difficulty, then every seed.
    pub fn eval_set(&self) -> Vec<lachesis_shared::spatial::Task> {
        lachesis_shared::spatial::DIFFICULTIES
            .flat_map(|d| {
                (0..self.settings.eval_per_difficulty).map(move |i| generate(EVAL_SEED + i, d))
            })
            .collect()
    }

    pub(super) async fn evaluate_set(&self, policy: &dyn Policy) -> Result<EvalOutcome, EnvError> {
        let tasks = self.eval_set();
        let temperature = self.settings.eval_temperature;
        let requests: Vec<_> = tasks
            .iter()
            .map(|task| policy.complete(self.request(task, 1, temperature)))
            .collect();
        let outcomes: Vec<_> = futures::stream::iter(requests)
            .buffered(EVAL_CONCURRENCY)
            .collect()
            .await;
        let total = tasks.len();
        let mut samples = Vec::with_capacity(total);
        let (mut failures, mut parsed, mut solved, mut score_sum) =
            (0usize, 0usize, 0usize, 0.0f64);
        let mut per_difficulty = [(0.0f64, 0usize); 4];
        let mut last_error = None;
        for (task, outcome) in tasks.iter().zip(outcomes) {
            let rollout = match outcome.map(|mut r| r.pop()) {
                Ok(Some(rollout)) => rollout,
                Ok(None) => {
                    failures += 1;
                    samples.push(json!({"task": task.id, "error": "the policy returned no rollout", "score": 0.0}));
                    continue;
                }
                Err(e) => {
                    failures += 1;
                    samples.push(json!({"task": task.id, "error": e.to_string(), "score": 0.0}));
                    last_error = Some(e);
                    continue;
                }
            };
            let (verdict, _, shown) = judge(task, &rollout.completion);
            let ok = parse_actions(&rollout.completion, task).is_ok();
            parsed += usize::from(ok);
            solved += usize::from(verdict.score >= SOLVED_AT);
            score_sum += f64::from(verdict.score);
            let slot = &mut per_difficulty[usize::from(task.difficulty.clamp(1, 4)) - 1];
            slot.0 += f64::from(verdict.score);
            slot.1 += 1;
            samples.push(json!({
                "task": task.id,
                "difficulty": task.difficulty,
                "response": rollout.completion,
                "actions": if ok { Some(&shown) } else { None },
                "error": if ok { None } else { Some(&shown) },
                "score": verdict.score,
                "goals": verdict.goals,
            }));
        }
        // A dead policy must not look like a model that scores zero.
        if let Some(e) = last_error.filter(|_| total > 0 && failures == total) {
            return Err(e.into());
        }
        let fraction = |count: f64| {
            if total == 0 {
                0.0
            } else {
                count / total as f64
            }
        };
        let mut metrics: std::collections::BTreeMap<String, f64> = [
            ("eval/mean_score", fraction(score_sum)),
            ("eval/solved_rate", fraction(solved as f64)),
            ("eval/parse_rate", fraction(parsed as f64)),
            ("eval/policy_errors", failures as f64),
            ("eval/n", total as f64),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        for (i, (sum, n)) in per_difficulty.iter().enumerate() {
            if *n > 0 {
                metrics.insert(
                    format!("eval/difficulty_{}_mean_score", i + 1),
                    sum / *n as f64,
                );
            }
        }
        Ok(EvalOutcome { metrics, samples })
    }
}
