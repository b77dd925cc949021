//! AdamW with linear warmup and gradient-norm clipping, over named variables.
//!
//! candle-nn's `AdamW` neither clips nor warms up, applies weight decay 0.01 by default and skips
//! variables without a gradient silently; this one takes the accumulated gradients explicitly and
//! keeps its moments under the variables' names so a checkpoint can resume them.

use std::collections::HashMap;

use candle_core::{Result, Tensor, Var};

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OptimConfig {
    pub lr: f64,
    pub beta1: f64,
    pub beta2: f64,
    pub eps: f64,
    pub weight_decay: f64,
    /// Steps over which the learning rate rises linearly to `lr` (0: none).
    pub warmup_steps: usize,
    /// Gradients are scaled down when their global L2 norm exceeds this (0: no clipping).
    pub max_grad_norm: f64,
    /// After warmup the rate falls linearly to `lr · final_lr_ratio` at this step (0: constant).
    pub decay_steps: usize,
    pub final_lr_ratio: f64,
}

impl Default for OptimConfig {
    fn default() -> Self {
        Self {
            lr: 1e-5,
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-8,
            weight_decay: 0.0,
            warmup_steps: 0,
            max_grad_norm: 1.0,
            decay_steps: 0,
            final_lr_ratio: 1.0,
        }
    }
}

pub struct AdamW {
    pub config: OptimConfig,
    /// Optimizer steps taken so far.
    pub step: usize,
    m: Vec<Tensor>,
    v: Vec<Tensor>,
}

/// What one update did.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct UpdateStats {
    /// The global gradient norm before clipping.
    pub grad_norm: f64,
    pub lr: f64,
}

impl AdamW {
    pub fn new(vars: &[(String, Var)], config: OptimConfig) -> Result<Self> {
        let zeros = |(_, v): &(String, Var)| v.as_tensor().zeros_like();
        Ok(Self {
            config,
            step: 0,
            m: vars.iter().map(zeros).collect::<Result<_>>()?,
            v: vars.iter().map(zeros).collect::<Result<_>>()?,
        })
    }

    /// The learning rate of the next step: linear warmup `lr·(step+1)/warmup`, then constant or
    /// falling linearly to `lr · final_lr_ratio` at `decay_steps`.
    pub fn current_lr(&self) -> f64 {
        let c = &self.config;
        if self.step < c.warmup_steps {
            return c.lr * (self.step + 1) as f64 / c.warmup_steps as f64;
        }
        if c.decay_steps <= c.warmup_steps {
            return c.lr;
        }
        let span = (c.decay_steps - c.warmup_steps) as f64;
        let progress = ((self.step - c.warmup_steps) as f64 / span).min(1.0);
        c.lr * (1.0 - progress * (1.0 - c.final_lr_ratio))
    }

    /// One update from gradients aligned with `vars` (`None`: the variable got no gradient this
    /// step, and only its weight decay applies).
    pub fn update(
        &mut self,
        vars: &[(String, Var)],
        grads: &[Option<Tensor>],
    ) -> Result<UpdateStats> {
        let mut square_sum = 0f64;
        for g in grads.iter().flatten() {
            square_sum += g.sqr()?.sum_all()?.to_scalar::<f32>()? as f64;
        }
        let grad_norm = square_sum.sqrt();
        let c = self.config;
        let clip = if c.max_grad_norm > 0.0 && grad_norm > c.max_grad_norm {
            c.max_grad_norm / (grad_norm + 1e-6)
        } else {
            1.0
        };
        let lr = self.current_lr();
        self.step += 1;
        let t = self.step as i32;
        let (bias1, bias2) = (1.0 - c.beta1.powi(t), 1.0 - c.beta2.powi(t));
        for (i, ((_, var), grad)) in vars.iter().zip(grads).enumerate() {
            let w = var.as_tensor();
            let mut next = if c.weight_decay > 0.0 {
                (w * (1.0 - lr * c.weight_decay))?
            } else {
                w.clone()
            };
            if let Some(g) = grad {
                let g = (g * clip)?;
                self.m[i] = ((&self.m[i] * c.beta1)? + (&g * (1.0 - c.beta1))?)?;
                self.v[i] = ((&self.v[i] * c.beta2)? + (g.sqr()? * (1.0 - c.beta2))?)?;
                let m_hat = (&self.m[i] / bias1)?;
                let v_hat = (&self.v[i] / bias2)?;
                let delta = (m_hat / (v_hat.sqrt()? + c.eps)?)?;
                next = (next - (delta * lr)?)?;
            }
            var.set(&next)?;
        }
        Ok(UpdateStats { grad_norm, lr })
    }

