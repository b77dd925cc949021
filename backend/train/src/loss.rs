//! The GRPO family of losses: a clipped importance-ratio objective on the tokens of each
//! completion, with the three ways of averaging the variants differ by.
//!
//! Standard PPO clipping, for both signs of the advantage: the per-token objective is
//! `min(r·A, clip(r, 1−ε_low, 1+ε_high)·A)`. For A ≥ 0 that stops the push once r > 1+ε_high; for
//! A < 0 it equals `A·max(r, clip(r))` and stops the push once r < 1−ε_low. Atropos's
//! `example_trainer` takes `max(r·A, clip(r)·A)` for A < 0, i.e.
//! `A·min(r, clip(r))`: for negative advantages it keeps pushing tokens whose probability has
//! already fallen below 1−ε (r < 1−ε has full gradient) and stops pushing down tokens whose
//! probability has risen above 1+ε (r > 1+ε has zero gradient) — the opposite of the trust
//! region. The tests below pin both cases.

use candle_core::{DType, Result, Tensor};

/// Which average turns token losses into the step's loss.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Variant {
    /// DeepSeek's GRPO: each sequence's mean token loss, averaged over sequences; advantages
    /// normalised by the group's standard deviation.
    Grpo,
    /// Dr. GRPO (Liu et al. 2025): token losses summed and divided by a constant (sequences ×
    /// a fixed length), and advantages not divided by the standard deviation, which removes
    /// GRPO's length and difficulty biases.
    DrGrpo,
    /// DAPO (Yu et al. 2025): token-level average over every token of the step, clip-higher
    /// (ε_high > ε_low), and optionally dropping groups whose rewards are all equal.
    Dapo,
}

impl std::str::FromStr for Variant {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Self, Self::Err> {
        match s {
            "grpo" => Ok(Variant::Grpo),
            "dr_grpo" | "dr-grpo" => Ok(Variant::DrGrpo),
            "dapo" => Ok(Variant::Dapo),
            _ => Err(format!("unknown loss variant {s:?}: grpo, dr_grpo or dapo")),
        }
    }
}

/// What the importance ratio of a token is taken against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RatioBase {
    /// The sampling engine's logprobs, where the rollout sent them: the ratio corrects for the
    /// engine being a different copy of the policy (a quantized one, or one weight version
    /// behind), and tokens on which the two disagree by more than the clip range get no push.
    #[default]
    Inference,
    /// The trained model's own logprobs before the step, as TRL computes them: with one pass
    /// over each batch the ratio is exactly 1, nothing is clipped, and the gradient is the plain
    /// policy gradient on the sampled tokens, whatever engine sampled them.
    Trainer,
}

impl std::str::FromStr for RatioBase {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Self, Self::Err> {
        match s {
            "inference" => Ok(RatioBase::Inference),
            "trainer" => Ok(RatioBase::Trainer),
            _ => Err(format!("unknown ratio base {s:?}: inference or trainer")),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LossConfig {
    pub variant: Variant,
    /// What each token's importance ratio is taken against.
    pub ratio_base: RatioBase,
    pub eps_low: f64,
    pub eps_high: f64,
    /// Weight of the KL penalty to the reference model (0: none, as Atropos's example trainer has it).
    pub kl_beta: f64,
    /// Dr. GRPO's constant length (the generation budget); ignored by the other variants.
    pub dr_grpo_length: usize,
}

impl Default for LossConfig {
    fn default() -> Self {
        Self {
            variant: Variant::Grpo,
            ratio_base: RatioBase::Inference,
            eps_low: 0.2,
            eps_high: 0.2,
            kl_beta: 0.0,
            dr_grpo_length: 512,
        }
    }
}

/// One micro-batch, every tensor (batch × positions). Position t holds the prediction of token
/// t+1 of the sequence.
pub struct LossInputs<'a> {
    /// The trained policy's logprob of each target ([`target_logprobs`]), differentiable.
    pub logprobs: &'a Tensor,
    /// 1.0 where the token is trained (a completion token), 0.0 elsewhere.
    pub mask: &'a Tensor,
    /// The sampling engine's logprob of each target (the behaviour policy): the ratio's base
    /// under [`RatioBase::Inference`], and what the alignment statistic compares with.
    pub old_logprobs: &'a Tensor,
    pub advantages: &'a Tensor,
    /// Logprobs of the targets under the reference model, for the KL penalty.
    pub ref_logprobs: Option<&'a Tensor>,
}

/// How the whole optimizer step is counted, so micro-batches add up to exactly the step's loss.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StepTotals {
    pub sequences: usize,
    pub tokens: usize,
}

/// Sums over the micro-batch's masked tokens, to be combined across micro-batches.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct LossStats {
    pub tokens: f64,
    pub ratio_sum: f64,
    pub clipped: f64,
    pub kl_sum: f64,
    /// Σ |logp_train − logp_inference|: how far training and inference disagree.
    pub abs_diff_sum: f64,
    pub logp_sum: f64,
}

