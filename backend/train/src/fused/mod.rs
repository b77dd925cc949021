//! Fused CPU kernels with their own backward passes, for the steps where candle's composed ops
//! make one full pass over memory per elementary operation (and keep every intermediate for the
//! backward pass). Each kernel is tested against the composed ops it replaces, values and
//! gradients.

mod attention;
pub(crate) mod binary;
mod logprobs;
mod norm;
mod swiglu;

pub use attention::causal_softmax;
pub use logprobs::target_logprobs;
pub use norm::rms_norm;
pub use swiglu::swiglu;

use candle_core::{CpuStorage, Layout, Result, Storage, Tensor};

/// The f32 elements of a contiguous CPU tensor's storage.
pub(crate) fn slice<'a>(storage: &'a CpuStorage, layout: &Layout, op: &str) -> Result<&'a [f32]> {
    let Some((start, end)) = layout.contiguous_offsets() else {
        candle_core::bail!("{op} needs a contiguous tensor");
    };
    Ok(&storage.as_slice::<f32>()?[start..end])
}

/// Runs `f` on a tensor's elements in place, copying only when the tensor is not contiguous.
pub(crate) fn with_slice<R>(t: &Tensor, op: &str, f: impl FnOnce(&[f32]) -> R) -> Result<R> {
    let t = t.contiguous()?;
    let (storage, layout) = t.storage_and_layout();
    let Storage::Cpu(cpu) = &*storage else {
        candle_core::bail!("{op} runs on the CPU only");
    };
    Ok(f(slice(cpu, layout, op)?))
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

/// Checks a fused op against the composed ops it replaces: values within `value_tolerance`, and
/// the gradients of Σ output·upstream for every input within `gradient_tolerance`.
#[cfg(test)]
fn assert_same_op(
    (fused, reference): (&Tensor, &Tensor),
    upstream: &Tensor,
    inputs: &[&candle_core::Var],
    (value_tolerance, gradient_tolerance): (f32, f32),
) {
    let values = max_diff(fused, reference);
    assert!(values < value_tolerance, "values differ by {values}");
    let weighted = |t: &Tensor| {
        (t * upstream)
            .and_then(|t| t.sum_all())
            .and_then(|t| t.backward())
    };
    let (of_fused, of_reference) = (weighted(fused).unwrap(), weighted(reference).unwrap());
    for var in inputs {
        let a = of_fused
            .get(var.as_tensor())
            .expect("a gradient through the fused op");
        let b = of_reference
            .get(var.as_tensor())
            .expect("a gradient through the reference");
        let gradients = max_diff(a, b);
        assert!(
            gradients < gradient_tolerance,
            "gradients differ by {gradients}"
        );
    }
}

/// Deterministic test data in about [-scale, scale].
#[cfg(test)]
fn wave(n: usize, step: f32, scale: f32) -> Vec<f32> {
    (0..n).map(|i| (i as f32 * step).sin() * scale).collect()
}
