//! RMSNorm, `x / sqrt(mean(x²) + eps) · w` over the last dimension, fused with its backward.

use candle_core::{Result, Shape, Tensor};
use rayon::prelude::*;

use super::binary::{self, BinaryKernel};

/// RMSNorm of each row of `x` (… × h), scaled by `weight` (h); differentiable in both.
pub fn rms_norm(x: &Tensor, weight: &Tensor, eps: f64) -> Result<Tensor> {
    let hidden = x.dim(candle_core::D::Minus1)?;
    if weight.dims() != [hidden] {
        candle_core::bail!("rms-norm: weight {:?} for rows of {hidden}", weight.dims());
    }
    binary::apply(x, weight, RmsNorm { eps: eps as f32 })
}

struct RmsNorm {
    eps: f32,
}

impl RmsNorm {
    fn inverse_rms(&self, row: &[f32]) -> f32 {
        let mean_square = row.iter().map(|v| v * v).sum::<f32>() / row.len().max(1) as f32;
        1.0 / (mean_square + self.eps).sqrt()
    }
}

impl BinaryKernel for RmsNorm {
    const NAME: &'static str = "rms-norm";

    fn forward(
        &self,
        (x, shape): (&[f32], &Shape),
        (w, _): (&[f32], &Shape),
    ) -> Result<(Vec<f32>, Shape)> {
        let mut out = vec![0.0f32; x.len()];
        out.par_chunks_mut(w.len())
            .zip(x.par_chunks(w.len()))
            .for_each(|(y, row)| {
                let r = self.inverse_rms(row);
                for ((yi, &xi), &wi) in y.iter_mut().zip(row).zip(w) {
                    *yi = xi * r * wi;
                }
            });
        Ok((out, shape.clone()))
    }

    /// With x̂ = x·r and u = dy·w: dx = r·(u − x̂·mean(u·x̂)), dw = Σ_rows dy·x̂.
    fn backward(
        &self,
        (x, _): (&[f32], &Shape),
        (w, _): (&[f32], &Shape),
        dy: &[f32],
    ) -> Result<(Vec<f32>, Vec<f32>)> {
        let hidden = w.len();
        let mut dx = vec![0.0f32; x.len()];
        let dw = dx
            .par_chunks_mut(hidden)
            .zip(x.par_chunks(hidden).zip(dy.par_chunks(hidden)))
            .fold(
                || vec![0.0f32; hidden],
                |mut dw, (dx, (row, dy))| {
                    let r = self.inverse_rms(row);
                    let mut dot = 0.0f32;
                    for ((&xi, &gi), &wi) in row.iter().zip(dy).zip(w) {
                        dot += gi * wi * xi * r;
                    }
                    let mean = dot / hidden as f32;
                    for (i, ((dxi, &xi), &gi)) in dx.iter_mut().zip(row).zip(dy).enumerate() {
                        let x_hat = xi * r;
                        *dxi = r * (gi * w[i] - x_hat * mean);
                        dw[i] += gi * x_hat;
                    }
                    dw
                },
            )
            .reduce(
                || vec![0.0f32; hidden],
                |mut a, b| {
                    a.iter_mut().zip(b).for_each(|(a, b)| *a += b);
                    a
                },
            );
        Ok((dx, dw))
    }
}

#[cfg(test)]
mod tests {
    use candle_core::{D, Device, Var};

    use super::super::{assert_same_op, wave};
    use super::*;

    fn composed(x: &Tensor, w: &Tensor, eps: f64) -> Tensor {
        let mean_square = x.sqr().unwrap().mean_keepdim(D::Minus1).unwrap();
        x.broadcast_div(&(mean_square + eps).unwrap().sqrt().unwrap())
            .unwrap()
            .broadcast_mul(w)
            .unwrap()
    }

    #[test]
    fn values_and_both_gradients_equal_the_composed_norm() {
        let cpu = &Device::Cpu;
        let x = Var::from_vec(wave(6 * 10, 0.37, 2.0), (2, 3, 10), cpu).unwrap();
        let w = Var::from_vec(wave(10, 1.3, 1.0), 10, cpu).unwrap();
        let upstream = Tensor::from_vec(wave(60, 0.91, 1.5), (2, 3, 10), cpu).unwrap();
        let fused = rms_norm(x.as_tensor(), w.as_tensor(), 1e-5).unwrap();
        let reference = composed(x.as_tensor(), w.as_tensor(), 1e-5);
        assert_same_op((&fused, &reference), &upstream, &[&x, &w], (1e-5, 1e-4));
    }

    #[test]
    fn a_weight_of_the_wrong_width_is_an_error() {
        let cpu = &Device::Cpu;
        let x = Tensor::zeros((2, 4), candle_core::DType::F32, cpu).unwrap();
        let w = Tensor::ones(3, candle_core::DType::F32, cpu).unwrap();
        assert!(rms_norm(&x, &w, 1e-5).is_err());
    }
}
