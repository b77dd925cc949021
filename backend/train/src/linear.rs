//! Projections that train: a full weight (a `Var`), or a frozen weight with an optional LoRA pair.
//! Their products are the custom ops of [`crate::products`].

use candle_core::{Result, Tensor, Var};
use lachesis_inference::llama::LowRank;

use crate::products;

/// A weight that the optimizer updates, or one it never touches.
#[derive(Clone)]
pub enum Weight {
    Trainable(Var),
    Frozen(Tensor),
}

impl Weight {
    pub fn tensor(&self) -> &Tensor {
        match self {
            Weight::Trainable(v) => v.as_tensor(),
            Weight::Frozen(t) => t,
        }
    }
}

/// LoRA's low-rank update `scale · B·A` beside a frozen weight (PEFT's layout: A is rank × in,
/// B is out × rank and starts at zero, so training starts from the base model exactly).
#[derive(Clone)]
pub struct LoraPair {
    pub a: Var,
    pub b: Var,
    pub scale: f64,
}

#[derive(Clone)]
pub struct Linear {
    pub weight: Weight,
    pub lora: Option<LoraPair>,
}

impl Linear {
    /// `x` is (rows × in); the answer (rows × out). `adapters: false` reads the base weight only
    /// (the reference model of a LoRA run).
    pub fn forward(&self, x: &Tensor, adapters: bool) -> Result<Tensor> {
        let base = match &self.weight {
            Weight::Trainable(w) => products::trainable(x, w.as_tensor())?,
            Weight::Frozen(w) => products::frozen(x, w)?,
        };
        match (&self.lora, adapters) {
            (Some(lora), true) => {
                let low = products::trainable(x, lora.a.as_tensor())?;
                let update = products::trainable(&low, lora.b.as_tensor())?;
                base + (update * lora.scale)?
            }
            _ => Ok(base),
        }
    }

    /// The adapter as inference applies it beside the base weight (detached copies), if any.
    pub fn low_rank(&self) -> Result<Option<LowRank>> {
        self.lora
            .as_ref()
            .map(|lora| {
                LowRank::new(
                    &lora.a.as_tensor().detach().copy()?,
                    &lora.b.as_tensor().detach().copy()?,
                    lora.scale,
                )
            })
            .transpose()
    }

    /// The weight inference should use: `W + scale · B·A` when an adapter is attached.
    pub fn merged(&self) -> Result<Tensor> {
        let w = self.weight.tensor();
        match &self.lora {
            Some(lora) => {
                let delta = lora.b.as_tensor().matmul(lora.a.as_tensor())?;
                w + (delta * lora.scale)?
            }
            None => Ok(w.clone()),
        }
    }
}

#[cfg(test)]
mod tests {
    use candle_core::{Device, Var};

    use super::*;

    fn tensor(values: &[f32], shape: (usize, usize)) -> Tensor {
        Tensor::from_slice(values, shape, &Device::Cpu).unwrap()
    }

    #[test]
    fn the_frozen_matmul_matches_a_plain_one_and_passes_the_input_gradient() {
        let w = tensor(&[1.0, 2.0, 3.0, -1.0, 0.5, 4.0], (2, 3));
        let x = Var::from_tensor(&tensor(&[0.5, -2.0, 1.0, 3.0, 0.25, -1.0], (2, 3))).unwrap();
        let frozen = Linear {
            weight: Weight::Frozen(w.clone()),
            lora: None,
        };
        let y = frozen.forward(x.as_tensor(), true).unwrap();
        let expected = x.as_tensor().matmul(&w.t().unwrap()).unwrap();
        assert_eq!(
            y.to_vec2::<f32>().unwrap(),
            expected.to_vec2::<f32>().unwrap()
        );
        let grads = y.sum_all().unwrap().backward().unwrap();
        let gx = grads.get(x.as_tensor()).expect("x has a gradient");
        // d(sum(x Wᵀ))/dx = ones · W: each row is the column sums of W.
        assert_eq!(gx.to_vec2::<f32>().unwrap(), vec![vec![0.0, 2.5, 7.0]; 2]);
    }

    #[test]
    fn a_lora_pair_adds_its_scaled_low_rank_update_and_merges_to_the_same_map() {
        let w = tensor(&[1.0, 0.0, 0.0, 1.0], (2, 2));
        let lora = LoraPair {
            a: Var::from_tensor(&tensor(&[1.0, 1.0], (1, 2))).unwrap(),
            b: Var::from_tensor(&tensor(&[2.0, -1.0], (2, 1))).unwrap(),
            scale: 0.5,
        };
        let linear = Linear {
            weight: Weight::Frozen(w),
            lora: Some(lora),
        };
        let x = tensor(&[1.0, 3.0], (1, 2));
        let y = linear.forward(&x, true).unwrap().to_vec2::<f32>().unwrap();
        // x + 0.5 · (x·Aᵀ)·Bᵀ = [1, 3] + 0.5 · 4 · [2, -1] = [5, 1].
        assert_eq!(y, vec![vec![5.0, 1.0]]);
        let base = linear.forward(&x, false).unwrap().to_vec2::<f32>().unwrap();
        assert_eq!(base, vec![vec![1.0, 3.0]]);
        let merged = x.matmul(&linear.merged().unwrap().t().unwrap()).unwrap();
        assert_eq!(merged.to_vec2::<f32>().unwrap(), y);
    }
}
