//! The training model against the inference model, gradient flow to every variable, and
//! checkpoints that load back.

use std::collections::HashMap;
use std::path::PathBuf;

use candle_core::{DType, Device, Tensor};
use lachesis_inference::llama::{Llama, LowRank};

use crate::checkpoint::{self, TrainerState};
use crate::tiny::{tiny_config, tiny_tokenizer};
use crate::{
    LlamaConfig, LoraConfig, LossConfig, OptimConfig, TrainConfig, TrainLlama, TrainMode, TrainRow,
    Trainer, inference_model,
};

fn tokens() -> Tensor {
    Tensor::from_slice(&[3u32, 10, 7, 1, 4, 10, 2, 2], (2, 4), &Device::Cpu).unwrap()
}

fn max_diff(a: &Tensor, b: &Tensor) -> f32 {
    (a - b)
        .unwrap()
        .abs()
        .unwrap()
        .flatten_all()
        .unwrap()
        .max(0)
        .unwrap()
        .to_scalar()
        .unwrap()
}

fn inference_logits(model: &Llama, tokens: &Tensor) -> Tensor {
    let mut cache = model.new_cache();
    model.forward(tokens, 0, &mut cache, true).unwrap()
}

fn lora(targets: &[&str]) -> TrainMode {
    TrainMode::Lora(LoraConfig {
        rank: 4,
        alpha: 8.0,
        targets: targets.iter().map(|t| t.to_string()).collect(),
        seed: 5,
    })
}

/// Prompt "d=", answer one digit; half the answers rewarded.
fn rows() -> Vec<TrainRow> {
    (0..8u32)
        .map(|i| TrainRow {
            tokens: vec![i % 10, 10, (i * 3) % 10],
            trained: vec![false, false, true],
            inference_logprobs: None,
            advantages: vec![if i % 2 == 0 { 1.0 } else { -1.0 }; 3],
            temperature: 1.0,
            score: (i % 2) as f64,
        })
        .collect()
}

fn trainer(model: TrainLlama) -> Trainer {
    let config = TrainConfig {
        loss: LossConfig::default(),
        optim: OptimConfig {
            lr: 1e-2,
            ..OptimConfig::default()
        },
        micro_batch: 3,
    };
    Trainer::new(model, config).unwrap()
}

fn snapshot(model: &TrainLlama) -> Vec<Tensor> {
    model
        .trainable()
        .iter()
        .map(|(_, v)| v.as_tensor().copy().unwrap())
        .collect()
}

#[test]
fn training_logits_match_the_inference_model_on_the_same_weights() {
    for tied in [false, true] {
        let config = LlamaConfig {
            tie_word_embeddings: tied,
            ..tiny_config()
        };
        let model = TrainLlama::random(config, 1, TrainMode::Full).unwrap();
        let train = model.forward(&tokens(), true).unwrap();
        let served = inference_logits(&inference_model(&model, false).unwrap(), &tokens());
        assert_eq!(train.dims(), served.dims());
        let diff = max_diff(&train, &served);
        assert!(diff < 1e-5, "tied {tied}: logits differ by {diff}");
    }
}

#[test]
fn a_lora_models_inference_copy_applies_each_adapter_beside_its_base_matrix() {
    let model =
        TrainLlama::random(tiny_config(), 3, lora(&["q_proj", "v_proj", "down_proj"])).unwrap();
    // B starts at zero; values of either sign make every adapter change the logits.
    for (k, (_, var)) in model.trainable().iter().enumerate() {
        let values: Vec<f32> = (0..var.elem_count())
            .map(|j| ((j * 7 + k * 13) % 17) as f32 / 17.0 - 0.5)
            .collect();
        var.set(&Tensor::from_vec(values, var.shape(), &Device::Cpu).unwrap())
            .unwrap();
    }
    let (base, adapters) = model.served_parts().unwrap();
    assert_eq!(adapters.len(), 3 * tiny_config().num_hidden_layers);
    assert!(base.keys().all(|name| !name.contains("lora")));
    let trained = model.forward(&tokens(), true).unwrap();
    let served = inference_logits(&inference_model(&model, false).unwrap(), &tokens());
    let diff = max_diff(&trained, &served);
    assert!(diff < 1e-5, "logits differ by {diff}");
    let without = model.forward(&tokens(), false).unwrap();
    assert!(
        max_diff(&trained, &without) > 1e-2,
        "the adapters moved nothing"
    );
}

