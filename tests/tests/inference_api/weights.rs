//! A trainer's weights reach the running server through the requests trainers send to vLLM
//! (`/v1/load_lora_adapter`, `/v1/unload_lora_adapter`) and SGLang (`/update_weights_from_disk`):
//! the trainer's own sync code against the real server, then rollouts through the vLLM policy,
//! whose tokens' logprobs are recomputed by the trainer's model.

use std::path::PathBuf;

use candle_core::{Device, IndexOp, Tensor};
use lachesis::policy::{Policy, PolicyRequest, ServerPool, ServerPoolConfig, VllmPolicy};
use lachesis::trainer::sync::{RemoteReload, VllmLora, WeightSync};
use lachesis_inference::ChatMessage;
use lachesis_tests::{TestApp, config_for, fresh_database, model_path};
use lachesis_train::{LoraConfig, TrainConfig, TrainLlama, TrainMode, Trainer};
use serde_json::{Value, json};

use super::app_with_model;

/// SmolLM2 as the trainer reads it (dequantized), with LoRA r=8 on q and v.
pub(super) fn lora_trainer() -> (Trainer, lachesis_inference::ModelTokenizer) {
    let (config, tensors, tokenizer) =
        lachesis_train::gguf::load_gguf(&model_path()).expect("the trainer reads the GGUF");
    let mode = TrainMode::Lora(LoraConfig {
        rank: 8,
        alpha: 16.0,
        targets: vec!["q_proj".into(), "v_proj".into()],
        seed: 11,
    });
    let model = TrainLlama::from_tensors(config, tensors, mode).expect("builds");
    let trainer = Trainer::new(
        model,
        TrainConfig {
            loss: Default::default(),
            optim: Default::default(),
            micro_batch: 1,
        },
    )
    .expect("a trainer");
    (trainer, tokenizer)
}

/// Moves every LoRA B matrix (zero at initialisation, so the adapter starts as the identity) to
/// fixed pseudo-random values: what some steps of training would do, reproducibly.
pub(super) fn perturb(trainer: &Trainer, salt: f32) {
    perturb_by(trainer, salt, 0.25);
}

/// Sets every LoRA B matrix to pseudo-random values between `-magnitude` and `magnitude`.
pub(super) fn perturb_by(trainer: &Trainer, salt: f32, magnitude: f32) {
    for (name, var) in trainer.model.trainable() {
        if !name.contains("lora_B") {
            continue;
        }
        let count: usize = var.dims().iter().product();
        let values: Vec<f32> = (0..count)
            .map(|i| ((i as f32 * 12.9898 + salt).sin() * 43758.547).fract() * magnitude)
            .collect();
        let tensor = Tensor::from_vec(values, var.dims(), &Device::Cpu).unwrap();
        var.set(&tensor).unwrap();
    }
}

/// Each token's logprob given the tokens before it, by the trainer's model.
pub(super) fn trainer_logprobs(trainer: &Trainer, tokens: &[u32], adapters: bool) -> Vec<f32> {
    let input = Tensor::new(tokens, &Device::Cpu)
        .unwrap()
        .unsqueeze(0)
        .unwrap();
    let rows: Vec<Vec<f32>> = trainer
        .model
        .forward(&input, adapters)
        .and_then(|logits| logits.i(0)?.to_vec2())
        .unwrap();
    (1..tokens.len())
        .map(|i| {
            let row = &rows[i - 1];
            let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max) as f64;
            let sum: f64 = row.iter().map(|v| (*v as f64 - max).exp()).sum();
            (row[tokens[i] as usize] as f64 - max - sum.ln()) as f32
        })
        .collect()
}

