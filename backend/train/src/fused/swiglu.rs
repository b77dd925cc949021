//! SwiGLU's gate, `silu(gate) · up`, fused with its backward.

use candle_core::{Result, Shape, Tensor};
use rayon::prelude::*;

use super::binary::{self, BinaryKernel};

/// Rows processed per parallel task: large enough to amortise the task, small enough to share
/// a SmolLM2 micro-batch's MLP (16 × 128 × 1536) between two cores.
const CHUNK: usize = 16 * 1024;

/// `silu(gate) · up`, elementwise over two tensors of one shape; differentiable in both.
pub fn swiglu(gate: &Tensor, up: &Tensor) -> Result<Tensor> {
    if gate.dims() != up.dims() {
        candle_core::bail!("swiglu: gate {:?} and up {:?}", gate.dims(), up.dims());
    }
    binary::apply(gate, up, SwiGlu)
}

struct SwiGlu;

fn sigmoid(x: f32) -> f32 {
    1.0 / (1.0 + (-x).exp())
}

impl BinaryKernel for SwiGlu {
    const NAME: &'static str = "swiglu";

    fn forward(
        &self,
        (gate, shape): (&[f32], &Shape),
        (up, _): (&[f32], &Shape),
    ) -> Result<(Vec<f32>, Shape)> {
        let mut out = vec![0.0f32; gate.len()];
        out.par_chunks_mut(CHUNK)
            .zip(gate.par_chunks(CHUNK).zip(up.par_chunks(CHUNK)))
            .for_each(|(y, (g, u))| {
                for ((yi, &gi), &ui) in y.iter_mut().zip(g).zip(u) {
                    *yi = gi * sigmoid(gi) * ui;
                }
            });
        Ok((out, shape.clone()))
    }

    /// With σ = sigmoid(g): d/dg = dy·u·σ·(1 + g·(1 − σ)), d/du = dy·g·σ.
    fn backward(
        &self,
        (gate, _): (&[f32], &Shape),
        (up, _): (&[f32], &Shape),
        dy: &[f32],
    ) -> Result<(Vec<f32>, Vec<f32>)> {
        let mut d_gate = vec![0.0f32; gate.len()];
        let mut d_up = vec![0.0f32; gate.len()];
        d_gate
            .par_chunks_mut(CHUNK)
            .zip(d_up.par_chunks_mut(CHUNK))
            .zip(gate.par_chunks(CHUNK).zip(up.par_chunks(CHUNK)))
            .zip(dy.par_chunks(CHUNK))
            .for_each(|(((dg, du), (g, u)), dy)| {
                for i in 0..g.len() {
                    let s = sigmoid(g[i]);
                    dg[i] = dy[i] * u[i] * s * (1.0 + g[i] * (1.0 - s));
                    du[i] = dy[i] * g[i] * s;
                }
            });
        Ok((d_gate, d_up))
    }
}

#[cfg(test)]
mod tests {
    use candle_core::{Device, Var};

    use super::super::{assert_same_op, wave};
    use super::*;

    #[test]
    fn values_and_both_gradients_equal_silu_times_up() {
        let cpu = &Device::Cpu;
        let n = 3 * CHUNK + 17;
        let gate = Var::from_vec(wave(n, 0.013, 6.0), (1, n), cpu).unwrap();
        let up = Var::from_vec(wave(n, 0.029, 2.0), (1, n), cpu).unwrap();
        let upstream = Tensor::from_vec(wave(n, 0.007, 1.0), (1, n), cpu).unwrap();
        let fused = swiglu(gate.as_tensor(), up.as_tensor()).unwrap();
        let reference = (candle_nn::ops::silu(gate.as_tensor()).unwrap() * up.as_tensor()).unwrap();
        assert_same_op((&fused, &reference), &upstream, &[&gate, &up], (1e-5, 1e-5));
    }

    #[test]
    fn operands_of_different_shapes_are_an_error() {
        let cpu = &Device::Cpu;
        let a = Tensor::zeros((2, 4), candle_core::DType::F32, cpu).unwrap();
        let b = Tensor::zeros((4, 2), candle_core::DType::F32, cpu).unwrap();
        assert!(swiglu(&a, &b).is_err());
    }
}
