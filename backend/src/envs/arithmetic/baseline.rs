//! A policy that needs no model: it reads the arithmetic problem from the prompt, solves it, and
//! answers correctly with a fixed, seeded probability. It exercises the runner, the trajectory API
//! and the trainer's data path end to end with realistic rollouts (real token ids when given the
//! model's tokenizer, byte values otherwise) in milliseconds.

use std::sync::{Arc, Mutex};

use futures::FutureExt;
use futures::future::BoxFuture;
use lachesis_inference::{ChatMessage, ModelTokenizer};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::{Problem, render_answer};
use crate::policy::{Finish, Policy, PolicyError, PolicyRequest, Rollout, rollout_from_ids};

/// The logprob reported for every generated token: the baseline samples nothing, so any fixed,
/// plausible value (ln 0.9) serves trainers that compute importance ratios.
const SYNTHETIC_LOGPROB: f64 = -0.105_360_515_657_826_3;

pub struct BaselinePolicy {
    accuracy: f64,
    rng: Mutex<StdRng>,
    tokenizer: Option<Arc<ModelTokenizer>>,
}

impl BaselinePolicy {
    /// `accuracy` is the chance of each completion being right (clamped to 0..=1).
    pub fn new(accuracy: f64, seed: u64, tokenizer: Option<Arc<ModelTokenizer>>) -> Self {
        let accuracy = if accuracy.is_nan() {
            0.0
        } else {
            accuracy.clamp(0.0, 1.0)
        };
        Self {
            accuracy,
            rng: Mutex::new(StdRng::seed_from_u64(seed)),
            tokenizer,
        }
    }

    /// The texts of `n` completions: right with probability `accuracy`; wrong ones are off by a
    /// little, and one in three of them also misses the answer format.
    fn answers(&self, problem: &Problem, n: usize) -> Vec<String> {
        let mut rng = self
            .rng
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let Some(truth) = problem.answer() else {
            return vec!["That is too large for me to compute.".to_string(); n];
        };
        let working = format!("{} {} {}", problem.a, problem.op.symbol(), problem.b);
        (0..n)
            .map(|_| {
                if rng.random_bool(self.accuracy) {
                    return format!("{working} = {truth}\n{}", render_answer(truth));
                }
                let offset = [-3, -2, -1, 1, 2, 3][rng.random_range(0..6)];
                let wrong = truth.saturating_add(offset);
                if rng.random_range(0..3) == 0 {
                    format!("I think it is {wrong}.")
                } else {
                    format!("{working} = {wrong}\n{}", render_answer(wrong))
                }
            })
            .collect()
    }

    fn rollout(
        &self,
        messages: &[ChatMessage],
        text: &str,
        max_tokens: usize,
    ) -> Result<Rollout, PolicyError> {
        let (prompt, mut completion) = match &self.tokenizer {
            Some(tokenizer) => {
                let prompt = tokenizer.apply_chat_template(messages, true)?;
                let mut completion = tokenizer.encode(text)?;
                // A real engine's last generated token is the end of turn.
                completion.push(tokenizer.eos_token_id());
                (tokenizer.encode(&prompt)?, completion)
            }
            None => (bytes(&chatml(messages)), bytes(text)),
        };
        let mut finish = Finish::Stop;
        let mut completion_text = text.to_string();
        if completion.len() > max_tokens {
            completion.truncate(max_tokens);
            finish = Finish::Length;
            completion_text = match &self.tokenizer {
                Some(tokenizer) => tokenizer.decode(&completion)?,
                None => {
                    let raw: Vec<u8> = completion
                        .iter()
                        .map(|&b| u8::try_from(b).unwrap_or(b'?'))
                        .collect();
                    String::from_utf8_lossy(&raw).into_owned()
                }
            };
        }
        let logprobs = vec![SYNTHETIC_LOGPROB; completion.len()];
        Ok(rollout_from_ids(
            &prompt,
            &completion,
            &logprobs,
            completion_text,
            finish,
        ))
    }