/// The server's logprob of each prompt token after the first, from `/generate`.
pub(super) async fn served_logprobs(
    app: &TestApp,
    model: Option<&str>,
    tokens: &[u32],
) -> (Vec<f32>, i64) {
    let mut body = json!({
        "prompt": {"prompt_token_ids": tokens},
        "max_tokens": 1,
        "temperature": 0.0,
        "prompt_logprobs": 0,
    });
    if let Some(model) = model {
        body["model"] = json!(model);
    }
    let answer = app.post("/generate", &body).await;
    let entries = answer["prompt_logprobs"]
        .as_array()
        .expect("prompt logprobs");
    let logprobs = entries[1..]
        .iter()
        .zip(&tokens[1..])
        .map(|(entry, token)| {
            entry[token.to_string()]
                .as_f64()
                .expect("the token's logprob") as f32
        })
        .collect();
    (
        logprobs,
        answer["weight_version"].as_i64().expect("a version"),
    )
}

fn mean_gap(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter().zip(b).map(|(x, y)| (x - y).abs()).sum::<f32>() / a.len() as f32
}

/// The LoRA trainer, a sentence's tokens, and the trainer's base's logprobs of them.
fn trainer_and_sentence() -> (
    Trainer,
    lachesis_inference::ModelTokenizer,
    Vec<u32>,
    Vec<f32>,
) {
    let (trainer, tokenizer) = lora_trainer();
    let tokens = tokenizer
        .encode("The capital of France is Paris, and the capital of Italy is Rome.")
        .unwrap();
    let base = trainer_logprobs(&trainer, &tokens, false);
    (trainer, tokenizer, tokens, base)
}

/// How far, in mean nats a token, served logprobs may be from the trainer's own. A trainer's
/// weights are served in f32 (adapters beside an f32 copy of the base, full reloads as sent), so
/// only float summation order separates them.
pub(super) const EXACT_GAP: f32 = 1e-3;
/// Under `--inference-trained-precision q8_0` they are served as the engine serves its base: Q8_0
/// weights and activations against the trainer's f32, about 0.07-0.10 nats a token on SmolLM2.
const QUANTIZED_GAP: f32 = 0.15;

/// The served weights are the trainer's, within `bound`, and far from `other`.
fn assert_serves(served: &[f32], trainer: &[f32], other: &[f32], bound: f32, what: &str) {
    let gap = mean_gap(served, trainer);
    let moved = mean_gap(trainer, other);
    eprintln!("{what}: |served - trainer| {gap:.6}, |trainer - previous| {moved:.4}");
    assert!(
        moved > 0.3,
        "{what}: the new weights barely differ ({moved})"
    );
    assert!(
        gap < bound,
        "{what}: the server is {gap} away from the trainer"
    );
    assert!(gap * 3.0 < moved, "{what}: {gap} vs {moved}");
}

pub(super) fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("lachesis-weights-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn vllm_policy(app: &TestApp, tokenizer: &lachesis_inference::ModelTokenizer) -> VllmPolicy {
    let pool = ServerPool::new(ServerPoolConfig {
        base_urls: vec![app.base.clone()],
        ..ServerPoolConfig::default()
    })
    .expect("a pool");
    VllmPolicy::new(pool, std::sync::Arc::new(tokenizer.clone()), "smollm2")
}

fn question() -> PolicyRequest {
    PolicyRequest {
        messages: vec![ChatMessage::new("user", "Name three colours.")],
        n: 2,
        max_tokens: 16,
        // Greedy, so the test sees the same tokens every run.
        temperature: 0.0,
        top_p: 1.0,
        stop: Vec::new(),
        tools: Vec::new(),
    }
}

