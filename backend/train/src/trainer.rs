//! One GRPO optimizer step over a batch of rows: micro-batches, gradient accumulation, the loss,
//! AdamW. The trajectory-API loop around it lives in the server crate.

use std::time::Instant;

use candle_core::{DType, Device, Tensor};

use crate::TrainError;
use crate::loss::{LossConfig, LossInputs, LossStats, StepTotals, grpo_loss, target_logprobs};
use crate::model::{TrainLlama, TrainMode};
use crate::optim::{AdamW, OptimConfig};
use crate::rows::TrainRow;

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TrainConfig {
    pub loss: LossConfig,
    pub optim: OptimConfig,
    /// Sequences per forward/backward pass; a step accumulates gradients over as many
    /// micro-batches as its batch needs.
    pub micro_batch: usize,
}

/// What one step did, for the dashboard (`TrainerReport`) and logs.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StepReport {
    pub loss: f64,
    pub mean_ratio: f64,
    pub clip_fraction: f64,
    pub kl: f64,
    pub grad_norm: f64,
    pub lr: f64,
    /// Mean |logp_train − logp_inference| over trained tokens, before the update.
    pub logprob_alignment: f64,
    pub mean_logprob: f64,
    pub trained_tokens: usize,
    /// Every non-padding position through the model, forward and backward.
    pub tokens: usize,
    pub sequences: usize,
    pub micro_batches: usize,
    pub seconds: f64,
    pub mean_score: f64,
}

impl StepReport {
    pub fn tokens_per_second(&self) -> f64 {
        if self.seconds > 0.0 {
            self.tokens as f64 / self.seconds
        } else {
            0.0
        }
    }

    /// The values `POST /runs/{run}/trainer-metrics` takes.
    pub fn metrics(&self) -> Vec<(&'static str, f64)> {
        vec![
            ("loss", self.loss),
            ("mean_ratio", self.mean_ratio),
            ("clip_fraction", self.clip_fraction),
            ("kl", self.kl),
            ("grad_norm", self.grad_norm),
            ("lr", self.lr),
            ("logprob_alignment", self.logprob_alignment),
            ("train_logprob_mean", self.mean_logprob),
            ("tokens_per_second", self.tokens_per_second()),
            ("step_seconds", self.seconds),
            ("mean_score", self.mean_score),
        ]
    }
}

pub struct Trainer {
    pub model: TrainLlama,
    pub optimizer: AdamW,
    pub config: TrainConfig,
    /// The frozen starting weights, for the KL penalty of a full fine-tune (a LoRA run's
    /// reference is its own base, read with the adapters off).
    reference: Option<TrainLlama>,
    /// Each trainable variable's gradient norm at the last step (0 when it got none).
    last_grad_norms: Vec<f64>,
}

struct MicroBatch {
    inputs: Tensor,
    targets: Tensor,
    mask: Tensor,
    old: Tensor,
    /// 1 for rows that sent inference logprobs, 0 for rows that take the trainer's own.
    has_old: Tensor,
    advantages: Tensor,
    inv_temperature: Tensor,
    positions: usize,
    /// The first column with a trained token: logits are computed from there on, and every
    /// other tensor here starts there too.
    start: usize,
}

impl Trainer {
    pub fn new(model: TrainLlama, config: TrainConfig) -> Result<Self, TrainError> {
        if config.micro_batch == 0 {
            return Err(TrainError::Config("micro_batch must be at least 1".into()));
        }
        let reference = if config.loss.kl_beta > 0.0 && model.mode == TrainMode::Full {
            Some(TrainLlama::from_tensors(
                model.config.clone(),
                model.hf_tensors()?,
                TrainMode::Frozen,
            )?)
        } else {
            None
        };
        let optimizer = AdamW::new(model.trainable(), config.optim)?;
        let n = model.trainable().len();
        Ok(Self {
            model,
            optimizer,
            config,
            reference,
            last_grad_norms: vec![0.0; n],
        })
    }

    /// Gradient norm of each trainable variable at the last step, in [`TrainLlama::trainable`]
    /// order.
    pub fn last_grad_norms(&self) -> &[f64] {
        &self.last_grad_norms
    }

