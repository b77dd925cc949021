//! A Hugging Face llama directory (config.json, safetensors, tokenizer files) loads and computes the
//! same logits as the GGUF it was exported from.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use candle_core::quantized::gguf_file;
use candle_core::{Device, Tensor};
use lachesis_inference::llama::Llama;
use lachesis_inference::{
    Engine, EngineOptions, GenerateRequest, ModelTokenizer, Precision, SamplingParams,
};

fn model_path() -> PathBuf {
    PathBuf::from(
        std::env::var_os("LACHESIS_MODEL").expect("set LACHESIS_MODEL to the SmolLM2 GGUF"),
    )
}

/// GGUF stores q and k rows permuted for interleaved rotary embeddings; Hugging Face does not.
fn unpermute(w: &Tensor, heads: usize) -> Tensor {
    let (rows, cols) = w.dims2().unwrap();
    w.reshape((heads, rows / heads / 2, 2, cols))
        .unwrap()
        .transpose(1, 2)
        .unwrap()
        .reshape((rows, cols))
        .unwrap()
}

fn export_hf(gguf: &Path, dir: &Path) {
    let mut file = std::fs::File::open(gguf).unwrap();
    let content = gguf_file::Content::read(&mut file).unwrap();
    let md = |k: &str| content.metadata[k].to_u32().unwrap() as usize;
    let (heads, kv_heads, layers) = (
        md("llama.attention.head_count"),
        md("llama.attention.head_count_kv"),
        md("llama.block_count"),
    );
    let names = [
        ("attn_norm", "input_layernorm"),
        ("attn_q", "self_attn.q_proj"),
        ("attn_k", "self_attn.k_proj"),
        ("attn_v", "self_attn.v_proj"),
        ("attn_output", "self_attn.o_proj"),
        ("ffn_norm", "post_attention_layernorm"),
        ("ffn_gate", "mlp.gate_proj"),
        ("ffn_up", "mlp.up_proj"),
        ("ffn_down", "mlp.down_proj"),
    ];
    let mut load = |name: &str| {
        content
            .tensor(&mut file, name, &Device::Cpu)
            .unwrap()
            .dequantize(&Device::Cpu)
            .unwrap()
    };
    let mut tensors: HashMap<String, Tensor> = HashMap::new();
    tensors.insert(
        "model.embed_tokens.weight".into(),
        load("token_embd.weight"),
    );
    tensors.insert("model.norm.weight".into(), load("output_norm.weight"));
    for i in 0..layers {
        for (ours, theirs) in names {
            let mut t = load(&format!("blk.{i}.{ours}.weight"));
            if ours == "attn_q" {
                t = unpermute(&t, heads);
            } else if ours == "attn_k" {
                t = unpermute(&t, kv_heads);
            }
            tensors.insert(format!("model.layers.{i}.{theirs}.weight"), t);
        }
    }
    std::fs::create_dir_all(dir).unwrap();
    candle_core::safetensors::save(&tensors, dir.join("model.safetensors")).unwrap();
    let config = serde_json::json!({
        "architectures": ["LlamaForCausalLM"],
        "hidden_size": md("llama.embedding_length"),
        "intermediate_size": md("llama.feed_forward_length"),
        "num_attention_heads": heads,
        "num_key_value_heads": kv_heads,
        "num_hidden_layers": layers,
        "rms_norm_eps": content.metadata["llama.attention.layer_norm_rms_epsilon"].to_f32().unwrap(),
        "rope_theta": content.metadata["llama.rope.freq_base"].to_f32().unwrap(),
        "max_position_embeddings": 8192,
        "tie_word_embeddings": true,
        "vocab_size": 49152,
    });
    std::fs::write(dir.join("config.json"), config.to_string()).unwrap();
    ModelTokenizer::from_gguf(&content)
        .unwrap()
        .save_hf_dir(dir)
        .unwrap();
}

struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[tokio::test]
async fn a_safetensors_export_matches_its_gguf() {
    let dir = TempDir(std::env::temp_dir().join(format!("lachesis-hf-{}", std::process::id())));
    export_hf(&model_path(), &dir.0);

    let mut file = std::fs::File::open(model_path()).unwrap();
    let content = gguf_file::Content::read(&mut file).unwrap();
    // Dense on both sides: the export holds the GGUF's weights dequantized, so the two models
    // differ only in the row order of q and k and in their rotary layouts, and their logits only
    // by f32 rounding. A wrong permutation or rotation moves them by the distance between
    // neighbouring positions' logits, 2.6-8.5 on average (measured: at most 5e-5 apart).
    let gguf = Llama::from_gguf(&content, &mut file, 4096, Precision::F32).unwrap();
    let hf = Llama::from_safetensors(&dir.0, 4096, false).unwrap();
    let prompt = Tensor::new(
        &[1u32, 4093, 198, 2683, 314, 216, 34, 30, 34, 47][..],
        &Device::Cpu,
    )
    .unwrap()
    .unsqueeze(0)
    .unwrap();
    let logits = |model: &Llama| -> Vec<Vec<f32>> {
        let mut cache = model.new_cache();
        let all: Vec<f32> = model
            .forward(&prompt, 0, &mut cache, true)
            .unwrap()
            .flatten_all()
            .unwrap()
            .to_vec1()
            .unwrap();
        all.chunks(all.len() / 10).map(<[f32]>::to_vec).collect()
    };
    let (a, b) = (logits(&gguf), logits(&hf));
    for (position, (x, y)) in a.iter().zip(&b).enumerate() {
        let worst = x
            .iter()
            .zip(y)
            .map(|(p, q)| (p - q).abs())
            .fold(0f32, f32::max);
        assert!(
            worst < 1e-3,
            "position {position}: logits differ by up to {worst}"
        );
    }
    assert_eq!(
        a[0], b[0],
        "the first position has no rotation and must match exactly"
    );

    // The engine serves the directory as it serves the GGUF.
    let engine = Engine::load(&dir.0, EngineOptions::default()).unwrap();
    let reference = Engine::load(&model_path(), EngineOptions::default()).unwrap();
    let request = GenerateRequest {
        prompt: vec![
            1, 4093, 198, 2683, 314, 216, 34, 30, 34, 47, 2, 198, 1, 520, 9531, 198,
        ],
        params: SamplingParams {
            temperature: 0.0,
            max_tokens: 8,
            ..SamplingParams::default()
        },
    };
    let ours = engine.generate(request.clone()).await.unwrap();
    let theirs = reference.generate(request).await.unwrap();
    assert_eq!(ours.choices[0].tokens, theirs.choices[0].tokens);
}