/// The completion's logprobs in a rollout, and the trainer's for the same tokens.
fn rollout_gap(trainer: &Trainer, rollout: &lachesis::policy::Rollout, adapters: bool) -> f32 {
    let ours = trainer_logprobs(trainer, &rollout.tokens, adapters);
    let (mut served, mut recomputed) = (Vec::new(), Vec::new());
    for (i, mask) in rollout.masks.iter().enumerate().skip(1) {
        if *mask >= 0 {
            served.push(rollout.inference_logprobs[i] as f32);
            recomputed.push(ours[i - 1]);
        }
    }
    assert!(!served.is_empty(), "the rollout generated nothing");
    mean_gap(&served, &recomputed)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trainers_adapter_and_full_weights_reach_the_server_and_its_rollouts() {
    let app = app_with_model().await;
    let (trainer, tokenizer, tokens, base) = trainer_and_sentence();
    let (served_base, v0) = served_logprobs(&app, None, &tokens).await;
    assert_eq!(v0, 0, "the base as loaded");
    let gap = mean_gap(&served_base, &base);
    eprintln!("base: |served - trainer| {gap:.4} (Q4_1 against its f32 dequantization)");
    assert!(gap < 0.1, "{gap}");

    // LoRA through vLLM's protocol: the adapter answers to its name, the base to any other.
    perturb(&trainer, 1.0);
    let dir = scratch("lora");
    let mut sync = WeightSync::VllmLora(VllmLora::new(&app.base, "policy", None));
    let version = sync
        .sync(&trainer, None, &dir, "smollm2", 1)
        .await
        .expect("the adapter loads");
    assert_eq!(version, 1);
    let adapted = trainer_logprobs(&trainer, &tokens, true);
    let (served, v1) = served_logprobs(&app, Some("policy"), &tokens).await;
    assert_eq!(v1, 1);
    assert_serves(&served, &adapted, &base, EXACT_GAP, "adapter v1");
    let (still_base, v) = served_logprobs(&app, Some("smollm2"), &tokens).await;
    assert_eq!(v, 0);
    assert!(
        mean_gap(&still_base, &served_base) < 1e-4,
        "the base is untouched"
    );
    let models = app.get("/v1/models").await;
    let listed = models["data"].as_array().unwrap();
    let entry = listed.iter().find(|m| m["id"] == "policy").expect("listed");
    assert_eq!(entry["parent"], listed[0]["id"]);
    assert_eq!(entry["weight_version"], 1);

    // The next sync unloads and reloads under the same name: version 2, the newer weights.
    perturb(&trainer, 2.0);
    let version = sync.sync(&trainer, None, &dir, "smollm2", 2).await.unwrap();
    assert_eq!(version, 2);
    let readapted = trainer_logprobs(&trainer, &tokens, true);
    let (served, v2) = served_logprobs(&app, Some("policy"), &tokens).await;
    assert_eq!(v2, 2);
    assert_serves(&served, &readapted, &adapted, EXACT_GAP, "adapter v2");

    // Rollouts through the vLLM policy: the tokens it sampled carry the adapter's logprobs, and
    // the policy reports the version that answered.
    let policy = vllm_policy(&app, &tokenizer).with_adapter("policy");
    assert_eq!(policy.weight_version(), None, "nothing seen yet");
    let rollouts = policy.complete(question()).await.expect("rollouts");
    assert_eq!(rollouts.len(), 2);
    assert_eq!(policy.weight_version(), Some(2));
    for rollout in &rollouts {
        let gap = rollout_gap(&trainer, rollout, true);
        let from_base = rollout_gap(&trainer, rollout, false);
        eprintln!(
            "rollout: {gap:.6} from the trainer's adapted model, {from_base:.4} from its base"
        );
        assert!(
            gap < EXACT_GAP && gap * 2.0 < from_base,
            "{gap} vs {from_base}"
        );
    }

    // A full reload replaces the base: every request not naming the adapter moves to it.
    let full = scratch("full");
    let mut reload = WeightSync::Reload(RemoteReload::new(&app.base, None));
    let version = reload
        .sync(&trainer, Some(&tokenizer), &full, "smollm2", 3)
        .await
        .expect("the full weights load");
    assert_eq!(version, 1, "the base's first swap");
    let (served, v) = served_logprobs(&app, None, &tokens).await;
    assert_eq!(v, 1);
    assert_serves(&served, &readapted, &base, EXACT_GAP, "full reload");
    let base_policy = vllm_policy(&app, &tokenizer);
    let rollouts = base_policy.complete(question()).await.expect("rollouts");
    assert_eq!(base_policy.weight_version(), Some(1));
    let gap = rollout_gap(&trainer, &rollouts[0], true);
    let from_base = rollout_gap(&trainer, &rollouts[0], false);
    assert!(
        gap < EXACT_GAP && gap * 2.0 < from_base,
        "{gap} vs {from_base}"
    );

    // Unloading leaves the base (now the reloaded weights) answering for the adapter's name.
    let (status, _) = call(
        &app,
        "/v1/unload_lora_adapter",
        &json!({"lora_name": "policy"}),
        None,
    )
    .await;
    assert_eq!(status, 200);
    let (status, body) = call(
        &app,
        "/v1/unload_lora_adapter",
        &json!({"lora_name": "policy"}),
        None,
    )
    .await;
    assert_eq!(status, 404, "{body}");
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&full);
}

