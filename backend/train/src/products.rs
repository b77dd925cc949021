//! `x · wᵀ` for the projections that train, as custom ops whose products go through OpenBLAS
//! when the system has it (`lachesis_native::blas`; AVX-512 kernels against the AVX2 ones of
//! candle's `gemm` on stable Rust) and through candle otherwise.
//!
//! A frozen weight ([`frozen`]) also needs its own op because candle's matmul backward computes
//! the gradients of both operands, even for a plain tensor: the weight-sized gradient would be
//! allocated and dropped. Returning only dL/dx is what LoRA needs from the base layer; at SmolLM2
//! size that takes a LoRA step's peak memory from 5.2 GB to 3.3 GB.

use candle_core::{CpuStorage, CustomOp1, Layout, Result, Shape, Tensor};
use lachesis_native::blas::{Blas, Orientation};

use crate::fused::binary::{self, BinaryKernel};
use crate::fused::{slice, with_slice};

/// `x · wᵀ` (x: … × in, w: out × in), differentiable in `x` only.
pub fn frozen(x: &Tensor, w: &Tensor) -> Result<Tensor> {
    x.contiguous()?.apply_op1(Frozen { weight: w.clone() })
}

/// `x · wᵀ`, differentiable in both (a full fine-tune's weights, LoRA's A and B).
pub fn trainable(x: &Tensor, w: &Tensor) -> Result<Tensor> {
    binary::apply(x, w, Trainable)
}

struct Frozen {
    weight: Tensor,
}

impl CustomOp1 for Frozen {
    fn name(&self) -> &'static str {
        "frozen-matmul"
    }

    fn cpu_fwd(&self, storage: &CpuStorage, layout: &Layout) -> Result<(CpuStorage, Shape)> {
        let x = slice(storage, layout, self.name())?;
        let (y, shape) = with_slice(&self.weight, self.name(), |w| {
            times_transposed(x, layout.shape(), w, self.weight.dims2()?)
        })??;
        Ok((CpuStorage::F32(y), shape))
    }

    fn bwd(&self, _arg: &Tensor, _res: &Tensor, grad_res: &Tensor) -> Result<Option<Tensor>> {
        let input = grad_res
            .contiguous()?
            .apply_op1_no_bwd(&FrozenInputGradient {
                weight: self.weight.clone(),
            })?;
        Ok(Some(input))
    }
}

/// `g · w`: the input gradient of [`Frozen`], never itself differentiated.
struct FrozenInputGradient {
    weight: Tensor,
}

impl CustomOp1 for FrozenInputGradient {
    fn name(&self) -> &'static str {
        "frozen-matmul-input-gradient"
    }

    fn cpu_fwd(&self, storage: &CpuStorage, layout: &Layout) -> Result<(CpuStorage, Shape)> {
        let g = slice(storage, layout, self.name())?;
        with_slice(&self.weight, self.name(), |w| {
            times(g, layout.shape(), w, self.weight.dims2()?)
        })?
    }
}

struct Trainable;

impl BinaryKernel for Trainable {
    const NAME: &'static str = "trainable-matmul";

    fn forward(
        &self,
        (x, x_shape): (&[f32], &Shape),
        (w, w_shape): (&[f32], &Shape),
    ) -> Result<(Vec<f32>, Shape)> {
        times_transposed(x, x_shape, w, w_shape.dims2()?)
    }

    /// dx = g · w; dw = gᵀ · x over every row of the batch.
    fn backward(
        &self,
        (x, _): (&[f32], &Shape),
        (w, w_shape): (&[f32], &Shape),
        g: &[f32],
    ) -> Result<(Vec<f32>, Vec<f32>)> {
        let (out_dim, in_dim) = w_shape.dims2()?;
        let rows = x.len() / in_dim.max(1);
        let dx = product(
            (g, Orientation::AsStored),
            (w, Orientation::AsStored),
            (rows, in_dim, out_dim),
        )?;
        let dw = product(
            (g, Orientation::Transposed),
            (x, Orientation::AsStored),
            (out_dim, in_dim, rows),
        )?;
        Ok((dx, dw))
    }
}

/// `x · wᵀ` for x (… × in) and w (out × in): the answer is (… × out).
fn times_transposed(
    x: &[f32],
    x_shape: &Shape,
    w: &[f32],
    (out_dim, in_dim): (usize, usize),
) -> Result<(Vec<f32>, Shape)> {
    let shape = last_dim(x_shape, in_dim, out_dim)?;
    let rows = x.len() / in_dim.max(1);
    let y = product(
        (x, Orientation::AsStored),
        (w, Orientation::Transposed),
        (rows, out_dim, in_dim),
    )?;
    Ok((y, shape))
}