pub use crate::fused::target_logprobs;

/// This micro-batch's share of the step's loss (a scalar) and its statistics.
pub fn grpo_loss(
    input: &LossInputs<'_>,
    config: &LossConfig,
    totals: StepTotals,
) -> Result<(Tensor, LossStats)> {
    let mask = input.mask;
    let logp = input.logprobs.clone();
    // Masked positions get a log-ratio of 0 (ratio 1): their placeholder logprobs (atroposlib
    // writes 1.0 over the prompt) must not overflow exp() into inf · 0 = NaN.
    let base = match config.ratio_base {
        RatioBase::Inference => input.old_logprobs.clone(),
        RatioBase::Trainer => logp.detach(),
    };
    let log_ratio = ((&logp - &base)? * mask)?;
    let ratio = log_ratio.exp()?;
    let a = input.advantages;
    let clipped_ratio = ratio.clamp(1.0 - config.eps_low, 1.0 + config.eps_high)?;
    let objective = (&ratio * a)?.minimum(&(&clipped_ratio * a)?)?;
    let mut token_loss = objective.neg()?;
    let mut kl_sum = 0.0;
    if let (Some(reference), true) = (input.ref_logprobs, config.kl_beta > 0.0) {
        // k3 estimator of KL(π‖π_ref): exp(ref − logp) − (ref − logp) − 1, unbiased and ≥ 0.
        let d = ((reference - &logp)? * mask)?;
        let kl = ((d.exp()? - &d)? - 1.0)?;
        kl_sum = (&kl * mask)?.sum_all()?.to_scalar::<f32>()? as f64;
        token_loss = (token_loss + (kl * config.kl_beta)?)?;
    }
    let masked = (&token_loss * mask)?;
    let loss = match config.variant {
        Variant::Grpo => {
            let lengths = mask.sum_keepdim(1)?.maximum(1.0)?;
            let per_sequence = masked.sum_keepdim(1)?.div(&lengths)?;
            (per_sequence.sum_all()? / totals.sequences.max(1) as f64)?
        }
        Variant::DrGrpo => {
            let denominator = (totals.sequences.max(1) * config.dr_grpo_length.max(1)) as f64;
            (masked.sum_all()? / denominator)?
        }
        Variant::Dapo => (masked.sum_all()? / totals.tokens.max(1) as f64)?,
    };
    let stats = statistics(&logp, &ratio, a, input.old_logprobs, mask, config, kl_sum)?;
    Ok((loss, stats))
}

fn statistics(
    logp: &Tensor,
    ratio: &Tensor,
    advantages: &Tensor,
    old: &Tensor,
    mask: &Tensor,
    config: &LossConfig,
    kl_sum: f64,
) -> Result<LossStats> {
    let sum = |t: &Tensor| -> Result<f64> {
        Ok((t.detach() * mask)?.sum_all()?.to_scalar::<f32>()? as f64)
    };
    // A token is clipped when the clipped term is the one `min` picks and it is flat in r.
    let high = ratio.gt(1.0 + config.eps_high)?.to_dtype(DType::F32)?;
    let low = ratio.lt(1.0 - config.eps_low)?.to_dtype(DType::F32)?;
    let positive = advantages.gt(0.0)?.to_dtype(DType::F32)?;
    let negative = advantages.lt(0.0)?.to_dtype(DType::F32)?;
    let clipped = ((high * positive)? + (low * negative)?)?;
    Ok(LossStats {
        tokens: mask.sum_all()?.to_scalar::<f32>()? as f64,
        ratio_sum: sum(ratio)?,
        clipped: sum(&clipped)?,
        kl_sum,
        abs_diff_sum: sum(&(logp - old)?.abs()?)?,
        logp_sum: sum(logp)?,
    })
}

impl LossStats {
    pub fn add(&mut self, other: &LossStats) {
        self.tokens += other.tokens;
        self.ratio_sum += other.ratio_sum;
        self.clipped += other.clipped;
        self.kl_sum += other.kl_sum;
        self.abs_diff_sum += other.abs_diff_sum;
        self.logp_sum += other.logp_sum;
    }

    fn per_token(&self, value: f64) -> f64 {
        if self.tokens > 0.0 {
            value / self.tokens
        } else {
            0.0
        }
    }

    pub fn mean_ratio(&self) -> f64 {
        self.per_token(self.ratio_sum)
    }

    pub fn clip_fraction(&self) -> f64 {
        self.per_token(self.clipped)
    }

    pub fn mean_kl(&self) -> f64 {
        self.per_token(self.kl_sum)
    }

    pub fn alignment(&self) -> f64 {
        self.per_token(self.abs_diff_sum)
    }

    pub fn mean_logprob(&self) -> f64 {
        self.per_token(self.logp_sum)
    }
}

#[cfg(test)]
#[path = "loss_tests.rs"]
mod tests;
