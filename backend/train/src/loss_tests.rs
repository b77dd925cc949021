//! Loss values computed by hand. Every logit row is [0, 0] (p = ½ for either token), so a token's
//! importance ratio is set exactly by its old logprob: old = ln ½ − ln r.

use candle_core::{Device, Tensor, Var};

use super::*;

/// (ratio, advantage, trained) per position, one row per sequence.
type Token = (f32, f32, bool);

struct Case {
    logits: Var,
    logprobs: Tensor,
    mask: Tensor,
    old: Tensor,
    adv: Tensor,
}

fn case(rows: &[&[Token]]) -> Case {
    let (b, t) = (rows.len(), rows[0].len());
    let flat = rows.iter().flat_map(|r| r.iter().copied());
    let half = 0.5f32.ln();
    let (mut mask, mut old, mut adv) = (Vec::new(), Vec::new(), Vec::new());
    for (ratio, a, trained) in flat {
        mask.push(if trained { 1.0f32 } else { 0.0 });
        old.push(half - ratio.ln());
        adv.push(a);
    }
    let cpu = &Device::Cpu;
    let logits = Var::zeros((b, t, 2), DType::F32, cpu).unwrap();
    let targets = Tensor::zeros((b, t), DType::U32, cpu).unwrap();
    let inv_t = Tensor::ones(b, DType::F32, cpu).unwrap();
    Case {
        logprobs: target_logprobs(logits.as_tensor(), &targets, &inv_t).unwrap(),
        logits,
        mask: Tensor::from_vec(mask, (b, t), cpu).unwrap(),
        old: Tensor::from_vec(old, (b, t), cpu).unwrap(),
        adv: Tensor::from_vec(adv, (b, t), cpu).unwrap(),
    }
}

impl Case {
    fn inputs(&self) -> LossInputs<'_> {
        LossInputs {
            logprobs: &self.logprobs,
            mask: &self.mask,
            old_logprobs: &self.old,
            advantages: &self.adv,
            ref_logprobs: None,
        }
    }

    fn loss(&self, config: &LossConfig) -> (f64, LossStats) {
        let totals = StepTotals {
            sequences: self.mask.dim(0).unwrap(),
            tokens: self.mask.sum_all().unwrap().to_scalar::<f32>().unwrap() as usize,
        };
        let (loss, stats) = grpo_loss(&self.inputs(), config, totals).unwrap();
        (loss.to_scalar::<f32>().unwrap() as f64, stats)
    }

    /// dLoss/dlogit of the target at each position (zero when the token's term is flat).
    fn target_grads(&self, config: &LossConfig) -> Vec<Vec<f32>> {
        let totals = StepTotals {
            sequences: self.mask.dim(0).unwrap(),
            tokens: 3,
        };
        let (loss, _) = grpo_loss(&self.inputs(), config, totals).unwrap();
        let grads = loss.backward().unwrap();
        let g = grads
            .get(self.logits.as_tensor())
            .expect("logits get a gradient");
        g.narrow(2, 0, 1)
            .unwrap()
            .squeeze(2)
            .unwrap()
            .to_vec2()
            .unwrap()
    }
}

fn close(a: f64, b: f64) {
    assert!((a - b).abs() < 1e-5, "{a} != {b}");
}

/// seq 0: unclipped positive (r 1.1, A 2), clipped positive (r 1.5, A 2);
/// seq 1: negative below the range (r 0.5, A −1), and a masked token with a huge advantage.
fn mixed() -> Case {
    case(&[
        &[(1.1, 2.0, true), (1.5, 2.0, true)],
        &[(0.5, -1.0, true), (3.0, 100.0, false)],
    ])
}

#[test]
fn grpo_averages_each_sequences_mean_token_loss() {
    // Token losses −2.2, −min(3.0, 2.4) = −2.4 | −min(−0.5, −0.8) = 0.8; masked token ignored.
    // Sequence means −2.3 and 0.8; their mean −0.75.
    let (loss, stats) = mixed().loss(&LossConfig::default());
    close(loss, -0.75);
    close(stats.tokens, 3.0);
    close(stats.mean_ratio(), (1.1 + 1.5 + 0.5) / 3.0);
    // The clipped positive token and the clipped negative one.
    close(stats.clip_fraction(), 2.0 / 3.0);
}

#[test]
fn dapo_averages_over_tokens_with_a_higher_upper_clip() {
    let config = LossConfig {
        variant: Variant::Dapo,
        eps_high: 0.28,
        ..LossConfig::default()
    };
    // −2.2, −min(3.0, 2.56) = −2.56, 0.8: sum −3.96 over 3 tokens.
    let (loss, _) = mixed().loss(&config);
    close(loss, -3.96 / 3.0);
}

#[test]
fn dr_grpo_divides_the_token_sum_by_a_constant_length() {
    let config = LossConfig {
        variant: Variant::DrGrpo,
        dr_grpo_length: 4,
        ..LossConfig::default()
    };
    // (−2.2 − 2.4 + 0.8) / (2 sequences × 4).
    let (loss, _) = mixed().loss(&config);
    close(loss, -3.8 / 8.0);
}

