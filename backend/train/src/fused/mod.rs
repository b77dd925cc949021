//! Fused CPU kernels with their own backward passes, for the steps where candle's composed ops
//! make one full pass over memory per elementary operation (and keep every intermediate for the
//! backward pass). Each kernel is tested against the composed ops it replaces, values and
//! gradients.

mod attention;
mod logprobs;
mod norm;
mod swiglu;

pub use attention::causal_softmax;
pub use logprobs::target_logprobs;
pub use norm::rms_norm;
pub use swiglu::swiglu;

use candle_core::{CpuStorage, Layout, Result, Storage, Tensor};

/// The f32 elements of a contiguous CPU tensor's storage.
fn slice<'a>(storage: &'a CpuStorage, layout: &Layout, op: &str) -> Result<&'a [f32]> {
    let Some((start, end)) = layout.contiguous_offsets() else {
        candle_core::bail!("{op} needs a contiguous tensor");
    };
    Ok(&storage.as_slice::<f32>()?[start..end])
}

/// Runs `f` on a tensor's elements in place, copying only when the tensor is not contiguous.
fn with_slice<R>(t: &Tensor, op: &str, f: impl FnOnce(&[f32]) -> R) -> Result<R> {
    let t = t.contiguous()?;
    let (storage, layout) = t.storage_and_layout();
    let Storage::Cpu(cpu) = &*storage else {
        candle_core::bail!("{op} runs on the CPU only");
    };
    Ok(f(slice(cpu, layout, op)?))
}

/// A tensor's elements as a vector (contiguous copy), for the small operands of a backward pass.
fn values(t: &Tensor) -> Result<Vec<f32>> {
    t.flatten_all()?.to_vec1()
}

#[cfg(test)]
fn max_diff(a: &Tensor, b: &Tensor) -> f32 {
    (a - b)
        .and_then(|d| d.abs())
        .and_then(|d| d.flatten_all())
        .and_then(|d| d.max(0))
        .and_then(|d| d.to_scalar::<f32>())
        .expect("same shapes")
}

/// Deterministic test data in about [-scale, scale].
#[cfg(test)]
fn wave(n: usize, step: f32, scale: f32) -> Vec<f32> {
    (0..n).map(|i| (i as f32 * step).sin() * scale).collect()
}
