//! Turning one position's logits into a token: temperature, nucleus (top-p) truncation, and the
//! log-probabilities reported to callers. Pure functions over slices, so they are property-tested
//! without a model.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};

use crate::EngineError;

/// What a caller may ask of one generation, as OpenAI and vLLM name it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SamplingParams {
    /// 0 means greedy decoding.
    pub temperature: f32,
    /// Nucleus sampling: keep the most likely tokens whose probabilities add up to `top_p`.
    pub top_p: f32,
    pub max_tokens: usize,
    /// Completions of the same prompt, decoded together as one batch.
    pub n: usize,
    /// Generation stops when the text contains one of these; the text is cut before it.
    pub stop: Vec<String>,
    /// Makes sampling reproducible.
    pub seed: Option<u64>,
    /// Alternatives reported per generated token, besides the chosen one.
    pub top_logprobs: usize,
    /// When set, the log-probability of every prompt token and this many alternatives.
    pub prompt_logprobs: Option<usize>,
}

impl Default for SamplingParams {
    fn default() -> Self {
        Self {
            temperature: 1.0,
            top_p: 1.0,
            max_tokens: 16,
            n: 1,
            stop: Vec::new(),
            seed: None,
            top_logprobs: 0,
            prompt_logprobs: None,
        }
    }
}

/// Upper bounds that keep one request from occupying the engine for hours.
pub const MAX_CHOICES: usize = 64;
pub const MAX_TOP_LOGPROBS: usize = 20;

impl SamplingParams {
    /// Refuses values no engine could honour, with a message naming the field.
    pub fn validate(&self) -> Result<(), EngineError> {
        let bad = |msg: String| Err(EngineError::InvalidRequest(msg));
        if !self.temperature.is_finite() || self.temperature < 0.0 {
            return bad(format!(
                "temperature must be >= 0, got {}",
                self.temperature
            ));
        }
        if !(self.top_p > 0.0 && self.top_p <= 1.0) {
            return bad(format!("top_p must be in (0, 1], got {}", self.top_p));
        }
        if self.max_tokens == 0 {
            return bad("max_tokens must be at least 1".into());
        }
        if self.n == 0 || self.n > MAX_CHOICES {
            return bad(format!(
                "n must be between 1 and {MAX_CHOICES}, got {}",
                self.n
            ));
        }
        if self.top_logprobs > MAX_TOP_LOGPROBS
            || self.prompt_logprobs.is_some_and(|k| k > MAX_TOP_LOGPROBS)
        {
            return bad(format!("at most {MAX_TOP_LOGPROBS} logprobs per token"));
        }
        if self.stop.iter().any(String::is_empty) {
            return bad("stop strings must not be empty".into());
        }
        Ok(())
    }

    pub fn rng(&self) -> StdRng {
        match self.seed {
            Some(seed) => StdRng::seed_from_u64(seed),
            None => StdRng::from_os_rng(),
        }
    }
}

/// Natural-log probabilities of every token (NaN logits count as impossible).
pub fn log_softmax(logits: &[f32]) -> Vec<f32> {
    let max = logits
        .iter()
        .copied()
        .filter(|x| !x.is_nan())
        .fold(f32::NEG_INFINITY, f32::max);
    if max == f32::NEG_INFINITY || max.is_nan() {
        return vec![f32::NEG_INFINITY; logits.len()];
    }
    let sum: f64 = logits
        .iter()
        .filter(|x| !x.is_nan())
        .map(|&x| f64::from(x - max).exp())
        .sum();
    let log_sum = sum.ln() as f32;
    logits
        .iter()
        .map(|&x| {
            if x.is_nan() {
                f32::NEG_INFINITY
            } else {
                x - max - log_sum
            }
        })
        .collect()
}

/// The `k` most likely tokens, most likely first, ties broken by the lower id.
pub fn top_k(logprobs: &[f32], k: usize) -> Vec<(u32, f32)> {
    let mut ranked: Vec<(u32, f32)> = logprobs
        .iter()
        .enumerate()
        .filter(|(_, lp)| lp.is_finite())
        .map(|(id, &lp)| (id as u32, lp))
        .collect();
    let k = k.min(ranked.len());
    if k == 0 {
        return Vec::new();
    }
    let by_rank = |a: &(u32, f32), b: &(u32, f32)| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0));
    ranked.select_nth_unstable_by(k - 1, by_rank);
    ranked.truncate(k);
    ranked.sort_by(by_rank);
    ranked
}

