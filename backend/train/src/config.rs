//! The shape of a llama, as Hugging Face's `config.json` spells it, so checkpoints load in
//! `transformers`, vLLM and our own engine alike.

use serde::{Deserialize, Serialize};

use crate::TrainError;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LlamaConfig {
    pub vocab_size: usize,
    pub hidden_size: usize,
    pub intermediate_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    #[serde(default)]
    pub num_key_value_heads: Option<usize>,
    pub rms_norm_eps: f64,
    #[serde(default = "default_rope_theta")]
    pub rope_theta: f64,
    #[serde(default = "default_positions")]
    pub max_position_embeddings: usize,
    #[serde(default)]
    pub tie_word_embeddings: bool,
}

fn default_rope_theta() -> f64 {
    10_000.0
}

fn default_positions() -> usize {
    2048
}

impl LlamaConfig {
    pub fn kv_heads(&self) -> usize {
        self.num_key_value_heads.unwrap_or(self.num_attention_heads)
    }

    pub fn head_dim(&self) -> usize {
        self.hidden_size / self.num_attention_heads.max(1)
    }

    /// Refuses shapes the forward pass cannot run, so bad configs are errors, not panics.
    pub fn validate(&self) -> Result<(), TrainError> {
        let heads = self.num_attention_heads;
        let kv = self.kv_heads();
        let ok = heads > 0
            && kv > 0
            && heads.is_multiple_of(kv)
            && self.hidden_size.is_multiple_of(heads)
            && self.head_dim().is_multiple_of(2)
            && self.vocab_size > 0
            && self.num_hidden_layers > 0
            && self.intermediate_size > 0
            && self.max_position_embeddings > 0;
        if ok {
            Ok(())
        } else {
            Err(TrainError::Config(format!(
                "inconsistent llama shape: hidden {}, {heads} heads, {kv} kv heads, vocab {}, {} layers",
                self.hidden_size, self.vocab_size, self.num_hidden_layers
            )))
        }
    }

    /// `config.json` with the keys `transformers` needs to pick the llama class.
    pub fn to_hf_json(&self) -> serde_json::Value {
        let mut value = serde_json::to_value(self).expect("a config serialises");
        let extra = serde_json::json!({
            "architectures": ["LlamaForCausalLM"],
            "model_type": "llama",
            "hidden_act": "silu",
            "torch_dtype": "float32",
            "attention_bias": false,
            "mlp_bias": false,
            "num_key_value_heads": self.kv_heads(),
        });
        if let (Some(map), Some(extra)) = (value.as_object_mut(), extra.as_object()) {
            map.extend(extra.clone());
        }
        value
    }
}