    fn complete_now(&self, request: &PolicyRequest) -> Result<Vec<Rollout>, PolicyError> {
        let problem = request
            .messages
            .iter()
            .rev()
            .find(|m| m.role == "user")
            .and_then(|m| Problem::from_question(&m.content))
            .ok_or_else(|| {
                PolicyError::Server("baseline: the prompt is not an arithmetic problem".into())
            })?;
        self.answers(&problem, request.n)
            .iter()
            .map(|text| self.rollout(&request.messages, text, request.max_tokens))
            .collect()
    }
}

impl Policy for BaselinePolicy {
    fn name(&self) -> String {
        format!("baseline-arithmetic(p={})", self.accuracy)
    }

    fn complete(&self, request: PolicyRequest) -> BoxFuture<'_, Result<Vec<Rollout>, PolicyError>> {
        futures::future::ready(self.complete_now(&request)).boxed()
    }
}

/// ChatML, the template SmolLM2 uses, as the byte-level stand-in for a real template.
fn chatml(messages: &[ChatMessage]) -> String {
    let mut text = String::new();
    for m in messages {
        text.push_str(&format!(
            "<|im_start|>{}\n{}<|im_end|>\n",
            m.role, m.content
        ));
    }
    text.push_str("<|im_start|>assistant\n");
    text
}

fn bytes(text: &str) -> Vec<u32> {
    text.bytes().map(u32::from).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::envs::arithmetic::{Op, parse_answer};

    fn request(n: usize, max_tokens: usize) -> PolicyRequest {
        PolicyRequest {
            tools: Vec::new(),
            messages: Problem {
                a: 12,
                op: Op::Sub,
                b: 30,
            }
            .messages(2),
            n,
            max_tokens,
            temperature: 1.0,
            top_p: 1.0,
            stop: Vec::new(),
        }
    }

    #[tokio::test]
    async fn rollouts_follow_atropos_conventions_with_byte_tokens() {
        let policy = BaselinePolicy::new(1.0, 3, None);
        let rollouts = policy.complete(request(2, 256)).await.expect("solves");
        assert_eq!(rollouts.len(), 2);
        for r in &rollouts {
            assert_eq!(parse_answer(&r.completion), Ok(-18));
            assert_eq!(r.finish, Finish::Stop);
            assert_eq!(r.tokens.len(), r.masks.len());
            assert_eq!(r.tokens.len(), r.inference_logprobs.len());
            let generated = r.masks.iter().filter(|&&m| m != -100).count();
            assert_eq!(generated, r.completion.len());
            let tail = &r.tokens[r.tokens.len() - generated..];
            assert_eq!(tail, bytes(&r.completion).as_slice());
            assert!(r.inference_logprobs[0] == 1.0 && *r.inference_logprobs.last().unwrap() < 0.0);
        }
    }

    #[tokio::test]
    async fn accuracy_is_the_share_of_right_answers_and_max_tokens_cuts() {
        let policy = BaselinePolicy::new(0.0, 3, None);
        let rollouts = policy.complete(request(20, 256)).await.unwrap();
        assert!(
            rollouts
                .iter()
                .all(|r| parse_answer(&r.completion) != Ok(-18))
        );
        let cut = policy.complete(request(1, 4)).await.unwrap();
        assert_eq!(cut[0].finish, Finish::Length);
        assert_eq!(cut[0].masks.iter().filter(|&&m| m != -100).count(), 4);
    }

    #[tokio::test]
    async fn other_prompts_are_a_typed_error() {
        let policy = BaselinePolicy::new(1.0, 3, None);
        let mut req = request(1, 16);
        req.messages = vec![ChatMessage::new("user", "Play chess with me")];
        assert!(matches!(
            policy.complete(req).await,
            Err(PolicyError::Server(_))
        ));
    }
}