/// Picks the next token from `logprobs` (the model's own distribution, see [`log_softmax`]).
/// Greedy when the temperature is 0; otherwise tempered and truncated to the top-p nucleus.
pub fn sample(
    logprobs: &[f32],
    temperature: f32,
    top_p: f32,
    rng: &mut impl Rng,
) -> Result<u32, EngineError> {
    if logprobs.iter().all(|lp| !lp.is_finite()) {
        return Err(EngineError::Model(
            "the model produced no finite logits".into(),
        ));
    }
    if temperature <= f32::EPSILON {
        return Ok(top_k(logprobs, 1)[0].0);
    }
    let max = logprobs
        .iter()
        .copied()
        .filter(|x| x.is_finite())
        .fold(f32::NEG_INFINITY, f32::max);
    let mut candidates: Vec<(u32, f64)> = logprobs
        .iter()
        .enumerate()
        .filter(|(_, lp)| lp.is_finite())
        .map(|(id, &lp)| (id as u32, f64::from((lp - max) / temperature).exp()))
        .filter(|(_, weight)| *weight > 0.0)
        .collect();
    let total: f64 = candidates.iter().map(|(_, w)| w).sum();
    if top_p < 1.0 {
        candidates.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        let budget = f64::from(top_p) * total;
        let mut cumulative = 0.0;
        let mut keep = 0;
        for (_, weight) in &candidates {
            keep += 1;
            cumulative += weight;
            if cumulative >= budget {
                break;
            }
        }
        candidates.truncate(keep.max(1));
    }
    let kept: f64 = candidates.iter().map(|(_, w)| w).sum();
    let mut target = rng.random::<f64>() * kept;
    for (id, weight) in &candidates {
        if target < *weight {
            return Ok(*id);
        }
        target -= weight;
    }
    // Rounding can leave a sliver past the last weight; the last candidate owns it.
    Ok(candidates.last().map(|(id, _)| *id).unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn logits_strategy() -> impl Strategy<Value = Vec<f32>> {
        prop::collection::vec(
            prop_oneof![
                8 => -30.0f32..30.0,
                1 => Just(f32::NEG_INFINITY),
                1 => Just(f32::NAN),
            ],
            1..64,
        )
    }

    proptest! {
        #[test]
        fn log_softmax_is_a_distribution(logits in logits_strategy()) {
            let lps = log_softmax(&logits);
            prop_assert_eq!(lps.len(), logits.len());
            let finite: Vec<f32> = lps.iter().copied().filter(|x| x.is_finite()).collect();
            if !finite.is_empty() {
                let total: f64 = finite.iter().map(|&x| f64::from(x).exp()).sum();
                prop_assert!((total - 1.0).abs() < 1e-3, "probabilities sum to {}", total);
                prop_assert!(finite.iter().all(|&x| x <= 1e-5));
            }
        }

        #[test]
        fn sampled_tokens_are_possible_and_inside_the_nucleus(
            logits in logits_strategy(),
            temperature in 0.0f32..2.0,
            top_p in 0.01f32..=1.0,
            seed in any::<u64>(),
        ) {
            let lps = log_softmax(&logits);
            let mut rng = StdRng::seed_from_u64(seed);
            match sample(&lps, temperature, top_p, &mut rng) {
                Ok(id) => {
                    let lp = lps[id as usize];
                    prop_assert!(lp.is_finite(), "sampled an impossible token");
                    if temperature <= f32::EPSILON {
                        prop_assert_eq!(id, top_k(&lps, 1)[0].0);
                    }
                }
                Err(_) => prop_assert!(lps.iter().all(|x| !x.is_finite())),
            }
        }

        #[test]
        fn top_k_is_sorted_and_bounded(logits in logits_strategy(), k in 0usize..10) {
            let lps = log_softmax(&logits);
            let top = top_k(&lps, k);
            prop_assert!(top.len() <= k);
            prop_assert!(top.windows(2).all(|w| w[0].1 >= w[1].1));
            if let Some(best) = top.first() {
                prop_assert!(lps.iter().filter(|x| x.is_finite()).all(|&x| x <= best.1));
            }
        }
    }

    #[test]
    fn a_tiny_nucleus_is_greedy() {
        let lps = log_softmax(&[0.0, 3.0, 1.0, 2.9]);
        let mut rng = StdRng::seed_from_u64(7);
        for _ in 0..50 {
            assert_eq!(sample(&lps, 1.0, 0.05, &mut rng).unwrap(), 1);
        }
    }

    #[test]
    fn sampling_follows_the_distribution() {
        // p = [0.25, 0.75]: about three quarters of 4,000 draws pick token 1.
        let lps = [0.25f32.ln(), 0.75f32.ln()];
        let mut rng = StdRng::seed_from_u64(11);
        let ones = (0..4000)
            .filter(|_| sample(&lps, 1.0, 1.0, &mut rng).unwrap() == 1)
            .count();
        assert!((2850..3150).contains(&ones), "token 1 drawn {ones} times");
    }

    #[test]
    fn invalid_parameters_are_refused_by_name() {
        let params = SamplingParams {
            top_p: 0.0,
            ..SamplingParams::default()
        };
        let err = params.validate().unwrap_err().to_string();
        assert!(err.contains("top_p"), "{err}");
    }
}