/// `--inference-trained-precision q8_0`: an adapter and a full reload are still served, within
/// the base's own quantization noise of the trainer's model rather than exactly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_q8_0_base_a_trainers_weights_are_served_within_quantization_noise() {
    let mut config = config_for(&fresh_database().await);
    config.model = Some(model_path());
    config.inference_limits.trained_precision = lachesis::weights::load::TrainedPrecision::Q8_0;
    let app = TestApp::spawn_with(config).await;
    let (trainer, tokenizer, tokens, base) = trainer_and_sentence();
    perturb(&trainer, 1.0);
    let dir = scratch("q8");
    let mut sync = WeightSync::VllmLora(VllmLora::new(&app.base, "policy", None));
    assert_eq!(
        sync.sync(&trainer, None, &dir, "smollm2", 1).await.unwrap(),
        1
    );
    let adapted = trainer_logprobs(&trainer, &tokens, true);
    let (served, _) = served_logprobs(&app, Some("policy"), &tokens).await;
    assert_serves(&served, &adapted, &base, QUANTIZED_GAP, "adapter on Q8_0");
    // Quantized, it is not the exact copy the f32 base gives.
    assert!(mean_gap(&served, &adapted) > EXACT_GAP);
    let full = scratch("q8-full");
    let mut reload = WeightSync::Reload(RemoteReload::new(&app.base, None));
    let version = reload
        .sync(&trainer, Some(&tokenizer), &full, "smollm2", 2)
        .await
        .expect("the full weights load");
    assert_eq!(version, 1);
    let (served, _) = served_logprobs(&app, None, &tokens).await;
    assert_serves(
        &served,
        &adapted,
        &base,
        QUANTIZED_GAP,
        "full reload to Q8_0",
    );
    assert!(mean_gap(&served, &adapted) > EXACT_GAP);
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&full);
}

/// `--inference-base-precision f32`: the server's own model, before any trainer's weights reach
/// it, is served with the logprobs the trainer computes from the same file (quantized, as by
/// default, they are 0.07 nats a token apart: the first test above).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dense_base_is_served_with_the_trainers_own_logprobs() {
    let mut config = config_for(&fresh_database().await);
    config.model = Some(model_path());
    config.inference_limits.base_precision = lachesis_inference::Precision::F32;
    let app = TestApp::spawn_with(config).await;
    let (_, _, tokens, base) = trainer_and_sentence();
    let (served, version) = served_logprobs(&app, None, &tokens).await;
    assert_eq!(version, 0, "the base as loaded");
    let gap = mean_gap(&served, &base);
    eprintln!("dense base: |served - trainer| {gap:.6}");
    assert!(gap < EXACT_GAP, "{gap}");
}

pub(super) async fn call(
    app: &TestApp,
    path: &str,
    body: &Value,
    bearer: Option<&str>,
) -> (u16, Value) {
    let mut request = app.client.post(app.url(path)).json(body);
    if let Some(token) = bearer {
        request = request.bearer_auth(token);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}
