//! A llama whose every parameter gets a gradient, with Hugging Face's parameter names.
//!
//! candle-transformers' llama trains only `lm_head` (its RMSNorm, rotary and KV-cache ops have no
//! backward), so this model is written from differentiable ops only: RMSNorm, the causal softmax
//! and SwiGLU as fused kernels with their own backward (`crate::fused`), rotate-half rotary
//! (`rope_slow`), repeated KV heads. It returns logits at every position, which GRPO needs.

use std::collections::HashMap;

use candle_core::{DType, Device, Tensor, Var};
use lachesis_inference::llama::LowRank;

type Result<T, E = candle_core::Error> = std::result::Result<T, E>;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::TrainError;
use crate::config::LlamaConfig;
use crate::fused::{self, rms_norm};
use crate::linear::{Linear, LoraPair, Weight};

/// LoRA settings, PEFT's names: `r`, `lora_alpha`, `target_modules` (projection names such as
/// `q_proj`, `v_proj`, `gate_proj`).
#[derive(Debug, Clone, PartialEq)]
pub struct LoraConfig {
    pub rank: usize,
    pub alpha: f64,
    pub targets: Vec<String>,
    /// Seeds the initialisation of the A matrices.
    pub seed: u64,
}

impl LoraConfig {
    pub fn scale(&self) -> f64 {
        self.alpha / self.rank as f64
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum TrainMode {
    /// Every weight is trained.
    Full,
    /// The base is frozen; only the adapters train.
    Lora(LoraConfig),
    /// Nothing trains (a reference model, or logits for a check).
    Frozen,
}

/// The projections LoRA may target, in PEFT's spelling, with their module path in a layer.
pub const PROJECTIONS: [(&str, &str); 7] = [
    ("q_proj", "self_attn"),
    ("k_proj", "self_attn"),
    ("v_proj", "self_attn"),
    ("o_proj", "self_attn"),
    ("gate_proj", "mlp"),
    ("up_proj", "mlp"),
    ("down_proj", "mlp"),
];

struct Block {
    input_norm: Weight,
    post_norm: Weight,
    /// In [`PROJECTIONS`] order.
    projections: Vec<Linear>,
}

pub struct TrainLlama {
    pub config: LlamaConfig,
    pub mode: TrainMode,
    embed: Weight,
    blocks: Vec<Block>,
    norm: Weight,
    /// `None` when the output matrix is the embedding table (tied weights).
    lm_head: Option<Linear>,
    cos: Tensor,
    sin: Tensor,
    trainable: Vec<(String, Var)>,
}

fn layer_name(i: usize, projection: &str, module: &str) -> String {
    format!("model.layers.{i}.{module}.{projection}.weight")
}

/// PEFT's name of an adapter matrix (`which` is `lora_A` or `lora_B`).
pub fn peft_name(i: usize, projection: &str, module: &str, which: &str) -> String {
    format!("base_model.model.model.layers.{i}.{module}.{projection}.{which}.weight")
}

impl TrainLlama {
    /// A freshly initialised model: matrices uniform with standard deviation 0.02 (the usual
    /// llama init), norms at one. Seeded, so a seed reproduces the model exactly.
    pub fn random(config: LlamaConfig, seed: u64, mode: TrainMode) -> Result<Self, TrainError> {
        config.validate()?;
        let mut rng = StdRng::seed_from_u64(seed);
        let mut tensors = HashMap::new();
        let bound = 0.02 * 3f32.sqrt();
        let mut uniform = |rows: usize, cols: usize| -> Result<Tensor, TrainError> {
            let data: Vec<f32> = (0..rows * cols)
                .map(|_| rng.random_range(-bound..bound))
                .collect();
            Ok(Tensor::from_vec(data, (rows, cols), &Device::Cpu)?)
        };
        let (h, v, m) = (
            config.hidden_size,
            config.vocab_size,
            config.intermediate_size,
        );
        let kv = config.kv_heads() * config.head_dim();
        tensors.insert("model.embed_tokens.weight".to_owned(), uniform(v, h)?);
        if !config.tie_word_embeddings {
            tensors.insert("lm_head.weight".to_owned(), uniform(v, h)?);
        }
        let ones = Tensor::ones(h, DType::F32, &Device::Cpu)?;
        tensors.insert("model.norm.weight".to_owned(), ones.clone());
        for i in 0..config.num_hidden_layers {
            for norm in ["input_layernorm", "post_attention_layernorm"] {
                tensors.insert(format!("model.layers.{i}.{norm}.weight"), ones.clone());
            }
            for (projection, module) in PROJECTIONS {
                let (rows, cols) = match projection {
                    "q_proj" | "o_proj" => (h, h),
                    "k_proj" | "v_proj" => (kv, h),
                    "gate_proj" | "up_proj" => (m, h),
                    _ => (h, m),
                };
                tensors.insert(layer_name(i, projection, module), uniform(rows, cols)?);
            }
        }
        Self::from_tensors(config, tensors, mode)
    }

    /// A model from tensors under Hugging Face's names (a checkpoint, or dequantized GGUF).
    pub fn from_tensors(
        config: LlamaConfig,
        mut tensors: HashMap<String, Tensor>,
        mode: TrainMode,
    ) -> Result<Self, TrainError> {
        config.validate()?;
        let full = mode == TrainMode::Full;
        let mut trainable = Vec::new();
        let mut take = |name: &str, shape: &[usize]| -> Result<Weight, TrainError> {
            let t = tensors
                .remove(name)
                .ok_or_else(|| TrainError::Checkpoint(format!("missing tensor {name}")))?
                .to_dtype(DType::F32)?;
            if t.dims() != shape {
                return Err(TrainError::Checkpoint(format!(
                    "{name} has shape {:?}, the config says {shape:?}",
                    t.dims()
                )));
            }
            if full {
                let var = Var::from_tensor(&t)?;
                trainable.push((name.to_owned(), var.clone()));
                Ok(Weight::Trainable(var))
            } else {
                Ok(Weight::Frozen(t))
            }
        };
        let (h, v, m) = (
            config.hidden_size,
            config.vocab_size,
            config.intermediate_size,
        );
        let kv = config.kv_heads() * config.head_dim();
        let embed = take("model.embed_tokens.weight", &[v, h])?;
        let mut blocks = Vec::with_capacity(config.num_hidden_layers);
        for i in 0..config.num_hidden_layers {
            let input_norm = take(&format!("model.layers.{i}.input_layernorm.weight"), &[h])?;
            let mut projections = Vec::with_capacity(PROJECTIONS.len());
            for (projection, module) in PROJECTIONS {
                let shape = match projection {
                    "q_proj" | "o_proj" => [h, h],
                    "k_proj" | "v_proj" => [kv, h],
                    "gate_proj" | "up_proj" => [m, h],
                    _ => [h, m],
                };
                projections.push(Linear {
                    weight: take(&layer_name(i, projection, module), &shape)?,
                    lora: None,
                });
            }
            let post_norm = take(
                &format!("model.layers.{i}.post_attention_layernorm.weight"),
                &[h],
            )?;
            blocks.push(Block {
                input_norm,
                post_norm,
                projections,
            });
        }
        let norm = take("model.norm.weight", &[h])?;
        let lm_head = if config.tie_word_embeddings {
            None
        } else {
            Some(Linear {
                weight: take("lm_head.weight", &[v, h])?,
                lora: None,
            })
        };
        let (cos, sin) = rotary_tables(&config)?;
        let mut model = Self {
            config,
            mode,
            embed,
            blocks,
            norm,
            lm_head,
            cos,
            sin,
            trainable,
        };
        if let TrainMode::Lora(lora) = model.mode.clone() {
            model.attach_adapters(&lora)?;
        }
        Ok(model)
    }

    fn attach_adapters(&mut self, lora: &LoraConfig) -> Result<(), TrainError> {
        if lora.rank == 0 {
            return Err(TrainError::Config("LoRA rank must be positive".into()));
        }
        for target in &lora.targets {
            if !PROJECTIONS.iter().any(|(p, _)| p == target) {
                return Err(TrainError::Config(format!(
                    "unknown LoRA target {target:?}; llama has {}",
                    PROJECTIONS.map(|(p, _)| p).join(", ")
                )));
            }
        }
        let mut rng = StdRng::seed_from_u64(lora.seed);
        for (i, block) in self.blocks.iter_mut().enumerate() {
            for ((projection, module), linear) in PROJECTIONS.iter().zip(&mut block.projections) {
                if !lora.targets.iter().any(|t| t == projection) {
                    continue;
                }
                let (out, input) = linear.weight.tensor().dims2()?;
                // PEFT's default: A kaiming-uniform (bound 1/sqrt(in)), B zero.
                let bound = 1.0 / (input as f32).sqrt();
                let a: Vec<f32> = (0..lora.rank * input)
                    .map(|_| rng.random_range(-bound..bound))
                    .collect();
                let a = Var::from_tensor(&Tensor::from_vec(a, (lora.rank, input), &Device::Cpu)?)?;
                let b = Var::zeros((out, lora.rank), DType::F32, &Device::Cpu)?;
                self.trainable
                    .push((peft_name(i, projection, module, "lora_A"), a.clone()));
                self.trainable
                    .push((peft_name(i, projection, module, "lora_B"), b.clone()));
                linear.lora = Some(LoraPair {
                    a,
                    b,
                    scale: lora.scale(),
                });
            }
        }
        Ok(())
    }

    /// The variables the optimizer updates, named (HF names, or PEFT names for adapters), in a
    /// fixed order.
    pub fn trainable(&self) -> &[(String, Var)] {
        &self.trainable
    }

    /// Logits (batch × seq × vocab) at every position of `tokens` (batch × seq, u32). With
    /// `adapters: false` a LoRA model answers as its frozen base.
    pub fn forward(&self, tokens: &Tensor, adapters: bool) -> Result<Tensor> {
        self.forward_from(tokens, 0, adapters)
    }

    /// Logits of positions `start..` only (batch × (seq − start) × vocab). Every position is
    /// still read (attention needs them), but the vocabulary projection, the costliest matmul of
    /// a small model, is skipped over the prompt, where nothing is trained.
    pub fn forward_from(&self, tokens: &Tensor, start: usize, adapters: bool) -> Result<Tensor> {
        let (batch, seq) = tokens.dims2()?;
        if start >= seq {
            candle_core::bail!("logits from position {start} of a {seq}-token sequence");
        }
        let eps = self.config.rms_norm_eps;
        let mut x = self.embed.tensor().embedding(&tokens.flatten_all()?)?;
        for block in &self.blocks {
            let h = rms_norm(&x, block.input_norm.tensor(), eps)?;
            let attended = self.attention(block, &h, batch, seq, adapters)?;
            x = (x + attended)?;
            let h = rms_norm(&x, block.post_norm.tensor(), eps)?;
            let p = &block.projections;
            let gated = fused::swiglu(&p[4].forward(&h, adapters)?, &p[5].forward(&h, adapters)?)?;
            x = (x + p[6].forward(&gated, adapters)?)?;
        }
        let kept = seq - start;
        if start > 0 {
            let hidden = self.config.hidden_size;
            x = x
                .reshape((batch, seq, hidden))?
                .narrow(1, start, kept)?
                .contiguous()?
                .reshape((batch * kept, hidden))?;
        }
        let x = rms_norm(&x, self.norm.tensor(), eps)?;
        let logits = match &self.lm_head {
            Some(head) => head.forward(&x, adapters)?,
            // Tied: the embedding table is the output matrix (through the frozen-weight op when
            // it does not train, so no vocabulary-sized weight gradient is computed).
            None => Linear {
                weight: self.embed.clone(),
                lora: None,
            }
            .forward(&x, adapters)?,
        };
        logits.reshape((batch, kept, self.config.vocab_size))
    }

    fn attention(
        &self,
        block: &Block,
        x: &Tensor,
        batch: usize,
        seq: usize,
        adapters: bool,
    ) -> Result<Tensor> {
        let c = &self.config;
        let (heads, kv_heads, head_dim) = (c.num_attention_heads, c.kv_heads(), c.head_dim());
        let p = &block.projections;
        let split = |t: Tensor, n: usize| -> Result<Tensor> {
            t.reshape((batch, seq, n, head_dim))?
                .transpose(1, 2)?
                .contiguous()
        };
        let q = split(p[0].forward(x, adapters)?, heads)?;
        let k = split(p[1].forward(x, adapters)?, kv_heads)?;
        let v = split(p[2].forward(x, adapters)?, kv_heads)?;
        let cos = self.cos.narrow(0, 0, seq)?;
        let sin = self.sin.narrow(0, 0, seq)?;
        let q = candle_nn::rotary_emb::rope_slow(&q, &cos, &sin)?;
        let k = candle_nn::rotary_emb::rope_slow(&k, &cos, &sin)?;
        // The query heads that share a key/value head are adjacent (HF's `repeat_kv` order), so
        // each group is one (group · seq) × head_dim block against its key/value head: no copies
        // of the keys and values, and fewer, larger products.
        let group = heads / kv_heads;
        let q = q.reshape((batch, kv_heads, group * seq, head_dim))?;
        let weights = fused::causal_softmax(&q.matmul(&k.t()?)?, 1.0 / (head_dim as f64).sqrt())?;
        let y = weights.matmul(&v)?;
        let y = y
            .reshape((batch, heads, seq, head_dim))?
            .transpose(1, 2)?
            .reshape((batch * seq, heads * head_dim))?;
        p[3].forward(&y, adapters)
    }

    /// Every weight under its Hugging Face name, adapters merged in (what a full checkpoint
    /// stores). Tied models leave `lm_head.weight` out, as `transformers` does.
    pub fn hf_tensors(&self) -> Result<HashMap<String, Tensor>> {
        self.tensors(true)
    }

    /// What inference serves: the base weights under their Hugging Face names, and each adapter's
    /// update apart, by the name of the matrix it applies to.
    pub fn served_parts(&self) -> Result<(HashMap<String, Tensor>, HashMap<String, LowRank>)> {
        let mut adapters = HashMap::new();
        for (i, block) in self.blocks.iter().enumerate() {
            for ((projection, module), linear) in PROJECTIONS.iter().zip(&block.projections) {
                if let Some(low_rank) = linear.low_rank()? {
                    adapters.insert(layer_name(i, projection, module), low_rank);
                }
            }
        }
        Ok((self.tensors(false)?, adapters))
    }

    fn tensors(&self, merge: bool) -> Result<HashMap<String, Tensor>> {
        let weight = |linear: &Linear| -> Result<Tensor> {
            if merge {
                linear.merged()
            } else {
                Ok(linear.weight.tensor().clone())
            }
        };
        let mut out = HashMap::new();
        out.insert(
            "model.embed_tokens.weight".to_owned(),
            self.embed.tensor().clone(),
        );
        out.insert("model.norm.weight".to_owned(), self.norm.tensor().clone());
        if let Some(head) = &self.lm_head {
            // Adapters attach to the blocks' projections only, so the head is always whole.
            out.insert("lm_head.weight".to_owned(), head.merged()?);
        }
        for (i, block) in self.blocks.iter().enumerate() {
            out.insert(
                format!("model.layers.{i}.input_layernorm.weight"),
                block.input_norm.tensor().clone(),
            );
            out.insert(
                format!("model.layers.{i}.post_attention_layernorm.weight"),
                block.post_norm.tensor().clone(),
            );
            for ((projection, module), linear) in PROJECTIONS.iter().zip(&block.projections) {
                out.insert(layer_name(i, projection, module), weight(linear)?);
            }
        }
        // Detached copies: the trainer keeps updating its variables in place.
        out.into_iter()
            .map(|(name, t)| Ok((name, t.detach().copy()?)))
            .collect()
    }

    /// Overwrites trainable variables from named tensors (a LoRA adapter or optimizer resume);
    /// every trainable variable must be present with its shape.
    pub fn set_trainable(&self, tensors: &HashMap<String, Tensor>) -> Result<(), TrainError> {
        for (name, var) in &self.trainable {
            let t = tensors
                .get(name)
                .ok_or_else(|| TrainError::Checkpoint(format!("missing tensor {name}")))?;
            if t.dims() != var.dims() {
                return Err(TrainError::Checkpoint(format!(
                    "{name} has shape {:?}, the model {:?}",
                    t.dims(),
                    var.dims()
                )));
            }
            var.set(&t.to_dtype(DType::F32)?)?;
        }
        Ok(())
    }
}

fn rotary_tables(config: &LlamaConfig) -> Result<(Tensor, Tensor)> {
    let head_dim = config.head_dim();
    let inv_freq: Vec<f32> = (0..head_dim)
        .step_by(2)
        .map(|i| 1.0 / config.rope_theta.powf(i as f64 / head_dim as f64) as f32)
        .collect();
    let inv_freq = Tensor::from_vec(inv_freq, (1, head_dim / 2), &Device::Cpu)?;
    let positions = Tensor::arange(0u32, config.max_position_embeddings as u32, &Device::Cpu)?
        .to_dtype(DType::F32)?
        .reshape((config.max_position_embeddings, 1))?;
    let angles = positions.matmul(&inv_freq)?;
    Ok((angles.cos()?, angles.sin()?))
}
