//! The arithmetic evaluation: the fixed set of problems (seed [`super::EVAL_SEED`]), answered
//! once each at the evaluation temperature, scored with the training reward.

use futures::StreamExt;
use serde_json::json;

use super::{ArithmeticEnv, parse_answer};
use crate::envs::{EnvError, EvalOutcome};
use crate::policy::Policy;

/// Evaluation requests at most this many problems at once.
const EVAL_CONCURRENCY: usize = 8;

impl ArithmeticEnv {
    pub(super) async fn evaluate_set(&self, policy: &dyn Policy) -> Result<EvalOutcome, EnvError> {
        let temperature = self.settings.eval_temperature;
        // The requests are made eagerly (each is a boxed future) and awaited a few at a time.
        let requests: Vec<_> = self
            .eval_set
            .iter()
            .map(|problem| policy.complete(self.request(problem, 1, temperature)))
            .collect();
        let outcomes: Vec<_> = futures::stream::iter(requests)
            .buffered(EVAL_CONCURRENCY)
            .collect()
            .await;
        let results = self.eval_set.iter().zip(outcomes).enumerate();
        let total = self.eval_set.len();
        let (mut correct, mut formatted, mut score_sum, mut failures) =
            (0usize, 0usize, 0.0, 0usize);
        let mut samples = Vec::with_capacity(total);
        let mut last_error = None;
        for (id, (problem, outcome)) in results {
            let rollout = match outcome.map(|mut r| r.pop()) {
                Ok(Some(rollout)) => rollout,
                Ok(None) => {
                    failures += 1;
                    samples.push(json!({"id": id, "question": problem.question(),
                        "expected": problem.answer(), "error": "the policy returned no rollout",
                        "correct": false, "score": 0.0}));
                    continue;
                }
                Err(e) => {
                    failures += 1;
                    samples.push(json!({"id": id, "question": problem.question(),
                        "expected": problem.answer(), "error": e.to_string(),
                        "correct": false, "score": 0.0}));
                    last_error = Some(e);
                    continue;
                }
            };
            let parsed = parse_answer(&rollout.completion);
            let score = self.score(problem, &rollout);
            let is_correct = score >= 1.0;
            correct += usize::from(is_correct);
            formatted += usize::from(parsed.is_ok());
            score_sum += score;
            samples.push(json!({
                "id": id,
                "question": problem.question(),
                "expected": problem.answer(),
                "response": rollout.completion,
                "parsed": parsed.as_ref().ok(),
                "error": parsed.err().map(|e| e.to_string()),
                "finish": rollout.finish,
                "correct": is_correct,
                "score": score,
            }));
        }
        // A dead policy must not look like a model that scores zero.
        if let Some(e) = last_error.filter(|_| total > 0 && failures == total) {
            return Err(e.into());
        }
        let fraction = |count: usize| {
            if total == 0 {
                0.0
            } else {
                count as f64 / total as f64
            }
        };
        let metrics = crate::envs::metrics(&[
            ("eval/percent_correct", fraction(correct)),
            ("eval/format_rate", fraction(formatted)),
            (
                "eval/mean_score",
                if total == 0 {
                    0.0
                } else {
                    score_sum / total as f64
                },
            ),
            ("eval/policy_errors", failures as f64),
            ("eval/n", total as f64),
        ]);
        Ok(EvalOutcome { metrics, samples })
    }
}