    /// The moments under `m.NAME` / `v.NAME`, for a checkpoint.
    pub fn state(&self, vars: &[(String, Var)]) -> HashMap<String, Tensor> {
        let mut out = HashMap::new();
        for (i, (name, _)) in vars.iter().enumerate() {
            out.insert(format!("m.{name}"), self.m[i].clone());
            out.insert(format!("v.{name}"), self.v[i].clone());
        }
        out
    }

    /// Restores moments written by [`AdamW::state`]; every variable must be present.
    pub fn load_state(
        &mut self,
        vars: &[(String, Var)],
        state: &HashMap<String, Tensor>,
        step: usize,
    ) -> std::result::Result<(), String> {
        for (i, (name, var)) in vars.iter().enumerate() {
            for (prefix, slot) in [("m", &mut self.m[i]), ("v", &mut self.v[i])] {
                let t = state
                    .get(&format!("{prefix}.{name}"))
                    .ok_or_else(|| format!("optimizer state lacks {prefix}.{name}"))?;
                if t.dims() != var.dims() {
                    return Err(format!(
                        "optimizer state {prefix}.{name} has the wrong shape"
                    ));
                }
                *slot = t.clone();
            }
        }
        self.step = step;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use candle_core::{DType, Device};

    use super::*;

    fn var(values: &[f32]) -> (String, Var) {
        let t = Tensor::from_slice(values, values.len(), &Device::Cpu).unwrap();
        ("w".to_owned(), Var::from_tensor(&t).unwrap())
    }

    #[test]
    fn the_first_step_moves_each_weight_by_lr_against_its_gradient_sign() {
        let vars = vec![var(&[1.0, -1.0])];
        let config = OptimConfig {
            lr: 0.1,
            max_grad_norm: 0.0,
            ..OptimConfig::default()
        };
        let mut opt = AdamW::new(&vars, config).unwrap();
        let g = Tensor::from_slice(&[3.0f32, -0.5], 2, &Device::Cpu).unwrap();
        opt.update(&vars, &[Some(g)]).unwrap();
        // Bias-corrected Adam's first step is lr · g/|g|.
        let w = vars[0].1.as_tensor().to_vec1::<f32>().unwrap();
        assert!(
            (w[0] - 0.9).abs() < 1e-5 && (w[1] + 0.9).abs() < 1e-5,
            "{w:?}"
        );
    }

    #[test]
    fn warmup_rises_linearly_and_clipping_reports_the_raw_norm() {
        let vars = vec![var(&[0.0, 0.0])];
        let config = OptimConfig {
            lr: 1.0,
            warmup_steps: 4,
            max_grad_norm: 1.0,
            ..OptimConfig::default()
        };
        let mut opt = AdamW::new(&vars, config).unwrap();
        let g = Tensor::from_slice(&[3.0f32, 4.0], 2, &Device::Cpu).unwrap();
        let stats = opt.update(&vars, &[Some(g)]).unwrap();
        assert_eq!(stats.lr, 0.25);
        assert!((stats.grad_norm - 5.0).abs() < 1e-6);
        assert_eq!(opt.current_lr(), 0.5);
        let zero = Tensor::zeros(2, DType::F32, &Device::Cpu).unwrap();
        let restored = opt.state(&vars);
        let mut again = AdamW::new(&vars, config).unwrap();
        again.load_state(&vars, &restored, opt.step).unwrap();
        assert_eq!(again.current_lr(), 0.5);
        assert!(
            again
                .load_state(&vars, &HashMap::from([("m.w".into(), zero)]), 1)
                .is_err()
        );
    }

    #[test]
    fn the_rate_decays_linearly_after_warmup_to_its_floor() {
        let vars = vec![var(&[0.0])];
        let config = OptimConfig {
            lr: 1.0,
            warmup_steps: 2,
            decay_steps: 6,
            final_lr_ratio: 0.2,
            ..OptimConfig::default()
        };
        let mut opt = AdamW::new(&vars, config).unwrap();
        let mut rates = Vec::new();
        for _ in 0..8 {
            rates.push(opt.current_lr());
            opt.step += 1;
        }
        let expected = [0.5, 1.0, 1.0, 0.8, 0.6, 0.4, 0.2, 0.2];
        for (r, e) in rates.iter().zip(expected) {
            assert!((r - e).abs() < 1e-12, "{rates:?}");
        }
    }
}
