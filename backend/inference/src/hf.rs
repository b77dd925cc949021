//! Llama models in Hugging Face's layout: a directory with `config.json`, one or more
//! `*.safetensors` files and the tokenizer files. The trainer's checkpoints come out this way.
//!
//! Hugging Face stores q and k projections for rotate-half rotary embeddings, where GGUF files
//! store them permuted for the interleaved layout; the forward pass takes the matching rotation.

use std::collections::HashMap;
use std::path::Path;

use candle_core::quantized::{GgmlDType, QMatMul, QTensor};
use candle_core::{DType, Device, Result, Tensor};
use serde::Deserialize;

use crate::llama::{Layer, Llama, LowRank, Projection};

#[derive(Debug, Deserialize)]
struct HfLlamaConfig {
    hidden_size: usize,
    num_attention_heads: usize,
    #[serde(default)]
    num_key_value_heads: Option<usize>,
    num_hidden_layers: usize,
    rms_norm_eps: f64,
    #[serde(default = "default_rope_theta")]
    rope_theta: f32,
    #[serde(default)]
    max_position_embeddings: Option<usize>,
    #[serde(default)]
    tie_word_embeddings: bool,
}

fn default_rope_theta() -> f32 {
    10_000.0
}

/// Reads every `*.safetensors` file of `dir` (a single file or shards) into one name → tensor map.
fn read_tensors(dir: &Path) -> Result<HashMap<String, Tensor>> {
    let mut tensors = HashMap::new();
    let mut files: Vec<_> = std::fs::read_dir(dir)?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "safetensors"))
        .collect();
    files.sort();
    if files.is_empty() {
        candle_core::bail!("{} holds no .safetensors file", dir.display());
    }
    for file in files {
        tensors.extend(candle_core::safetensors::load(&file, &Device::Cpu)?);
    }
    Ok(tensors)
}

impl Llama {
    /// Loads a Hugging Face llama directory. With `quantize`, matrices become Q8_0 (the speed of
    /// the GGUF path); without, they stay dense f32 (exact, about 4x the memory traffic).
    pub fn from_safetensors(dir: &Path, context_cap: usize, quantize: bool) -> Result<Self> {
        let config = std::fs::read(dir.join("config.json"))?;
        Self::from_hf_tensors(
            &config,
            read_tensors(dir)?,
            HashMap::new(),
            context_cap,
            quantize,
        )
    }

    /// Builds the model from a `config.json` body and tensors under Hugging Face's names, as the
    /// trainer holds them in memory: the in-process weight swap needs no round trip through disk.
    /// `adapters` holds LoRA updates by the name of the matrix they apply to
    /// (`model.layers.0.self_attn.q_proj.weight`); they stay in f32 when the base is quantized.
    pub fn from_hf_tensors(
        config_json: &[u8],
        mut tensors: HashMap<String, Tensor>,
        adapters: HashMap<String, LowRank>,
        context_cap: usize,
        quantize: bool,
    ) -> Result<Self> {
        let config: HfLlamaConfig = serde_json::from_slice(config_json)
            .map_err(|e| candle_core::Error::Msg(format!("config.json: {e}")))?;
        let mut take = |name: &str| -> Result<Tensor> {
            tensors
                .remove(name)
                .ok_or_else(|| candle_core::Error::Msg(format!("the checkpoint lacks {name}")))?
                .to_dtype(DType::F32)
        };
        let matmul = |t: Tensor| -> Result<QMatMul> {
            if quantize {
                QMatMul::from_qtensor(QTensor::quantize(&t, GgmlDType::Q8_0)?)
            } else {
                Ok(QMatMul::Tensor(t))
            }
        };
        let embeddings = take("model.embed_tokens.weight")?;
        let output = if config.tie_word_embeddings {
            matmul(embeddings.clone())?
        } else {
            match take("lm_head.weight") {
                Ok(t) => matmul(t)?,
                // Checkpoints that tie weights sometimes omit the flag and the matrix both.
                Err(_) => matmul(embeddings.clone())?,
            }
        };
        let norm = take("model.norm.weight")?;
        let mut layers = Vec::with_capacity(config.num_hidden_layers);
        for i in 0..config.num_hidden_layers {
            let mut projection = |suffix: &str| -> Result<Projection> {
                Ok(Projection::new(matmul(take(&format!(
                    "model.layers.{i}.{suffix}.weight"
                ))?)?))
            };
            layers.push(Layer {
                wq: projection("self_attn.q_proj")?,
                wk: projection("self_attn.k_proj")?,
                wv: projection("self_attn.v_proj")?,
                wo: projection("self_attn.o_proj")?,
                gate: projection("mlp.gate_proj")?,
                up: projection("mlp.up_proj")?,
                down: projection("mlp.down_proj")?,
                attn_norm: take(&format!("model.layers.{i}.input_layernorm.weight"))?,
                ffn_norm: take(&format!("model.layers.{i}.post_attention_layernorm.weight"))?,
            });
        }

        let context = config
            .max_position_embeddings
            .map_or(context_cap, |c| c.min(context_cap));
        Llama::assemble(
            embeddings,
            layers,
            norm,
            output,
            crate::llama::Shape {
                n_head: config.num_attention_heads,
                n_kv_head: config
                    .num_key_value_heads
                    .unwrap_or(config.num_attention_heads),
                hidden: config.hidden_size,
                eps: config.rms_norm_eps as f32,
                rope_base: config.rope_theta,
                context,
                rope_interleaved: false,
            },
        )?
        .with_adapters(adapters)
    }
}
