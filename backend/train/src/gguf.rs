//! Training from a GGUF file: weights dequantized to f32 and renamed to Hugging Face's names, so
//! a quantized release (SmolLM2's Q4_1) can be fine-tuned and saved in HF or PEFT layout.
//!
//! GGUF stores the q and k projections permuted for interleaved rotary embeddings
//! (llama.cpp's `permute`: rows reshaped to heads × 2 × d/2 and the last two axes swapped); the
//! permutation is undone here so the training model uses HF's rotate-half layout.

use std::collections::HashMap;
use std::path::Path;

use candle_core::quantized::gguf_file;
use candle_core::{Device, Tensor};
use lachesis_inference::ModelTokenizer;

use crate::TrainError;
use crate::config::LlamaConfig;

/// The config and HF-named f32 tensors of a llama GGUF, and its tokenizer.
pub fn load_gguf(
    path: &Path,
) -> Result<(LlamaConfig, HashMap<String, Tensor>, ModelTokenizer), TrainError> {
    let mut file = std::fs::File::open(path)
        .map_err(|e| TrainError::Checkpoint(format!("opening {}: {e}", path.display())))?;
    let content = gguf_file::Content::read(&mut file)
        .map_err(|e| TrainError::Checkpoint(format!("{} is not GGUF: {e}", path.display())))?;
    let tokenizer =
        ModelTokenizer::from_gguf(&content).map_err(|e| TrainError::Checkpoint(e.to_string()))?;
    let md = |key: &str| {
        content
            .metadata
            .get(key)
            .ok_or_else(|| TrainError::Checkpoint(format!("GGUF metadata lacks {key}")))
    };
    let arch = md("general.architecture")?.to_string()?.clone();
    if arch != "llama" {
        return Err(TrainError::Checkpoint(format!(
            "architecture {arch:?} is not supported (llama is)"
        )));
    }
    let heads = md("llama.attention.head_count")?.to_u32()? as usize;
    let kv_heads = md("llama.attention.head_count_kv")?.to_u32()? as usize;
    let layers = md("llama.block_count")?.to_u32()? as usize;
    let hidden = md("llama.embedding_length")?.to_u32()? as usize;
    let eps = md("llama.attention.layer_norm_rms_epsilon")?.to_f32()? as f64;
    let rope = md("llama.rope.freq_base")
        .and_then(|v| Ok(v.to_f32()?))
        .unwrap_or(10_000.0) as f64;
    let context = md("llama.context_length")
        .and_then(|v| Ok(v.to_u32()?))
        .unwrap_or(2048) as usize;
    let device = &Device::Cpu;
    let mut get = |name: &str| -> Result<Tensor, TrainError> {
        Ok(content
            .tensor(&mut file, name, device)?
            .dequantize(device)?)
    };
    let mut tensors = HashMap::new();
    let embed = get("token_embd.weight")?;
    let vocab = embed.dim(0)?;
    tensors.insert("model.embed_tokens.weight".to_owned(), embed);
    tensors.insert("model.norm.weight".to_owned(), get("output_norm.weight")?);
    let tied = match get("output.weight") {
        Ok(t) => {
            tensors.insert("lm_head.weight".to_owned(), t);
            false
        }
        Err(_) => true,
    };
    let head_dim = hidden / heads.max(1);
    let mut intermediate = 0;
    for i in 0..layers {
        let mut put = |hf: &str, t: Tensor| {
            tensors.insert(format!("model.layers.{i}.{hf}.weight"), t);
        };
        let q = unpermute(get(&format!("blk.{i}.attn_q.weight"))?, heads, head_dim)?;
        let k = unpermute(get(&format!("blk.{i}.attn_k.weight"))?, kv_heads, head_dim)?;
        put("self_attn.q_proj", q);
        put("self_attn.k_proj", k);
        for (gguf, hf) in [
            ("attn_v", "self_attn.v_proj"),
            ("attn_output", "self_attn.o_proj"),
            ("ffn_gate", "mlp.gate_proj"),
            ("ffn_up", "mlp.up_proj"),
            ("ffn_down", "mlp.down_proj"),
            ("attn_norm", "input_layernorm"),
            ("ffn_norm", "post_attention_layernorm"),
        ] {
            let t = get(&format!("blk.{i}.{gguf}.weight"))?;
            if gguf == "ffn_gate" {
                intermediate = t.dim(0)?;
            }
            put(hf, t);
        }
    }
    let config = LlamaConfig {
        vocab_size: vocab,
        hidden_size: hidden,
        intermediate_size: intermediate,
        num_hidden_layers: layers,
        num_attention_heads: heads,
        num_key_value_heads: Some(kv_heads),
        rms_norm_eps: eps,
        rope_theta: rope,
        max_position_embeddings: context,
        tie_word_embeddings: tied,
    };
    Ok((config, tensors, tokenizer))
}

/// Undoes llama.cpp's q/k permutation: rows (heads × d/2 × 2) back to (heads × 2 × d/2).
pub fn unpermute(w: Tensor, heads: usize, head_dim: usize) -> Result<Tensor, TrainError> {
    let (rows, cols) = w.dims2()?;
    Ok(w.reshape((heads, head_dim / 2, 2, cols))?
        .transpose(1, 2)?
        .contiguous()?
        .reshape((rows, cols))?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unpermute_inverts_llama_cpps_permutation() {
        // One head of dimension 4 over one input: HF rows [a0, a1, b0, b1] (rotate-half pairs
        // (a0, b0), (a1, b1)) are stored by llama.cpp interleaved as [a0, b0, a1, b1].
        let gguf = Tensor::from_slice(&[10f32, 20.0, 11.0, 21.0], (4, 1), &Device::Cpu).unwrap();
        let hf = unpermute(gguf, 1, 4).unwrap();
        assert_eq!(
            hf.flatten_all().unwrap().to_vec1::<f32>().unwrap(),
            [10.0, 11.0, 20.0, 21.0]
        );
    }
}
