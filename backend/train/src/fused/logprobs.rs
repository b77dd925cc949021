//! The trained policy's logprob of each target, fused.
//!
//! The largest of the fused kernels: a SmolLM2 micro-batch's logits are 16 × 64 × 49,152
//! floats (200 MB), and `log_softmax` then `gather`, with their backward, read and write them a
//! dozen times. Fused, the forward reads them twice and the backward writes the gradient once.

use candle_core::{CpuStorage, CustomOp1, Layout, Result, Shape, Tensor};

use super::{slice, with_slice};
use rayon::prelude::*;

/// The log-probability of each target under `logits · inv_temperature` (per sequence), as
/// (batch × positions), differentiable in `logits`.
pub fn target_logprobs(
    logits: &Tensor,
    targets: &Tensor,
    inv_temperature: &Tensor,
) -> Result<Tensor> {
    let (batch, positions, vocab) = logits.dims3()?;
    let targets: Vec<u32> = targets.flatten_all()?.to_vec1()?;
    let inv_temperature: Vec<f32> = inv_temperature.flatten_all()?.to_vec1()?;
    if targets.len() != batch * positions || inv_temperature.len() != batch {
        candle_core::bail!(
            "target-logprobs: {} targets and {} temperatures for {batch} × {positions} logits",
            targets.len(),
            inv_temperature.len()
        );
    }
    if let Some(t) = targets.iter().find(|&&t| t as usize >= vocab) {
        candle_core::bail!("target-logprobs: target {t} outside a vocabulary of {vocab}");
    }
    logits.contiguous()?.apply_op1(TargetLogprobs {
        targets,
        inv_temperature,
        positions,
    })
}

struct TargetLogprobs {
    targets: Vec<u32>,
    /// One per sequence; row r of the logits belongs to sequence r / positions.
    inv_temperature: Vec<f32>,
    positions: usize,
}

impl TargetLogprobs {
    fn row_scale(&self, row: usize) -> f32 {
        self.inv_temperature[row / self.positions.max(1)]
    }
}

/// `ln Σ exp(x·t)`, from the row's maximum so that no exponential overflows.
fn log_sum_exp(row: &[f32], t: f32) -> f32 {
    let max = row.iter().fold(f32::NEG_INFINITY, |m, &x| m.max(x * t));
    let sum: f32 = row.iter().map(|&x| (x * t - max).exp()).sum();
    max + sum.ln()
}

impl CustomOp1 for TargetLogprobs {
    fn name(&self) -> &'static str {
        "target-logprobs"
    }

    fn cpu_fwd(&self, storage: &CpuStorage, layout: &Layout) -> Result<(CpuStorage, Shape)> {
        let logits = slice(storage, layout, self.name())?;
        let dims = layout.shape().dims();
        let vocab = dims[dims.len() - 1];
        let out: Vec<f32> = logits
            .par_chunks(vocab)
            .enumerate()
            .map(|(row, x)| {
                let t = self.row_scale(row);
                x[self.targets[row] as usize] * t - log_sum_exp(x, t)
            })
            .collect();
        Ok((CpuStorage::F32(out), Shape::from(&dims[..dims.len() - 1])))
    }

    /// d logp / d x_j = t · (δ_j,target − softmax(x·t)_j), times the incoming gradient. The
    /// row's log-normaliser is read back from the answer: lse = x_target·t − logp.
    fn bwd(&self, arg: &Tensor, res: &Tensor, grad_res: &Tensor) -> Result<Option<Tensor>> {
        let logp: Vec<f32> = res.flatten_all()?.to_vec1()?;
        let upstream: Vec<f32> = grad_res.flatten_all()?.to_vec1()?;
        let vocab = arg.dim(candle_core::D::Minus1)?;
        let grad = with_slice(arg, self.name(), |logits| {
            let mut grad = vec![0.0f32; logits.len()];
            grad.par_chunks_mut(vocab)
                .zip(logits.par_chunks(vocab))
                .enumerate()
                .for_each(|(row, (g, x))| {
                    let t = self.row_scale(row);
                    let target = self.targets[row] as usize;
                    let lse = x[target] * t - logp[row];
                    let scale = upstream[row] * t;
                    if scale == 0.0 {
                        return;
                    }
                    for (gj, &xj) in g.iter_mut().zip(x) {
                        *gj = -scale * (xj * t - lse).exp();
                    }
                    g[target] += scale;
                });
            grad
        })?;
        Ok(Some(Tensor::from_vec(grad, arg.shape(), arg.device())?))
    }
}

#[cfg(test)]
mod tests {
    use candle_core::{D, Device, Var};

    use super::super::{assert_same_op, wave};
    use super::*;

    /// candle's composed ops, the reference: scale, log-softmax, gather.
    fn composed(logits: &Tensor, targets: &Tensor, inv_t: &Tensor) -> Tensor {
        let scaled = logits
            .broadcast_mul(&inv_t.reshape(((), 1, 1)).unwrap())
            .unwrap();
        candle_nn::ops::log_softmax(&scaled, D::Minus1)
            .unwrap()
            .gather(&targets.unsqueeze(2).unwrap().contiguous().unwrap(), 2)
            .unwrap()
            .squeeze(2)
            .unwrap()
    }

    #[test]
    fn values_and_gradients_equal_log_softmax_then_gather() {
        let cpu = &Device::Cpu;
        let (batch, positions, vocab) = (3, 5, 37);
        let data = wave(batch * positions * vocab, 0.731, 6.0);
        let logits = Var::from_vec(data, (batch, positions, vocab), cpu).unwrap();
        let targets: Vec<u32> = (0..batch * positions)
            .map(|i| (i * 7 % vocab) as u32)
            .collect();
        let targets = Tensor::from_vec(targets, (batch, positions), cpu).unwrap();
        let inv_t = Tensor::new(&[1.0f32, 1.25, 0.5], cpu).unwrap();
        // Different weights per position, so the gradient's upstream factor is not uniform.
        let weights: Vec<f32> = (0..batch * positions).map(|i| i as f32 - 6.0).collect();
        let weights = Tensor::from_vec(weights, (batch, positions), cpu).unwrap();

        let fused = target_logprobs(logits.as_tensor(), &targets, &inv_t).unwrap();
        let reference = composed(logits.as_tensor(), &targets, &inv_t);
        assert_same_op((&fused, &reference), &weights, &[&logits], (1e-5, 1e-5));
    }

    #[test]
    fn a_target_outside_the_vocabulary_is_an_error_not_a_panic() {
        let cpu = &Device::Cpu;
        let logits = Tensor::zeros((1, 2, 4), candle_core::DType::F32, cpu).unwrap();
        let targets = Tensor::new(&[[1u32, 4]], cpu).unwrap();
        let inv_t = Tensor::new(&[1.0f32], cpu).unwrap();
        let err = target_logprobs(&logits, &targets, &inv_t).unwrap_err();
        assert!(
            err.to_string().contains("outside a vocabulary of 4"),
            "{err}"
        );
    }
}
