//! A policy served by vLLM's native `/generate` endpoint, called exactly as atroposlib's
//! `VLLMServer.tokens_and_logprobs_completion` calls it: the chat template is applied here, the
//! prompt travels as token ids, and every sampled token comes back with its id and logprob.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use futures::future::BoxFuture;
use lachesis_inference::{ChatMessage, ModelTokenizer};
use serde::{Deserialize, Serialize};

use super::client::ServerPool;
use super::rollout::{expect_choices, rollout_from_ids};
use super::tool_chat::{ToolChoice, offer_tools};
use super::wire::{OrderedLogprobs, Sampling, decode, finite, malformed, parse_finish, quote};
use super::{Finish, Policy, PolicyError, PolicyRequest, Rollout};

/// The body of `POST /generate`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GenerateBody {
    /// A LoRA adapter's name on a Lachesis server; never sent to vLLM, whose `/generate` takes
    /// every other field as a sampling parameter and refuses unknown ones.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    pub prompt: PromptIds,
    /// 0 asks vLLM for the sampled token's logprob only (atroposlib sends 0).
    pub logprobs: u32,
    #[serde(flatten)]
    pub sampling: Sampling,
    pub stop: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PromptIds {
    pub prompt_token_ids: Vec<u32>,
}

impl GenerateBody {
    pub fn new(prompt_ids: Vec<u32>, request: &PolicyRequest) -> Self {
        Self {
            model: None,
            prompt: PromptIds {
                prompt_token_ids: prompt_ids,
            },
            logprobs: 0,
            sampling: Sampling::of(request),
            stop: request.stop.clone(),
        }
    }
}

/// `/generate`'s answer, checked: every choice has a finish reason and one id and logprob per
/// generated token.
#[derive(Debug, Clone, PartialEq)]
pub struct GenerateAnswer {
    /// The prompt ids the server says it used, when it says so.
    pub prompt_token_ids: Option<Vec<u32>>,
    pub choices: Vec<GeneratedChoice>,
    /// The weights that answered, when the server says (Lachesis does; vLLM does not).
    pub weight_version: Option<i64>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct GeneratedChoice {
    pub text: String,
    /// The sampled tokens: the first key of each position's logprob dictionary.
    pub token_ids: Vec<u32>,
    pub logprobs: Vec<f64>,
    pub finish: Finish,
}

/// The answer as sent; shapes are checked by serde, cross-field agreement by [`parse_generate`].
#[derive(Deserialize)]
struct RawAnswer {
    text: Vec<String>,
    finish_reasons: Vec<Option<String>>,
    /// Per choice, per token, a list whose first item maps the sampled token id to its logprob.
    logprobs: Vec<Vec<Vec<OrderedLogprobs>>>,
    #[serde(default)]
    token_ids: Option<Vec<Vec<u32>>>,
    #[serde(default)]
    prompt_token_ids: Option<Vec<u32>>,
    #[serde(default)]
    weight_version: Option<i64>,
}

/// Parses the body of a `/generate` answer; anything inconsistent is `MalformedResponse`.
pub fn parse_generate(body: &[u8]) -> Result<GenerateAnswer, PolicyError> {
    let raw: RawAnswer = decode(body)?;
    let choices = raw.text.len();
    if raw.finish_reasons.len() != choices || raw.logprobs.len() != choices {
        return Err(malformed(format!(
            "{choices} texts but {} finish reasons and {} logprob lists",
            raw.finish_reasons.len(),
            raw.logprobs.len()
        )));
    }
    if let Some(ids) = &raw.token_ids
        && ids.len() != choices
    {
        return Err(malformed(format!(
            "{choices} texts but {} token id lists",
            ids.len()
        )));
    }
    let mut parsed = Vec::with_capacity(choices);
    let texts = raw.text.into_iter();
    let finishes = raw.finish_reasons.into_iter();
    for (c, ((text, finish), positions)) in texts.zip(finishes).zip(raw.logprobs).enumerate() {
        let finish = parse_finish(finish.as_deref())?;
        let mut token_ids = Vec::with_capacity(positions.len());
        let mut logprobs = Vec::with_capacity(positions.len());
        for (t, position) in positions.iter().enumerate() {
            let (key, logprob) = position
                .first()
                .and_then(|dict| dict.0.first())
                .ok_or_else(|| malformed(format!("choice {c}, token {t}: no sampled token")))?;
            let id = key.parse::<u32>().map_err(|_| {
                malformed(format!(
                    "choice {c}, token {t}: {:?} is not a token id",
                    quote(key)
                ))
            })?;
            token_ids.push(id);
            logprobs.push(finite(*logprob, || {
                format!("choice {c}, token {t}: the logprob")
            })?);
        }
        // When the server also lists the ids, they must be the sampled tokens we just read; if
        // not, we cannot tell which list the logprobs belong to.
        if let Some(listed) = raw.token_ids.as_ref().and_then(|ids| ids.get(c))
            && *listed != token_ids
        {
            return Err(malformed(format!(
                "choice {c}: token_ids disagree with the sampled tokens of its logprobs"
            )));
        }
        parsed.push(GeneratedChoice {
            text,
            token_ids,
            logprobs,
            finish,
        });
    }
    Ok(GenerateAnswer {
        prompt_token_ids: raw.prompt_token_ids,
        choices: parsed,
        weight_version: raw.weight_version,
    })
}

/// Turns a parsed answer into rollouts over `prompt_ids`, the ids that were sent.
pub fn rollouts_from_answer(
    prompt_ids: &[u32],
    answer: GenerateAnswer,
    n: usize,
) -> Result<Vec<Rollout>, PolicyError> {
    expect_choices(answer.choices.len(), n)?;
    // A server that conditioned on other ids than ours produced logprobs for a different prompt;
    // training on them would be silently wrong.
    if let Some(echoed) = &answer.prompt_token_ids
        && echoed.as_slice() != prompt_ids
    {
        return Err(malformed(format!(
            "the server generated from {} prompt tokens other than the {} sent",
            echoed.len(),
            prompt_ids.len()
        )));
    }
    Ok(answer
        .choices
        .into_iter()
        .map(|c| rollout_from_ids(prompt_ids, &c.token_ids, &c.logprobs, c.text, c.finish))
        .collect())
}

/// Chat template with the generation prompt, then token ids: what the model is conditioned on and
/// what Atropos trains on.
pub(crate) fn prompt_ids(
    tokenizer: &ModelTokenizer,
    messages: &[ChatMessage],
) -> Result<Vec<u32>, PolicyError> {
    let prompt = tokenizer.apply_chat_template(messages, true)?;
    Ok(tokenizer.encode(&prompt)?)
}

/// [`prompt_ids`] of a request, its tools (if any) taught in the system message: a model whose
/// template is rendered here has no other way to learn them, and its calls come back as the
/// `<tool_call>` blocks the policy contract asks for.
pub(crate) fn request_prompt_ids(
    tokenizer: &ModelTokenizer,
    request: &PolicyRequest,
) -> Result<Vec<u32>, PolicyError> {
    let messages = offer_tools(&request.messages, &request.tools, &ToolChoice::Auto);
    prompt_ids(tokenizer, &messages)
}

/// A model behind vLLM's `/generate` (atroposlib's `vllm_api_server.py`, or our embedded server).
#[derive(Clone)]
pub struct VllmPolicy {
    pub pool: ServerPool,
    /// The served model's tokenizer: prompts are tokenized here, as atroposlib does.
    pub tokenizer: Arc<ModelTokenizer>,
    pub model_name: String,
    /// The LoRA adapter asked for by name (a Lachesis server only).
    pub adapter: Option<String>,
    /// The weight version of the latest answer that reported one; -1 before any.
    seen_version: Arc<AtomicI64>,
}

impl VllmPolicy {
    pub fn new(
        pool: ServerPool,
        tokenizer: Arc<ModelTokenizer>,
        model_name: impl Into<String>,
    ) -> Self {
        Self {
            pool,
            tokenizer,
            model_name: model_name.into(),
            adapter: None,
            seen_version: Arc::new(AtomicI64::new(-1)),
        }
    }

