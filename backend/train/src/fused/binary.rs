//! The one place where a two-operand kernel written on `f32` slices meets candle's `CustomOp2`:
//! reading CPU storage, insisting on contiguity, and wrapping the gradients back into tensors.
//! Each kernel then says only what it computes.

use candle_core::{CpuStorage, CustomOp2, Layout, Result, Shape, Tensor};

use super::{slice, with_slice};

/// A CPU op of two `f32` operands, differentiable in both.
pub(crate) trait BinaryKernel: Send + Sync + 'static {
    /// The op's name in candle's errors and traces.
    const NAME: &'static str;

    /// The result's elements and shape, from both operands' elements (contiguous) and shapes.
    fn forward(&self, a: (&[f32], &Shape), b: (&[f32], &Shape)) -> Result<(Vec<f32>, Shape)>;

    /// The gradients of both operands, as many elements as each has, from the operands and the
    /// gradient `dy` of the result.
    fn backward(
        &self,
        a: (&[f32], &Shape),
        b: (&[f32], &Shape),
        dy: &[f32],
    ) -> Result<(Vec<f32>, Vec<f32>)>;
}

/// Applies `kernel` to `a` and `b` (made contiguous first) with its own backward pass.
pub(crate) fn apply<K: BinaryKernel>(a: &Tensor, b: &Tensor, kernel: K) -> Result<Tensor> {
    a.contiguous()?.apply_op2(&b.contiguous()?, Binary(kernel))
}

struct Binary<K>(K);

impl<K: BinaryKernel> CustomOp2 for Binary<K> {
    fn name(&self) -> &'static str {
        K::NAME
    }

    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        let a = (slice(s1, l1, K::NAME)?, l1.shape());
        let b = (slice(s2, l2, K::NAME)?, l2.shape());
        let (y, shape) = self.0.forward(a, b)?;
        Ok((CpuStorage::F32(y), shape))
    }

    fn bwd(
        &self,
        a: &Tensor,
        b: &Tensor,
        _res: &Tensor,
        grad_res: &Tensor,
    ) -> Result<(Option<Tensor>, Option<Tensor>)> {
        let (da, db) = with_slice(a, K::NAME, |a_values| {
            with_slice(b, K::NAME, |b_values| {
                with_slice(grad_res, K::NAME, |dy| {
                    self.0
                        .backward((a_values, a.shape()), (b_values, b.shape()), dy)
                })
            })
        })????;
        Ok((
            Some(Tensor::from_vec(da, a.shape(), a.device())?),
            Some(Tensor::from_vec(db, b.shape(), b.device())?),
        ))
    }
}
