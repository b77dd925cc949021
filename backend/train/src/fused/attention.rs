//! Causal attention weights: `softmax(scores · scale)` over each query's keys up to its own
//! position, fused with its backward (candle's own softmax kernel has none).

use candle_core::{CpuStorage, CustomOp1, Layout, Result, Shape, Tensor};
use rayon::prelude::*;

use super::{slice, with_slice};

/// Attention weights from raw scores (… × rows × seq), rows a multiple of seq (the queries of
/// several heads sharing one key/value head, stacked): row r is the query at position
/// i = r mod seq, a softmax over columns 0..=i of `scores · scale`, and 0 after.
/// Differentiable in `scores`.
pub fn causal_softmax(scores: &Tensor, scale: f64) -> Result<Tensor> {
    let dims = scores.dims();
    let square = dims.len() >= 2 && {
        let (rows, seq) = (dims[dims.len() - 2], dims[dims.len() - 1]);
        seq > 0 && rows.is_multiple_of(seq)
    };
    if !square {
        candle_core::bail!("causal-softmax: scores {dims:?} do not stack whole seq × seq blocks");
    }
    scores.contiguous()?.apply_op1(CausalSoftmax {
        scale: scale as f32,
    })
}

struct CausalSoftmax {
    scale: f32,
}

impl CustomOp1 for CausalSoftmax {
    fn name(&self) -> &'static str {
        "causal-softmax"
    }

    fn cpu_fwd(&self, storage: &CpuStorage, layout: &Layout) -> Result<(CpuStorage, Shape)> {
        let scores = slice(storage, layout, self.name())?;
        let seq = layout.shape().dims()[layout.shape().rank() - 1];
        let mut out = vec![0.0f32; scores.len()];
        // One task per seq × seq block, whose row i is the query at position i.
        out.par_chunks_mut(seq * seq)
            .zip(scores.par_chunks(seq * seq))
            .for_each(|(y, s)| {
                for i in 0..seq {
                    let row = &s[i * seq..i * seq + i + 1];
                    let out = &mut y[i * seq..i * seq + i + 1];
                    let max = row.iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v));
                    let mut sum = 0.0f32;
                    for (o, &v) in out.iter_mut().zip(row) {
                        *o = ((v - max) * self.scale).exp();
                        sum += *o;
                    }
                    out.iter_mut().for_each(|o| *o /= sum);
                }
            });
        Ok((CpuStorage::F32(out), layout.shape().clone()))
    }

    /// ds_j = scale · y_j · (dy_j − Σ_k dy_k·y_k), over the row's visible columns.
    fn bwd(&self, arg: &Tensor, res: &Tensor, grad_res: &Tensor) -> Result<Option<Tensor>> {
        let seq = arg.dim(candle_core::D::Minus1)?;
        let dy = grad_res.contiguous()?;
        let grad = with_slice(res, self.name(), |y| {
            with_slice(&dy, self.name(), |dy| {
                let mut grad = vec![0.0f32; y.len()];
                grad.par_chunks_mut(seq * seq)
                    .zip(y.par_chunks(seq * seq).zip(dy.par_chunks(seq * seq)))
                    .for_each(|(g, (y, dy))| {
                        for i in 0..seq {
                            let span = i * seq..i * seq + i + 1;
                            let (y, dy) = (&y[span.clone()], &dy[span.clone()]);
                            let dot: f32 = y.iter().zip(dy).map(|(a, b)| a * b).sum();
                            for ((gj, &yj), &dj) in g[span].iter_mut().zip(y).zip(dy) {
                                *gj = self.scale * yj * (dj - dot);
                            }
                        }
                    });
                grad
            })
        })??;
        Ok(Some(Tensor::from_vec(grad, arg.shape(), arg.device())?))
    }
}

#[cfg(test)]
mod tests {
    use candle_core::{D, Device, Var};

    use super::super::{assert_same_op, wave};
    use super::*;

    /// The composed reference: scale, add the −∞ mask above the diagonal, softmax.
    fn composed(scores: &Tensor, scale: f64, seq: usize) -> Tensor {
        let mask: Vec<f32> = (0..seq)
            .flat_map(|i| (0..seq).map(move |j| if j <= i { 0.0 } else { f32::NEG_INFINITY }))
            .collect();
        let mask = Tensor::from_vec(mask, (seq, seq), &Device::Cpu).unwrap();
        candle_nn::ops::softmax(
            &(scores * scale).unwrap().broadcast_add(&mask).unwrap(),
            D::Minus1,
        )
        .unwrap()
    }

    #[test]
    fn values_and_gradients_equal_the_masked_softmax() {
        let cpu = &Device::Cpu;
        let (b, h, seq) = (2, 3, 7);
        let scores =
            Var::from_vec(wave(b * h * seq * seq, 0.77, 5.0), (b, h, seq, seq), cpu).unwrap();
        let upstream =
            Tensor::from_vec(wave(b * h * seq * seq, 0.31, 1.0), (b, h, seq, seq), cpu).unwrap();
        let fused = causal_softmax(scores.as_tensor(), 0.125).unwrap();
        let reference = composed(scores.as_tensor(), 0.125, seq);
        assert_same_op((&fused, &reference), &upstream, &[&scores], (1e-6, 1e-6));
    }

    #[test]
    fn stacked_query_heads_take_their_positions_within_each_block() {
        let cpu = &Device::Cpu;
        let (kv, group, seq) = (2, 3, 5);
        let n = kv * group * seq * seq;
        let stacked = Var::from_vec(wave(n, 0.53, 4.0), (1, kv, group * seq, seq), cpu).unwrap();
        let upstream =
            Tensor::from_vec(wave(n, 0.17, 1.0), (1, kv, group * seq, seq), cpu).unwrap();
        let fused = causal_softmax(stacked.as_tensor(), 0.5).unwrap();
        // The same scores as one square block per query head.
        let per_head = stacked
            .as_tensor()
            .reshape((1, kv * group, seq, seq))
            .unwrap();
        let reference = composed(&per_head, 0.5, seq)
            .reshape((1, kv, group * seq, seq))
            .unwrap();
        assert_same_op((&fused, &reference), &upstream, &[&stacked], (1e-6, 1e-6));
    }

    #[test]
    fn scores_that_are_not_whole_square_blocks_are_an_error() {
        let cpu = &Device::Cpu;
        let s = Tensor::zeros((2, 3, 4), candle_core::DType::F32, cpu).unwrap();
        assert!(causal_softmax(&s, 1.0).is_err());
        let empty = Tensor::zeros((2, 0, 0), candle_core::DType::F32, cpu).unwrap();
        assert!(causal_softmax(&empty, 1.0).is_err());
    }
}
