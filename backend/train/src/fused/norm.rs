//! RMSNorm, `x / sqrt(mean(x²) + eps) · w` over the last dimension, fused with its backward.

use candle_core::{CpuStorage, CustomOp2, Layout, Result, Shape, Tensor};
use rayon::prelude::*;

use super::{slice, values, with_slice};

/// RMSNorm of each row of `x` (… × h), scaled by `weight` (h); differentiable in both.
pub fn rms_norm(x: &Tensor, weight: &Tensor, eps: f64) -> Result<Tensor> {
    let hidden = x.dim(candle_core::D::Minus1)?;
    if weight.dims() != [hidden] {
        candle_core::bail!("rms-norm: weight {:?} for rows of {hidden}", weight.dims());
    }
    x.contiguous()?
        .apply_op2(&weight.contiguous()?, RmsNorm { eps: eps as f32 })
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

impl CustomOp2 for RmsNorm {
    fn name(&self) -> &'static str {
        "rms-norm"
    }

    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        let x = slice(s1, l1, self.name())?;
        let w = slice(s2, l2, self.name())?;
        let mut out = vec![0.0f32; x.len()];
        out.par_chunks_mut(w.len())
            .zip(x.par_chunks(w.len()))
            .for_each(|(y, row)| {
                let r = self.inverse_rms(row);
                for ((yi, &xi), &wi) in y.iter_mut().zip(row).zip(w) {
                    *yi = xi * r * wi;
                }
            });
        Ok((CpuStorage::F32(out), l1.shape().clone()))
    }

    /// With x̂ = x·r and u = dy·w: dx = r·(u − x̂·mean(u·x̂)), dw = Σ_rows dy·x̂.
    fn bwd(
        &self,
        x: &Tensor,
        weight: &Tensor,
        _res: &Tensor,
        grad_res: &Tensor,
    ) -> Result<(Option<Tensor>, Option<Tensor>)> {
        let w = values(weight)?;
        let dy = grad_res.contiguous()?;
        let hidden = w.len();
        let (dx, dw) = with_slice(x, self.name(), |x| {
            with_slice(&dy, self.name(), |dy| {
                let mut dx = vec![0.0f32; x.len()];
                let dw = dx
                    .par_chunks_mut(hidden)
                    .zip(x.par_chunks(hidden).zip(dy.par_chunks(hidden)))
                    .fold(
                        || vec![0.0f32; hidden],
                        |mut dw, (dx, (row, dy))| {
                            let r = self.inverse_rms(row);
                            let mut dot = 0.0f32;
                            for ((&xi, &gi), &wi) in row.iter().zip(dy).zip(&w) {
                                dot += gi * wi * xi * r;
                            }
                            let mean = dot / hidden as f32;
                            for (i, ((dxi, &xi), &gi)) in dx.iter_mut().zip(row).zip(dy).enumerate()
                            {
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
                (dx, dw)
            })
        })??;
        Ok((
            Some(Tensor::from_vec(dx, x.shape(), x.device())?),
            Some(Tensor::from_vec(dw, weight.shape(), weight.device())?),
        ))
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
