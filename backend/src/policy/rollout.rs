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

/// One training row for a dialogue of several model turns: `earlier` (the dialogue so far, its
/// model turns trained) followed by `next`, a rollout whose prompt is the whole dialogue rendered
/// again with what came back in between (tool results, the other side's turns). Those in-between
/// tokens stay masked like any prompt; `next`'s completion is trained.
///
/// `None` when `next`'s prompt does not begin with `earlier`'s tokens (a chat template that
/// rewrites earlier turns, or a completion that tokenizes differently from how it was sampled):
/// the caller then trains on `next` alone, which is still correct, only shorter.
pub fn join_turns(earlier: &Rollout, next: &Rollout) -> Option<Rollout> {
    let next_prompt_len = next
        .masks
        .iter()
        .position(|&m| m != PROMPT_MASK)
        .unwrap_or(next.masks.len());
    if next_prompt_len < earlier.tokens.len() || !next.tokens.starts_with(&earlier.tokens) {
        return None;
    }
    let joined = earlier.tokens.len();
    let mut masks = earlier.masks.clone();
    masks.extend_from_slice(&next.masks[joined..]);
    let mut inference_logprobs = earlier.inference_logprobs.clone();
    inference_logprobs.extend_from_slice(&next.inference_logprobs[joined..]);
    Some(Rollout {
        completion: next.completion.clone(),
        tokens: next.tokens.clone(),
        masks,
        inference_logprobs,
        finish: next.finish,
    })
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
    fn a_second_turn_keeps_the_first_trained_and_masks_what_came_between() {
        let first = rollout_from_ids(&[1, 2], &[7, 8], &[-0.5, -0.25], "a".into(), Finish::Stop);
        // The second prompt is the first row, then a tool result (30, 31), then the turn (9).
        let second = rollout_from_ids(
            &[1, 2, 7, 8, 30, 31],
            &[9],
            &[-2.0],
            "b".into(),
            Finish::Stop,
        );
        let joined = join_turns(&first, &second).expect("the first row is a prefix");
        assert_eq!(joined.tokens, [1, 2, 7, 8, 30, 31, 9]);
        assert_eq!(joined.masks, [-100, -100, 7, 8, -100, -100, 9]);
        assert_eq!(
            joined.inference_logprobs,
            [1.0, 1.0, -0.5, -0.25, 1.0, 1.0, -2.0]
        );
        assert_eq!(joined.completion, "b");
    }

    #[test]
    fn a_second_prompt_that_rewrote_the_first_turn_is_not_joined() {
        let first = rollout_from_ids(&[1, 2], &[7, 8], &[-0.5, -0.25], "a".into(), Finish::Stop);
        let retokenized =
            rollout_from_ids(&[1, 2, 78, 30], &[9], &[-2.0], "b".into(), Finish::Stop);
        assert_eq!(join_turns(&first, &retokenized), None);
        // A prompt shorter than the first row cannot continue it either.
        let short = rollout_from_ids(&[1], &[2, 7, 8, 9], &[-1.0; 4], "c".into(), Finish::Stop);
        assert_eq!(join_turns(&first, &short), None);
    }

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
