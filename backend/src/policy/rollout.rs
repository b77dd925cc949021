//! Building Atropos training rows from token ids: the one place that knows atroposlib's layout of
//! `tokens`, `masks` and `inference_logprobs`, shared by every policy.

use super::{Finish, PolicyError, Rollout};

/// atroposlib's mask value for positions the trainer must not learn from (the prompt).
pub const PROMPT_MASK: i64 = -100;

/// atroposlib's placeholder logprob at positions without a sampled logprob (prompt positions, and
/// anything its `ManagedServer` pads).
pub const PROMPT_LOGPROB: f64 = 1.0;

/// One rollout: `tokens` = prompt then completion, `masks` = [`PROMPT_MASK`] over the prompt then
/// the completion's ids, `inference_logprobs` = [`PROMPT_LOGPROB`] over the prompt then `logprobs`.
///
/// Callers pass one logprob per completion token. Should they not, this follows atroposlib's
/// `ManagedServer`: missing logprobs are padded with [`PROMPT_LOGPROB`] and extra ones dropped, so
/// the three vectors always have the same length.
pub fn rollout_from_ids(
    prompt_ids: &[u32],
    completion_ids: &[u32],
    logprobs: &[f64],
    text: String,
    finish: Finish,
) -> Rollout {
    let total = prompt_ids.len() + completion_ids.len();
    let mut tokens = Vec::with_capacity(total);
    tokens.extend_from_slice(prompt_ids);
    tokens.extend_from_slice(completion_ids);

    let mut masks = Vec::with_capacity(total);
    masks.extend(std::iter::repeat_n(PROMPT_MASK, prompt_ids.len()));
    masks.extend(completion_ids.iter().map(|&id| i64::from(id)));

    let mut inference_logprobs = Vec::with_capacity(total);
    inference_logprobs.extend(std::iter::repeat_n(PROMPT_LOGPROB, prompt_ids.len()));
    inference_logprobs.extend(
        logprobs
            .iter()
            .copied()
            .chain(std::iter::repeat(PROMPT_LOGPROB))
            .take(completion_ids.len()),
    );

    Rollout {
        completion: text,
        tokens,
        masks,
        inference_logprobs,
        finish,
    }
}

/// A server that returns a different number of completions than asked for has misunderstood the
/// request (or is not the server we think); the group would be mis-sized for GRPO.
pub(crate) fn expect_choices(got: usize, wanted: usize) -> Result<(), PolicyError> {
    if got == wanted {
        Ok(())
    } else {
        Err(PolicyError::MalformedResponse(format!(
            "asked for {wanted} completions, got {got}"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_prompt_is_masked_and_the_completion_carries_its_ids_and_logprobs() {
        let r = rollout_from_ids(
            &[1, 2, 3],
            &[7, 8],
            &[-0.25, -1.5],
            "hi".into(),
            Finish::Stop,
        );
        assert_eq!(r.tokens, [1, 2, 3, 7, 8]);
        assert_eq!(r.masks, [-100, -100, -100, 7, 8]);
        assert_eq!(r.inference_logprobs, [1.0, 1.0, 1.0, -0.25, -1.5]);
        assert_eq!(r.completion, "hi");
        assert_eq!(r.finish, Finish::Stop);
    }

    #[test]
    fn short_logprobs_are_padded_and_long_ones_cut_like_atroposlib() {
        let short = rollout_from_ids(&[1], &[5, 6, 7], &[-0.5], String::new(), Finish::Length);
        assert_eq!(short.inference_logprobs, [1.0, -0.5, 1.0, 1.0]);
        let long = rollout_from_ids(&[1], &[5], &[-0.5, -0.7, -0.9], String::new(), Finish::Stop);
        assert_eq!(long.inference_logprobs, [1.0, -0.5]);
    }

    #[test]
    fn an_empty_completion_is_all_prompt() {
        let r = rollout_from_ids(&[4, 4], &[], &[], String::new(), Finish::Length);
        assert_eq!(r.tokens, [4, 4]);
        assert_eq!(r.masks, [-100, -100]);
        assert_eq!(r.inference_logprobs, [1.0, 1.0]);
    }

    #[test]
    fn token_ids_above_i32_survive_the_mask_conversion() {
        let r = rollout_from_ids(&[], &[u32::MAX], &[-1.0], String::new(), Finish::Stop);
        assert_eq!(r.masks, [i64::from(u32::MAX)]);
    }

    #[test]
    fn choice_counts_must_match_the_request() {
        assert!(expect_choices(3, 3).is_ok());
        assert!(matches!(
            expect_choices(2, 3),
            Err(PolicyError::MalformedResponse(_))
        ));
    }
}