    /// Asks a Lachesis server for its LoRA adapter `name` instead of the base.
    pub fn with_adapter(mut self, name: impl Into<String>) -> Self {
        self.adapter = Some(name.into());
        self
    }

    async fn run(&self, request: PolicyRequest) -> Result<Vec<Rollout>, PolicyError> {
        if request.n == 0 {
            return Ok(Vec::new());
        }
        let ids = request_prompt_ids(&self.tokenizer, &request)?;
        let mut body = GenerateBody::new(ids.clone(), &request);
        body.model = self.adapter.clone();
        let answer = parse_generate(&self.pool.post_json("/generate", &body).await?)?;
        if let Some(version) = answer.weight_version {
            self.seen_version.store(version, Ordering::SeqCst);
        }
        rollouts_from_answer(&ids, answer, request.n)
    }
}

impl Policy for VllmPolicy {
    fn name(&self) -> String {
        self.model_name.clone()
    }

    fn complete(&self, request: PolicyRequest) -> BoxFuture<'_, Result<Vec<Rollout>, PolicyError>> {
        Box::pin(self.run(request))
    }

    /// The version the server reported last: groups are labelled with the weights seen before
    /// their rollouts, the honest (older) label when a sync lands during them.
    fn weight_version(&self) -> Option<i64> {
        Some(self.seen_version.load(Ordering::SeqCst)).filter(|v| *v >= 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::policy::testing::VLLM_SAMPLE as SAMPLE;
    use crate::policy::testing::assert_malformed;

    #[test]
    fn a_real_shaped_answer_parses_into_ids_logprobs_and_finishes() {
        let answer = parse_generate(SAMPLE.as_bytes()).expect("valid");
        assert_eq!(
            answer.prompt_token_ids.as_deref(),
            Some(&[1, 4093, 198, 2][..])
        );
        assert_eq!(answer.choices.len(), 2);
        assert_eq!(answer.choices[0].token_ids, [20614, 30, 2]);
        assert_eq!(answer.choices[0].logprobs, [-0.0123, -0.51, -0.002]);
        assert_eq!(answer.choices[0].finish, Finish::Stop);
        assert_eq!(answer.choices[1].text, "It is Paris");
        assert_eq!(answer.choices[1].finish, Finish::Length);
    }

    #[test]
    fn the_sampled_token_is_the_first_key_even_with_alternatives_listed() {
        let body = r#"{"text": ["a"], "finish_reasons": ["length"],
            "logprobs": [[[{"9": -0.4, "3": -0.1, "100": -2.0}]]]}"#;
        let answer = parse_generate(body.as_bytes()).expect("valid without optional fields");
        assert_eq!(answer.choices[0].token_ids, [9]);
        assert_eq!(answer.choices[0].logprobs, [-0.4]);
        assert_eq!(answer.prompt_token_ids, None);
    }

    #[test]
    fn inconsistent_answers_are_malformed() {
        let cases = [
            // No logprobs at all (the server ignored the request's `logprobs`).
            r#"{"text": ["a"], "finish_reasons": ["stop"]}"#,
            // One text, two finish reasons.
            r#"{"text": ["a"], "finish_reasons": ["stop", "stop"], "logprobs": [[]]}"#,
            // A token key that is not an id.
            r#"{"text": ["a"], "finish_reasons": ["stop"], "logprobs": [[[{"a": -1.0}]]]}"#,
            r#"{"text": ["a"], "finish_reasons": ["stop"], "logprobs": [[[{"-1": -1.0}]]]}"#,
            // An empty position.
            r#"{"text": ["a"], "finish_reasons": ["stop"], "logprobs": [[[]]]}"#,
            r#"{"text": ["a"], "finish_reasons": ["stop"], "logprobs": [[[{}]]]}"#,
            // A logprob that is not a number, or overflows.
            r#"{"text": ["a"], "finish_reasons": ["stop"], "logprobs": [[[{"1": "NaN"}]]]}"#,
            r#"{"text": ["a"], "finish_reasons": ["stop"], "logprobs": [[[{"1": 1e999}]]]}"#,
            // token_ids that disagree with the logprobs' keys, or in number.
            r#"{"text": ["a"], "finish_reasons": ["stop"], "logprobs": [[[{"1": -1.0}]]], "token_ids": [[2]]}"#,
            r#"{"text": ["a"], "finish_reasons": ["stop"], "logprobs": [[[{"1": -1.0}]]], "token_ids": []}"#,
            // Unknown or missing finish reason.
            r#"{"text": ["a"], "finish_reasons": ["weird"], "logprobs": [[]]}"#,
            r#"{"text": ["a"], "finish_reasons": [null], "logprobs": [[]]}"#,
            "",
            "[]",
            "{\"text\": [\"a\"]",
        ];
        assert_malformed(parse_generate, &cases);
    }

    #[test]
    fn rollouts_put_the_prompt_first_masked_and_the_samples_after() {
        let answer = parse_generate(SAMPLE.as_bytes()).expect("valid");
        let rollouts = rollouts_from_answer(&[1, 4093, 198, 2], answer, 2).expect("consistent");
        let first = &rollouts[0];
        assert_eq!(first.tokens, [1, 4093, 198, 2, 20614, 30, 2]);
        assert_eq!(first.masks, [-100, -100, -100, -100, 20614, 30, 2]);
        assert_eq!(
            first.inference_logprobs,
            [1.0, 1.0, 1.0, 1.0, -0.0123, -0.51, -0.002]
        );
        assert_eq!(first.completion, "Paris.");
        assert_eq!(rollouts[1].finish, Finish::Length);
    }

    #[test]
    fn rollouts_refuse_a_wrong_count_or_a_different_prompt() {
        let answer = parse_generate(SAMPLE.as_bytes()).expect("valid");
        assert!(rollouts_from_answer(&[1, 4093, 198, 2], answer.clone(), 3).is_err());
        assert!(rollouts_from_answer(&[1, 2, 3], answer, 2).is_err());
    }

    #[test]
    fn the_request_body_is_the_one_atroposlib_sends() {
        let request = PolicyRequest {
            tools: Vec::new(),
            messages: vec![ChatMessage::new("user", "hi")],
            n: 4,
            max_tokens: 32,
            temperature: 0.75,
            top_p: 0.5,
            stop: vec!["</answer>".into()],
        };
        let body = serde_json::to_value(GenerateBody::new(vec![5, 6], &request)).expect("json");
        assert_eq!(
            body,
            serde_json::json!({
                "prompt": {"prompt_token_ids": [5, 6]},
                "logprobs": 0,
                "n": 4,
                "max_tokens": 32,
                "temperature": 0.75,
                "top_p": 0.5,
                "stop": ["</answer>"]
            })
        );
    }

    #[test]
    fn prompts_are_tokenized_with_the_chat_template_and_generation_prompt() {
        let tokenizer = crate::policy::testing::byte_tokenizer();
        let ids = prompt_ids(&tokenizer, &[ChatMessage::new("user", "hi")]).expect("encodes");
        let text = tokenizer.decode(&ids).expect("decodes");
        assert_eq!(
            text,
            "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
        );
        assert_eq!(ids[0], crate::policy::testing::IM_START);
    }
}
