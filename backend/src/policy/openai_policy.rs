//! A policy served by any OpenAI-compatible server, through chat completions or through text
//! completions of the locally chat-templated prompt.
//!
//! Such servers return text, not token ids, so the completion's ids come from re-encoding its text
//! with the local tokenizer (which must be the served model's for the ids to mean anything).

use std::sync::Arc;

use futures::future::BoxFuture;
use lachesis_inference::ModelTokenizer;

use super::client::ServerPool;
use super::openai::{
    ChatBody, CompletionBody, OpenAiChoice, TokenLogprobs, parse_chat, parse_completions,
};
use super::rollout::{PROMPT_LOGPROB, expect_choices, rollout_from_ids};
use super::tool_chat::{ToolChoice, offer_tools};
use super::{Finish, Policy, PolicyError, PolicyRequest, Rollout};

/// A model behind `/v1/chat/completions` (`chat`) or `/v1/completions` (not `chat`).
#[derive(Clone)]
pub struct OpenAiPolicy {
    pub pool: ServerPool,
    /// The served model's tokenizer: it renders the prompt and re-encodes the completions.
    pub tokenizer: Arc<ModelTokenizer>,
    /// Sent as `model` in every request.
    pub model_name: String,
    pub chat: bool,
}

impl OpenAiPolicy {
    pub fn new(
        pool: ServerPool,
        tokenizer: Arc<ModelTokenizer>,
        model_name: impl Into<String>,
        chat: bool,
    ) -> Self {
        Self {
            pool,
            tokenizer,
            model_name: model_name.into(),
            chat,
        }
    }

    async fn run(&self, request: PolicyRequest) -> Result<Vec<Rollout>, PolicyError> {
        if request.n == 0 {
            return Ok(Vec::new());
        }
        // Both modes record the templated prompt's ids: it is what a chat server renders too, and
        // what the trainer will condition on.
        // With tools, the recorded prompt teaches them as the embedded model would be taught: a
        // chat server renders its own tool format, which only it knows.
        let messages = offer_tools(&request.messages, &request.tools, &ToolChoice::Auto);
        let prompt = self.tokenizer.apply_chat_template(&messages, true)?;
        let prompt_ids = self.tokenizer.encode(&prompt)?;
        let choices = if self.chat {
            let body = ChatBody::new(&self.model_name, &request)?;
            parse_chat(&self.pool.post_json("/v1/chat/completions", &body).await?)?
        } else {
            let body = CompletionBody::new(&self.model_name, prompt, &request);
            parse_completions(&self.pool.post_json("/v1/completions", &body).await?)?
        };
        expect_choices(choices.len(), request.n)?;
        choices
            .into_iter()
            .map(|choice| rollout_from_choice(&self.tokenizer, &prompt_ids, choice))
            .collect()
    }
}

impl Policy for OpenAiPolicy {
    fn name(&self) -> String {
        self.model_name.clone()
    }

    fn complete(&self, request: PolicyRequest) -> BoxFuture<'_, Result<Vec<Rollout>, PolicyError>> {
        Box::pin(self.run(request))
    }
}

/// One rollout from one choice: the text re-encoded, logprobs per [`align_logprobs`].
pub fn rollout_from_choice(
    tokenizer: &ModelTokenizer,
    prompt_ids: &[u32],
    choice: OpenAiChoice,
) -> Result<Rollout, PolicyError> {
    let encoded = tokenizer.encode(&choice.text)?;
    let (ids, logprobs) =
        align_logprobs(tokenizer, encoded, choice.logprobs.as_ref(), choice.finish);
    Ok(rollout_from_ids(
        prompt_ids,
        &ids,
        &logprobs,
        choice.text,
        choice.finish,
    ))
}