#[test]
fn negative_advantages_clip_like_ppo_not_like_atropos_example_trainer() {
    // A = −1 at r = 1.5: PPO keeps the full push down, loss −(−1.5) = 1.5 (Atropos's example trainer: 1.2, flat).
    // A = −1 at r = 0.5: PPO stops at 1 − ε, loss 0.8 and flat (Atropos's example trainer: 0.5 with gradient).
    let up = case(&[&[(1.5, -1.0, true)]]);
    let down = case(&[&[(0.5, -1.0, true)]]);
    let config = LossConfig::default();
    close(up.loss(&config).0, 1.5);
    close(down.loss(&config).0, 0.8);
    let g_up = up.target_grads(&config)[0][0];
    let g_down = down.target_grads(&config)[0][0];
    // dLoss/dz = dLoss/dlogp · (1 − p) = (−A·r) · ½ = 0.75 for the first; zero for the second.
    assert!((g_up - 0.75).abs() < 1e-5, "{g_up}");
    assert_eq!(g_down, 0.0);
}

#[test]
fn positive_advantages_stop_pushing_above_the_upper_clip() {
    let config = LossConfig::default();
    let grads = mixed().target_grads(&config);
    // Unclipped r 1.1, A 2, sequence of 2 tokens, 2 sequences: −A·r·½ / 2 / 2 = −0.275.
    assert!((grads[0][0] + 0.275).abs() < 1e-5, "{grads:?}");
    assert_eq!(grads[0][1], 0.0, "clipped above 1 + ε");
    assert_eq!(grads[1][0], 0.0, "clipped below 1 − ε with A < 0");
    assert_eq!(grads[1][1], 0.0, "masked");
}

#[test]
fn the_kl_penalty_adds_the_k3_estimate_to_the_reference() {
    let c = case(&[&[(1.0, 0.0, true)]]);
    // The reference gives the target twice the probability: ref − logp = ln 2,
    // k3 = e^{ln 2} − ln 2 − 1 = 1 − ln 2.
    let reference = (c.old.clone() + 2f64.ln()).unwrap();
    let config = LossConfig {
        kl_beta: 0.1,
        ..LossConfig::default()
    };
    let mut inputs = c.inputs();
    inputs.ref_logprobs = Some(&reference);
    let totals = StepTotals {
        sequences: 1,
        tokens: 1,
    };
    let (loss, stats) = grpo_loss(&inputs, &config, totals).unwrap();
    let k3 = 1.0 - 2f64.ln();
    close(loss.to_scalar::<f32>().unwrap() as f64, 0.1 * k3);
    close(stats.mean_kl(), k3);
}

#[test]
fn temperature_divides_the_logits_before_the_softmax() {
    let cpu = &Device::Cpu;
    let logits = Tensor::from_vec(vec![2.0f32, 0.0], (1, 1, 2), cpu).unwrap();
    let targets = Tensor::zeros((1, 1), DType::U32, cpu).unwrap();
    let inv_t = Tensor::from_vec(vec![0.5f32], 1, cpu).unwrap();
    let lp = target_logprobs(&logits, &targets, &inv_t).unwrap();
    let expected = 1.0 - (1f64.exp() + 1.0).ln();
    close(lp.to_vec2::<f32>().unwrap()[0][0] as f64, expected);
}

#[test]
fn variants_parse_from_their_names_and_refuse_others() {
    assert_eq!("dr_grpo".parse::<Variant>(), Ok(Variant::DrGrpo));
    assert_eq!("dapo".parse::<Variant>(), Ok(Variant::Dapo));
    assert!("ppo".parse::<Variant>().is_err());
}

#[test]
fn a_ratio_taken_against_the_trainer_is_one_and_clips_nothing() {
    let config = LossConfig {
        ratio_base: RatioBase::Trainer,
        ..LossConfig::default()
    };
    let case = mixed();
    // Every ratio is 1: token losses −2, −2 | 1; sequence means −2 and 1; their mean −0.5.
    let (loss, stats) = case.loss(&config);
    close(loss, -0.5);
    close(stats.mean_ratio(), 1.0);
    close(stats.clip_fraction(), 0.0);
    // The engine's logprobs are still what alignment measures: |ln 1.1|, |ln 1.5|, |ln 0.5|.
    close(
        stats.alignment(),
        (1.1f64.ln() + 1.5f64.ln() - 0.5f64.ln()) / 3.0,
    );
    // The tokens the inference base clips (r 1.5 with A > 0, r 0.5 with A < 0) get a push here.
    let grads = case.target_grads(&config);
    assert!(
        grads[0][1] != 0.0 && grads[1][0] != 0.0,
        "every trained token is pushed: {grads:?}"
    );
    assert_eq!(grads[1][1], 0.0, "the masked token gets nothing: {grads:?}");
}
