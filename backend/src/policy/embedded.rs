//! The embedded model as a policy: the same rollouts as [`super::vllm::VllmPolicy`], from the
//! in-process engine, without HTTP.

use futures::future::BoxFuture;
use lachesis_inference::{
    Engine, FinishReason, GenerateRequest, Generation, SamplingParams, StreamedToken,
};
use tokio::sync::mpsc::UnboundedSender;

use super::rollout::{expect_choices, rollout_from_ids};
use super::vllm::request_prompt_ids;
use super::{Finish, Policy, PolicyError, PolicyRequest, Rollout};

#[derive(Clone)]
pub struct EmbeddedPolicy {
    pub engine: Engine,
}

impl EmbeddedPolicy {
    pub fn new(engine: Engine) -> Self {
        Self { engine }
    }

    /// As [`Policy::complete`], also sending each token to `tokens` as it is sampled.
    pub async fn complete_streaming(
        &self,
        request: PolicyRequest,
        tokens: UnboundedSender<StreamedToken>,
    ) -> Result<Vec<Rollout>, PolicyError> {
        self.run(request, Some(tokens)).await
    }

    async fn run(
        &self,
        request: PolicyRequest,
        tokens: Option<UnboundedSender<StreamedToken>>,
    ) -> Result<Vec<Rollout>, PolicyError> {
        if request.n == 0 {
            return Ok(Vec::new());
        }
        let prompt = request_prompt_ids(self.engine.tokenizer(), &request)?;
        let params = SamplingParams {
            temperature: request.temperature,
            top_p: request.top_p,
            max_tokens: request.max_tokens,
            n: request.n,
            stop: request.stop,
            ..SamplingParams::default()
        };
        let n = request.n;
        let request = GenerateRequest { prompt, params };
        let generation = match tokens {
            Some(sink) => self.engine.generate_streaming(request, sink).await?,
            None => self.engine.generate(request).await?,
        };
        rollouts_from_generation(generation, n)
    }
}

impl Policy for EmbeddedPolicy {
    fn name(&self) -> String {
        self.engine.info().name.clone()
    }

    fn complete(&self, request: PolicyRequest) -> BoxFuture<'_, Result<Vec<Rollout>, PolicyError>> {
        Box::pin(self.run(request, None))
    }

    fn weight_version(&self) -> Option<i64> {
        Some(self.engine.weight_version())
    }
}

/// The engine's answer as rollouts. The engine's choice tokens include the EOS it sampled and the
/// text leaves it out, as vLLM's do, so the two policies produce the same layout.
pub fn rollouts_from_generation(
    generation: Generation,
    n: usize,
) -> Result<Vec<Rollout>, PolicyError> {
    expect_choices(generation.choices.len(), n)?;
    let prompt = generation.prompt_tokens;
    generation
        .choices
        .into_iter()
        .enumerate()
        .map(|(c, choice)| {
            // The engine pairs each token with its logprob; anything else is a bug there, and a
            // typed error here rather than a silently shifted training row.
            let paired = choice.logprobs.len() == choice.tokens.len()
                && choice
                    .logprobs
                    .iter()
                    .zip(&choice.tokens)
                    .all(|(lp, &t)| lp.token == t);
            if !paired {
                return Err(PolicyError::MalformedResponse(format!(
                    "engine choice {c}: {} tokens but {} logprobs for them",
                    choice.tokens.len(),
                    choice.logprobs.len()
                )));
            }
            let logprobs: Vec<f64> = choice
                .logprobs
                .iter()
                .map(|lp| f64::from(lp.logprob))
                .collect();
            let finish = match choice.finish_reason {
                FinishReason::Stop => Finish::Stop,
                FinishReason::Length => Finish::Length,
            };
            Ok(rollout_from_ids(
                &prompt,
                &choice.tokens,
                &logprobs,
                choice.text,
                finish,
            ))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use lachesis_inference::{Choice, TokenLogprob};

    use super::*;

    fn choice(tokens: &[u32], logprobs: &[f32], finish: FinishReason) -> Choice {
        Choice {
            tokens: tokens.to_vec(),
            logprobs: tokens
                .iter()
                .zip(logprobs)
                .map(|(&token, &logprob)| TokenLogprob {
                    token,
                    logprob,
                    top: Vec::new(),
                })
                .collect(),
            text: "ab".into(),
            finish_reason: finish,
        }
    }

    fn generation(choices: Vec<Choice>) -> Generation {
        Generation {
            prompt_tokens: vec![256, 117, 10],
            prompt_logprobs: None,
            choices,
            prompt_seconds: 0.0,
            generation_seconds: 0.0,
        }
    }

    #[test]
    fn engine_choices_become_rollouts_with_the_vllm_layout() {
        let g = generation(vec![
            choice(&[97, 98, 257], &[-0.5, -0.25, -0.125], FinishReason::Stop),
            choice(&[97, 97], &[-1.0, -2.0], FinishReason::Length),
        ]);
        let rollouts = rollouts_from_generation(g, 2).expect("consistent");
        assert_eq!(rollouts[0].tokens, [256, 117, 10, 97, 98, 257]);
        assert_eq!(rollouts[0].masks, [-100, -100, -100, 97, 98, 257]);
        assert_eq!(
            rollouts[0].inference_logprobs,
            [1.0, 1.0, 1.0, -0.5, -0.25, -0.125]
        );
        assert_eq!(rollouts[0].finish, Finish::Stop);
        assert_eq!(rollouts[1].finish, Finish::Length);
        assert_eq!(rollouts[1].completion, "ab");
    }

    #[test]
    fn unpaired_tokens_and_logprobs_or_a_wrong_count_are_typed_errors() {
        let unpaired = generation(vec![choice(&[97, 98], &[-0.5], FinishReason::Stop)]);
        assert!(matches!(
            rollouts_from_generation(unpaired, 1),
            Err(PolicyError::MalformedResponse(_))
        ));
        let one = generation(vec![choice(&[97], &[-0.5], FinishReason::Stop)]);
        assert!(rollouts_from_generation(one, 2).is_err());
    }
}