    /// One optimizer step over `rows` (the sequences of one `/batch`).
    pub fn step(&mut self, rows: &[TrainRow]) -> Result<StepReport, TrainError> {
        let started = Instant::now();
        self.check(rows)?;
        let totals = StepTotals {
            sequences: rows.len(),
            tokens: rows
                .iter()
                .map(|r| r.trained.iter().skip(1).filter(|&&t| t).count())
                .sum(),
        };
        let vars: Vec<_> = self.model.trainable().to_vec();
        let mut grads: Vec<Option<Tensor>> = vec![None; vars.len()];
        let mut stats = LossStats::default();
        let mut loss_total = 0.0;
        let mut positions = 0;
        let mut micro_batches = 0;
        for chunk in rows.chunks(self.config.micro_batch) {
            let batch = collate(chunk)?;
            let logits = self.model.forward_from(&batch.inputs, batch.start, true)?;
            let logprobs = target_logprobs(&logits, &batch.targets, &batch.inv_temperature)?;
            let own = logprobs.detach();
            let keep = batch.has_old.broadcast_as(own.shape())?;
            let old = ((&batch.old * &keep)? + (own * (1.0 - &keep)?)?)?;
            let reference = self.reference_logprobs(&batch)?;
            let inputs = LossInputs {
                logprobs: &logprobs,
                mask: &batch.mask,
                old_logprobs: &old,
                advantages: &batch.advantages,
                ref_logprobs: reference.as_ref(),
            };
            let (loss, micro_stats) = grpo_loss(&inputs, &self.config.loss, totals)?;
            loss_total += loss.to_scalar::<f32>()? as f64;
            stats.add(&micro_stats);
            let store = loss.backward()?;
            for ((_, var), slot) in vars.iter().zip(grads.iter_mut()) {
                if let Some(g) = store.get(var.as_tensor()) {
                    *slot = Some(match slot.take() {
                        Some(sum) => (sum + g)?,
                        None => g.clone(),
                    });
                }
            }
            positions += batch.positions;
            micro_batches += 1;
        }
        self.last_grad_norms = grads
            .iter()
            .map(|g| match g {
                Some(g) => Ok(g.sqr()?.sum_all()?.to_scalar::<f32>()?.sqrt() as f64),
                None => Ok(0.0),
            })
            .collect::<candle_core::Result<_>>()?;
        let update = self.optimizer.update(&vars, &grads)?;
        Ok(StepReport {
            loss: loss_total,
            mean_ratio: stats.mean_ratio(),
            clip_fraction: stats.clip_fraction(),
            kl: stats.mean_kl(),
            grad_norm: update.grad_norm,
            lr: update.lr,
            logprob_alignment: stats.alignment(),
            mean_logprob: stats.mean_logprob(),
            trained_tokens: totals.tokens,
            tokens: positions,
            sequences: rows.len(),
            micro_batches,
            seconds: started.elapsed().as_secs_f64(),
            mean_score: rows.iter().map(|r| r.score).sum::<f64>() / rows.len().max(1) as f64,
        })
    }

    fn reference_logprobs(&self, batch: &MicroBatch) -> Result<Option<Tensor>, TrainError> {
        if self.config.loss.kl_beta <= 0.0 {
            return Ok(None);
        }
        let logits = match (&self.reference, &self.model.mode) {
            (Some(reference), _) => reference.forward_from(&batch.inputs, batch.start, false)?,
            (None, TrainMode::Lora(_)) => {
                self.model.forward_from(&batch.inputs, batch.start, false)?
            }
            (None, _) => return Ok(None),
        };
        let lp = target_logprobs(&logits.detach(), &batch.targets, &batch.inv_temperature)?;
        Ok(Some(lp))
    }

    fn check(&self, rows: &[TrainRow]) -> Result<(), TrainError> {
        if rows.is_empty() {
            return Err(TrainError::Batch(
                "a step needs at least one sequence".into(),
            ));
        }
        let vocab = self.model.config.vocab_size;
        let context = self.model.config.max_position_embeddings;
        for (i, row) in rows.iter().enumerate() {
            let n = row.tokens.len();
            if n < 2 || n > context + 1 {
                return Err(TrainError::Batch(format!(
                    "sequence {i} has {n} tokens; the model trains on 2 to {} per sequence",
                    context + 1
                )));
            }
            if row.trained.len() != n || row.advantages.len() != n {
                return Err(TrainError::Batch(format!("sequence {i}: ragged row")));
            }
            if let Some(&bad) = row.tokens.iter().find(|&&t| t as usize >= vocab) {
                return Err(TrainError::Batch(format!(
                    "sequence {i}: token {bad} is outside the vocabulary of {vocab}"
                )));
            }
        }
        Ok(())
    }
}

/// Right-padded tensors for `rows`: position t of a row predicts its token t + 1.
fn collate(rows: &[TrainRow]) -> Result<MicroBatch, TrainError> {
    let width = rows.iter().map(|r| r.tokens.len() - 1).max().unwrap_or(1);
    let b = rows.len();
    let mut inputs = vec![0u32; b * width];
    let mut targets = vec![0u32; b * width];
    let mut mask = vec![0f32; b * width];
    let mut old = vec![0f32; b * width];
    let mut has_old = vec![0f32; b];
    let mut advantages = vec![0f32; b * width];
    let mut inv_t = vec![1f32; b];
    let mut positions = 0;
    for (i, row) in rows.iter().enumerate() {
        let n = row.tokens.len() - 1;
        positions += n;
        let at = i * width;
        inputs[at..at + n].copy_from_slice(&row.tokens[..n]);
        targets[at..at + n].copy_from_slice(&row.tokens[1..]);
        for t in 0..n {
            mask[at + t] = if row.trained[t + 1] { 1.0 } else { 0.0 };
            advantages[at + t] = row.advantages[t + 1];
        }
        if let Some(lp) = &row.inference_logprobs {
            old[at..at + n].copy_from_slice(&lp[1..]);
            has_old[i] = 1.0;
        }
        inv_t[i] = 1.0 / row.temperature;
    }
    let start = (0..width)
        .find(|&t| (0..b).any(|i| mask[i * width + t] > 0.0))
        .unwrap_or(0);
    let cpu = &Device::Cpu;
    let window = |t: Tensor| -> candle_core::Result<Tensor> {
        t.narrow(1, start, width - start)?.contiguous()
    };
    let grid = |v: Vec<f32>| window(Tensor::from_vec(v, (b, width), cpu)?);
    Ok(MicroBatch {
        inputs: Tensor::from_vec(inputs, (b, width), cpu)?,
        targets: window(Tensor::from_vec(targets, (b, width), cpu)?)?,
        mask: grid(mask)?,
        old: grid(old)?,
        has_old: Tensor::from_vec(has_old, (b, 1), cpu)?.to_dtype(DType::F32)?,
        advantages: grid(advantages)?,
        inv_temperature: Tensor::from_vec(inv_t, b, cpu)?,
        positions,
        start,
    })
}