/// Pairs the re-encoded completion ids with the server's logprobs. The rule:
///
/// 1. Same count of tokens: the server split the text as we do; use its logprobs position by
///    position.
/// 2. One more token, the completion finished with `stop`, and that last token is the end-of-text
///    token: the server reported the EOS it sampled (its text leaves it out). The EOS id is
///    appended to the ids, so the rollout teaches the model to stop, and every logprob is used.
/// 3. Anything else (no logprobs, or the server's tokenizer split the text differently): every
///    completion position gets [`PROMPT_LOGPROB`] (1.0), atroposlib's "no logprob" marker, instead
///    of logprobs shifted onto the wrong tokens; a warning says so. Not an error, because the
///    text and ids are still right and many uses (judging, evaluation) never read logprobs.
pub fn align_logprobs(
    tokenizer: &ModelTokenizer,
    mut ids: Vec<u32>,
    reported: Option<&TokenLogprobs>,
    finish: Finish,
) -> (Vec<u32>, Vec<f64>) {
    if let Some(reported) = reported {
        if reported.logprobs.len() == ids.len() {
            return (ids, reported.logprobs.clone());
        }
        let eos = tokenizer.eos_token_id();
        let last_is_eos = reported.tokens.last().is_some_and(|token| {
            tokenizer.token_string(eos).as_deref() == Some(token.as_str())
                || tokenizer.decode(&[eos]).is_ok_and(|text| text == *token)
        });
        if finish == Finish::Stop && reported.logprobs.len() == ids.len() + 1 && last_is_eos {
            ids.push(eos);
            return (ids, reported.logprobs.clone());
        }
        tracing::warn!(
            ours = ids.len(),
            server = reported.logprobs.len(),
            "the server split the completion into a different number of tokens; \
             its logprobs are not used"
        );
    }
    let filler = vec![PROMPT_LOGPROB; ids.len()];
    (ids, filler)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::testing::{IM_END, byte_tokenizer};

    fn reported(tokens: &[&str], logprobs: &[f64]) -> TokenLogprobs {
        TokenLogprobs {
            tokens: tokens.iter().map(|t| (*t).to_owned()).collect(),
            logprobs: logprobs.to_vec(),
            top: vec![Vec::new(); tokens.len()],
            bytes: vec![None; tokens.len()],
        }
    }

    #[test]
    fn matching_counts_use_the_servers_logprobs() {
        let tok = byte_tokenizer();
        let lp = reported(&["h", "i"], &[-0.5, -0.25]);
        let (ids, logprobs) = align_logprobs(&tok, vec![104, 105], Some(&lp), Finish::Length);
        assert_eq!((ids, logprobs), (vec![104, 105], vec![-0.5, -0.25]));
    }

    #[test]
    fn a_reported_end_of_text_token_is_appended_with_its_logprob() {
        let tok = byte_tokenizer();
        let lp = reported(&["h", "i", "<|im_end|>"], &[-0.5, -0.25, -0.125]);
        let (ids, logprobs) = align_logprobs(&tok, vec![104, 105], Some(&lp), Finish::Stop);
        assert_eq!(ids, [104, 105, IM_END]);
        assert_eq!(logprobs, [-0.5, -0.25, -0.125]);
    }

    #[test]
    fn an_extra_token_that_is_not_the_end_of_text_is_not_trusted() {
        let tok = byte_tokenizer();
        let lp = reported(&["h", "i", "!"], &[-0.5, -0.25, -0.125]);
        let (ids, logprobs) = align_logprobs(&tok, vec![104, 105], Some(&lp), Finish::Stop);
        assert_eq!((ids, logprobs), (vec![104, 105], vec![1.0, 1.0]));
        // Nor is a reported EOS when the completion was cut by length.
        let lp = reported(&["h", "i", "<|im_end|>"], &[-0.5, -0.25, -0.125]);
        let (ids, _) = align_logprobs(&tok, vec![104, 105], Some(&lp), Finish::Length);
        assert_eq!(ids, [104, 105]);
    }

    #[test]
    fn mismatched_or_missing_logprobs_become_the_placeholder() {
        let tok = byte_tokenizer();
        let lp = reported(&["hi"], &[-0.5]);
        let (_, logprobs) = align_logprobs(&tok, vec![104, 105], Some(&lp), Finish::Stop);
        assert_eq!(logprobs, [1.0, 1.0]);
        let (_, logprobs) = align_logprobs(&tok, vec![104], None, Finish::Stop);
        assert_eq!(logprobs, [1.0]);
    }

    #[test]
    fn a_chat_choice_becomes_a_rollout_over_the_templated_prompt() {
        let tok = byte_tokenizer();
        let choice = OpenAiChoice {
            text: "ok".into(),
            finish: Finish::Stop,
            logprobs: Some(reported(&["o", "k"], &[-0.1, -0.2])),
        };
        let rollout = rollout_from_choice(&tok, &[1, 2, 3], choice).expect("encodes");
        assert_eq!(rollout.tokens, [1, 2, 3, u32::from(b'o'), u32::from(b'k')]);
        assert_eq!(rollout.masks, [-100, -100, -100, 111, 107]);
        assert_eq!(rollout.inference_logprobs, [1.0, 1.0, 1.0, -0.1, -0.2]);
        assert_eq!(rollout.completion, "ok");
    }
}