/// `g · w` for g (… × out) and w (out × in): the answer is (… × in).
fn times(
    g: &[f32],
    g_shape: &Shape,
    w: &[f32],
    (out_dim, in_dim): (usize, usize),
) -> Result<(CpuStorage, Shape)> {
    let shape = last_dim(g_shape, out_dim, in_dim)?;
    let rows = g.len() / out_dim.max(1);
    let y = product(
        (g, Orientation::AsStored),
        (w, Orientation::AsStored),
        (rows, in_dim, out_dim),
    )?;
    Ok((CpuStorage::F32(y), shape))
}

/// `shape` with its last dimension, which must be `from`, replaced by `to`.
fn last_dim(shape: &Shape, from: usize, to: usize) -> Result<Shape> {
    let mut dims = shape.dims().to_vec();
    match dims.last_mut() {
        Some(last) if *last == from => *last = to,
        _ => candle_core::bail!("matmul: operand {dims:?} against a dimension of {from}"),
    }
    Ok(Shape::from(dims))
}

/// `op(a) · op(b)`, (m × k)·(k × n), through OpenBLAS or, without it, candle's own matmul.
fn product(
    (a, a_is): (&[f32], Orientation),
    (b, b_is): (&[f32], Orientation),
    (m, n, k): (usize, usize, usize),
) -> Result<Vec<f32>> {
    if let Some(blas) = Blas::get() {
        let mut c = vec![0.0; m * n];
        blas.sgemm((a, a_is), (b, b_is), &mut c, (m, n, k))
            .map_err(|e| candle_core::Error::Msg(e.to_string()))?;
        return Ok(c);
    }
    let cpu = &candle_core::Device::Cpu;
    let operand = |data: &[f32], is: Orientation, (rows, cols): (usize, usize)| match is {
        Orientation::AsStored => Tensor::from_slice(data, (rows, cols), cpu),
        Orientation::Transposed => Tensor::from_slice(data, (cols, rows), cpu)?.t(),
    };
    operand(a, a_is, (m, k))?
        .matmul(&operand(b, b_is, (k, n))?)?
        .flatten_all()?
        .to_vec1()
}

#[cfg(test)]
mod tests {
    use candle_core::{Device, Var};

    use super::*;

    fn wave(n: usize, step: f32) -> Vec<f32> {
        (0..n).map(|i| (i as f32 * step).sin()).collect()
    }

    fn max_diff(a: &Tensor, b: &Tensor) -> f32 {
        let d = (a - b).and_then(|d| d.abs()).and_then(|d| d.flatten_all());
        d.and_then(|d| d.max(0))
            .and_then(|d| d.to_scalar::<f32>())
            .unwrap()
    }

    #[test]
    fn a_trainable_product_and_its_gradients_equal_candles_matmul() {
        let cpu = &Device::Cpu;
        let x = Var::from_vec(wave(2 * 3 * 5, 0.7), (2, 3, 5), cpu).unwrap();
        let w = Var::from_vec(wave(4 * 5, 0.3), (4, 5), cpu).unwrap();
        let upstream = Tensor::from_vec(wave(2 * 3 * 4, 1.1), (2, 3, 4), cpu).unwrap();
        let ours = trainable(x.as_tensor(), w.as_tensor()).unwrap();
        let reference = x
            .as_tensor()
            .broadcast_matmul(&w.as_tensor().t().unwrap())
            .unwrap();
        assert_eq!(ours.dims(), &[2, 3, 4]);
        assert!(max_diff(&ours, &reference) < 1e-5);
        let weighted = |t: &Tensor| {
            (t * &upstream)
                .unwrap()
                .sum_all()
                .unwrap()
                .backward()
                .unwrap()
        };
        let (g_ours, g_ref) = (weighted(&ours), weighted(&reference));
        for var in [&x, &w] {
            let (a, b) = (
                g_ours.get(var.as_tensor()).unwrap(),
                g_ref.get(var.as_tensor()).unwrap(),
            );
            assert!(
                max_diff(a, b) < 1e-5,
                "gradient differs by {}",
                max_diff(a, b)
            );
        }
    }

    #[test]
    fn a_frozen_product_refuses_an_input_of_the_wrong_width() {
        let cpu = &Device::Cpu;
        let x = Tensor::zeros((3, 4), candle_core::DType::F32, cpu).unwrap();
        let w = Tensor::zeros((2, 5), candle_core::DType::F32, cpu).unwrap();
        let err = frozen(&x, &w).unwrap_err();
        assert!(
            err.to_string().contains("against a dimension of 5"),
            "{err}"
        );
    }
}