#[test]
fn an_adapter_that_does_not_fit_the_served_model_is_refused() {
    let model = TrainLlama::random(tiny_config(), 3, lora(&["q_proj"])).unwrap();
    let config = serde_json::to_vec(&model.config.to_hf_json()).unwrap();
    let build = |adapters: HashMap<String, LowRank>| {
        let (base, _) = model.served_parts().unwrap();
        Llama::from_hf_tensors(&config, base, adapters, 64, false)
            .err()
            .map(|e| e.to_string())
    };
    let h = tiny_config().hidden_size;
    let pair = |input: usize, out: usize| {
        let a = Tensor::zeros((2, input), DType::F32, &Device::Cpu).unwrap();
        let b = Tensor::zeros((out, 2), DType::F32, &Device::Cpu).unwrap();
        LowRank::new(&a, &b, 1.0).unwrap()
    };
    let q = "model.layers.0.self_attn.q_proj.weight".to_owned();
    assert_eq!(build(HashMap::from([(q.clone(), pair(h, h))])), None);
    let wrong_shape = build(HashMap::from([(q, pair(h + 1, h))])).expect("refused");
    assert!(wrong_shape.contains("does not fit"), "{wrong_shape}");
    let unknown = build(HashMap::from([(
        "model.layers.99.self_attn.q_proj.weight".to_owned(),
        pair(h, h),
    )]))
    .expect("refused");
    assert!(unknown.contains("layers.99"), "{unknown}");
    let a = Tensor::zeros((2, h), DType::F32, &Device::Cpu).unwrap();
    let b = Tensor::zeros((h, 3), DType::F32, &Device::Cpu).unwrap();
    assert!(
        LowRank::new(&a, &b, 1.0).is_err(),
        "ranks of A and B differ"
    );
}

#[test]
fn every_variable_of_a_full_model_gets_a_gradient_and_changes_in_two_steps() {
    let mut t = trainer(TrainLlama::random(tiny_config(), 2, TrainMode::Full).unwrap());
    let before = snapshot(&t.model);
    let names: Vec<String> = t.model.trainable().iter().map(|(n, _)| n.clone()).collect();
    // 2 layers × 9 + embeddings, final norm, lm_head.
    assert_eq!(names.len(), 21);
    let mut seen = vec![false; names.len()];
    for _ in 0..2 {
        let report = t.step(&rows()).unwrap();
        assert!(report.grad_norm > 0.0);
        assert_eq!(report.micro_batches, 3);
        for (s, g) in seen.iter_mut().zip(t.last_grad_norms()) {
            *s |= *g > 0.0;
        }
    }
    for ((name, seen), (old, new)) in names
        .iter()
        .zip(seen)
        .zip(before.iter().zip(snapshot(&t.model)))
    {
        assert!(seen, "{name} never got a gradient");
        assert!(max_diff(old, &new) > 0.0, "{name} never changed");
    }
}

#[test]
fn lora_a_waits_one_step_for_b_then_every_adapter_trains_and_the_base_stays() {
    let targets = [
        "q_proj",
        "k_proj",
        "v_proj",
        "o_proj",
        "gate_proj",
        "up_proj",
        "down_proj",
    ];
    let model = TrainLlama::random(tiny_config(), 3, lora(&targets)).unwrap();
    let base = model.hf_tensors().unwrap();
    let mut t = trainer(model);
    let names: Vec<String> = t.model.trainable().iter().map(|(n, _)| n.clone()).collect();
    assert_eq!(names.len(), 2 * 7 * 2);
    let before = snapshot(&t.model);
    t.step(&rows()).unwrap();
    for (name, g) in names.iter().zip(t.last_grad_norms()) {
        // B starts at zero, so nothing flows back to A at the first step.
        let expect_zero = name.contains("lora_A");
        assert_eq!(*g == 0.0, expect_zero, "{name}: first-step gradient {g}");
    }
    t.step(&rows()).unwrap();
    for ((name, g), (old, new)) in names
        .iter()
        .zip(t.last_grad_norms())
        .zip(before.iter().zip(snapshot(&t.model)))
    {
        assert!(*g > 0.0, "{name} got no gradient at the second step");
        assert!(max_diff(old, &new) > 0.0, "{name} never changed");
    }
    // The frozen base is untouched: with adapters off the model is the base.
    let frozen = TrainLlama::from_tensors(tiny_config(), base, TrainMode::Frozen).unwrap();
    let diff = max_diff(
        &t.model.forward(&tokens(), false).unwrap(),
        &frozen.forward(&tokens(), true).unwrap(),
    );
    assert_eq!(diff, 0.0);
}

struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> Self {
        let p = std::env::temp_dir().join(format!(
            "lachesis-train-{tag}-{}-{:x}",
            std::process::id(),
            rand::random::<u64>()
        ));
        std::fs::create_dir_all(&p).unwrap();
        Self(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn state() -> TrainerState {
    TrainerState {
        step: 2,
        weight_version: 2,
    }
}

#[test]
fn a_lora_checkpoint_is_peft_shaped_and_loads_back_to_the_same_logits() {
    let dir = TempDir::new("lora");
    let base = TrainLlama::random(tiny_config(), 4, TrainMode::Full)
        .unwrap()
        .hf_tensors()
        .unwrap();
    let mode = lora(&["q_proj", "v_proj"]);
    let mut t =
        trainer(TrainLlama::from_tensors(tiny_config(), base.clone(), mode.clone()).unwrap());
    t.step(&rows()).unwrap();
    t.step(&rows()).unwrap();
    let path = dir.0.join("adapter_step_2");
    checkpoint::save(&path, &t, None, "tiny", &state()).unwrap();
    let config: serde_json::Value =
        serde_json::from_slice(&std::fs::read(path.join("adapter_config.json")).unwrap()).unwrap();
    assert_eq!(config["peft_type"], "LORA");
    assert_eq!(config["r"], 4);
    assert_eq!(
        config["target_modules"],
        serde_json::json!(["q_proj", "v_proj"])
    );
    let saved: HashMap<String, Tensor> =
        candle_core::safetensors::load(path.join("adapter_model.safetensors"), &Device::Cpu)
            .unwrap();
    assert!(saved.contains_key("base_model.model.model.layers.1.self_attn.v_proj.lora_B.weight"));
    assert_eq!(saved.len(), 2 * 2 * 2);

    let TrainMode::Lora(mut other_seed) = mode else {
        unreachable!()
    };
    other_seed.seed = 99;
    let loaded =
        TrainLlama::from_tensors(tiny_config(), base, TrainMode::Lora(other_seed)).unwrap();
    assert!(
        max_diff(
            &loaded.forward(&tokens(), true).unwrap(),
            &t.model.forward(&tokens(), true).unwrap()
        ) > 0.0
    );
    checkpoint::load_adapter(&loaded, &path).unwrap();
    let diff = max_diff(
        &loaded.forward(&tokens(), true).unwrap(),
        &t.model.forward(&tokens(), true).unwrap(),
    );
    assert_eq!(diff, 0.0);
    // A mismatched adapter is a typed error.
    let wrong = TrainLlama::from_tensors(
        tiny_config(),
        TrainLlama::random(tiny_config(), 4, TrainMode::Full)
            .unwrap()
            .hf_tensors()
            .unwrap(),
        lora(&["q_proj", "k_proj"]),
    )
    .unwrap();
    assert!(checkpoint::load_adapter(&wrong, &path).is_err());
}

#[test]
fn a_full_checkpoint_loads_in_the_embedded_engine_and_resumes_exactly() {
    let dir = TempDir::new("full");
    let mut a = trainer(TrainLlama::random(tiny_config(), 6, TrainMode::Full).unwrap());
    a.step(&rows()).unwrap();
    a.step(&rows()).unwrap();
    let path = dir.0.join("step_2");
    let tokenizer = tiny_tokenizer().unwrap();
    checkpoint::save(&path, &a, Some(&tokenizer), "tiny", &state()).unwrap();

    // The inference side reads it as any Hugging Face llama folder.
    let served = Llama::from_safetensors(&path, 64, false).unwrap();
    let diff = max_diff(
        &inference_logits(&served, &tokens()),
        &a.model.forward(&tokens(), true).unwrap(),
    );
    assert!(diff < 1e-5, "{diff}");
    let engine = lachesis_inference::Engine::load(&path, Default::default()).unwrap();
    assert_eq!(engine.info().vocab_size, 12);
    assert_eq!(engine.tokenizer().encode("5=").unwrap(), [5, 10]);

    // Resuming from the checkpoint continues exactly where the first trainer is.
    let mut b = trainer(checkpoint::load_hf(&path, TrainMode::Full).unwrap());
    let resumed = checkpoint::resume(&mut b, &path).unwrap();
    assert_eq!(resumed, state());
    a.step(&rows()).unwrap();
    b.step(&rows()).unwrap();
    for ((name, x), (_, y)) in a.model.trainable().iter().zip(b.model.trainable()) {
        assert!(
            max_diff(x.as_tensor(), y.as_tensor()) < 1e-6,
            "{name} diverged after resuming"
        );
    }
    assert!(checkpoint::load_hf(&dir.0.join("missing"), TrainMode::Full).is_err());
}

#[test]
fn the_engine_swaps_in_new_weights_and_refuses_ones_that_do_not_fit_its_tokenizer() {
    let model = TrainLlama::random(tiny_config(), 7, TrainMode::Full).unwrap();
    let engine = lachesis_inference::Engine::from_model(
        inference_model(&model, false).unwrap(),
        tiny_tokenizer().unwrap(),
        "tiny".into(),
        Default::default(),
    )
    .unwrap();
    assert_eq!(engine.weight_version(), 0);
    let next = TrainLlama::random(tiny_config(), 8, TrainMode::Full).unwrap();
    assert_eq!(
        engine
            .swap_model(inference_model(&next, false).unwrap())
            .unwrap(),
        1
    );
    let small = LlamaConfig {
        vocab_size: 8,
        ..tiny_config()
    };
    let wrong = TrainLlama::random(small, 9, TrainMode::Full).unwrap();
    assert!(
        engine
            .swap_model(inference_model(&wrong, false).unwrap())
            .is_err()
    );
    assert_eq!(engine.weight_version(), 1);
}
