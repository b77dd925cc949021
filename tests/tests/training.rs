//! The GRPO trainer learns, end to end: a tiny random llama, an in-process environment posting to
//! the real trajectory API (in this process, on a fresh database), answered by the embedded
//! engine; the trainer pulls `/batch`, steps, swaps its weights into that engine, and reports to
//! the run's dashboard. `lachesis train demo --seed S` runs the same code.

use lachesis::trainer::demo::{DemoOptions, run_demo};
use lachesis_tests::TestApp;
use serde_json::Value;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpo_raises_the_tiny_models_mean_reward_from_chance_to_at_least_0_9() {
    let app = TestApp::spawn().await;
    let options = DemoOptions::new(2026);
    let report = run_demo(&app.base, &options, |step, reward| {
        eprintln!("step {step:>3} mean reward {reward:.3}");
    })
    .await
    .expect("the demo runs");

    let start = report.curve[0];
    let end = report.final_reward();
    assert!(
        start < 0.3,
        "a random model starts near chance (1/12), got {start}"
    );
    assert!(
        end >= 0.9,
        "after {} steps the mean reward is {end}",
        options.steps
    );
    assert_eq!(report.curve.len(), options.steps + 1);

    // Every step swapped weights into the engine, and the batches say which weights made them:
    // versions rise with the steps (at most the off-policy allowance behind).
    let versions = &report.batch_versions;
    assert_eq!(
        versions[0], 0,
        "the first batch comes from the initial weights"
    );
    let last = *versions.last().unwrap();
    assert!(
        last >= options.steps as i64 - 3,
        "last batch from weights v{last}"
    );
    assert!(versions.windows(2).all(|w| w[0] <= w[1]), "{versions:?}");

    // The dashboard has a point per step with the trainer's figures.
    let metrics = app.get(&format!("/api/runs/{}/metrics", options.run)).await;
    let points = metrics["trainer"].as_array().expect("trainer points");
    assert_eq!(points.len(), options.steps);
    let last_point = &points[points.len() - 1]["values"];
    for key in [
        "loss",
        "mean_ratio",
        "clip_fraction",
        "kl",
        "grad_norm",
        "lr",
        "logprob_alignment",
        "tokens_per_second",
        "sync_seconds",
        "weight_version",
    ] {
        assert!(last_point[key].is_number(), "{key} missing in {last_point}");
    }
    // Training and inference compute the same distribution: the rollouts' logprobs match the
    // trainer's on the weights that sampled them (exactly, bar staleness of one swap).
    let alignment: Vec<f64> = points
        .iter()
        .map(|p| {
            p["values"]["logprob_alignment"]
                .as_f64()
                .unwrap_or(f64::NAN)
        })
        .collect();
    assert!(alignment.iter().all(|a| a.is_finite()), "{alignment:?}");
    assert_eq!(
        last_point["weight_version"],
        Value::from(options.steps as f64)
    );
}

/// The trainer reads SmolLM2's GGUF (dequantized, q/k un-permuted to Hugging Face's layout) into
/// the same function the embedded engine computes from the file directly (interleaved rotary on
/// the permuted, quantized weights): same next-token ranking, logits within quantization noise.
#[test]
fn the_training_model_reads_smollm2_from_gguf_as_the_engine_does() {
    use candle_core::quantized::gguf_file;
    use candle_core::{Device, IndexOp, Tensor};
    use lachesis_inference::Precision;
    use lachesis_inference::llama::Llama;
    use lachesis_train::{TrainLlama, TrainMode};

    let path = lachesis_tests::model_path();
    let (config, tensors, tokenizer) = lachesis_train::gguf::load_gguf(&path).expect("loads");
    assert_eq!(config.vocab_size, tokenizer.vocab_size());
    let model = TrainLlama::from_tensors(config, tensors, TrainMode::Frozen).expect("builds");
    let ids = tokenizer.encode("The capital of France is").unwrap();
    let input = Tensor::new(ids.as_slice(), &Device::Cpu)
        .unwrap()
        .unsqueeze(0)
        .unwrap();
    let ours = model
        .forward(&input, true)
        .unwrap()
        .i((0, ids.len() - 1))
        .unwrap();

    let mut file = std::fs::File::open(&path).unwrap();
    let content = gguf_file::Content::read(&mut file).unwrap();
    let engine = Llama::from_gguf(&content, &mut file, 64, Precision::Stored).unwrap();
    let mut cache = engine.new_cache();
    let theirs = engine
        .forward(&input, 0, &mut cache, false)
        .unwrap()
        .i(0)
        .unwrap();

    let top = |t: &Tensor| -> Vec<u32> {
        let mut v: Vec<(usize, f32)> = t
            .to_vec1::<f32>()
            .unwrap()
            .into_iter()
            .enumerate()
            .collect();
        v.sort_by(|a, b| b.1.total_cmp(&a.1));
        v.iter().take(5).map(|(i, _)| *i as u32).collect()
    };
    assert_eq!(top(&ours)[0], top(&theirs)[0]);
    let diff: f32 = (&ours - &theirs)
        .unwrap()
        .abs()
        .unwrap()
        .max(0)
        .unwrap()
        .to_scalar()
        .unwrap();
    let scale: f32 = theirs.abs().unwrap().max(0).unwrap().to_scalar().unwrap();
    eprintln!(
        "max |Δlogit| {diff} of max |logit| {scale}; top-5 {:?} vs {:?}",
        top(&ours),
        top(&theirs)
    );
    assert!(
        diff < 0.05 * scale,
        "logits differ by {diff} (scale {scale})"
    );
}

/// The loop across processes: the server hosts `arithmetic`, answered by its embedded SmolLM2; a
/// `lachesis train run` process trains a LoRA on the server's batches and, after each step, has
/// the server replace its weights (`--sync reload`). The server then serves the trainer's weight
/// version, the dashboard charts it, and groups produced after a sync carry the new version.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trainer_process_moves_the_running_platform_to_its_weights() {
    use std::time::{Duration, Instant};

    let mut config = lachesis_tests::config_for(&lachesis_tests::fresh_database().await);
    config.model = Some(lachesis_tests::model_path());
    config.envs = vec![
        r#"arithmetic:{"group_size": 4, "max_tokens": 24, "seed": 5}"#
            .parse()
            .unwrap(),
    ];
    let app = TestApp::spawn_with(config).await;
    let scratch = std::env::temp_dir().join(format!("lachesis-loop-{}", std::process::id()));
    let output = lachesis_tests::trainer_command(&app.base, "reload", "1e-4", 2, &scratch)
        .output()
        .await
        .expect("the trainer runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "the trainer failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let _ = std::fs::remove_dir_all(&scratch);

    // The platform's model is the trainer's second sync.
    let models = app.get("/v1/models").await;
    assert_eq!(models["data"][0]["weight_version"], 2, "{models}");
    let metrics = app.get("/api/runs/default/metrics").await;
    let trainer = metrics["trainer"].as_array().expect("trainer points");
    assert_eq!(trainer.len(), 2, "{stdout}");
    assert_eq!(trainer[1]["values"]["weight_version"], 2.0);

    // The hosted environment keeps going on the new weights: its groups say so. The queue may be
    // full of groups made before the first sync (the environment pauses while it is), so the test
    // goes on pulling batches as the trainer would, and the environment makes new groups.
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        let _ = app.get("/batch").await;
        let metrics = app.get("/api/runs/default/metrics").await;
        let newest = metrics["groups"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|g| g["weight_version"].as_i64())
            .max();
        if newest.is_some_and(|v| v >= 1) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no group from the new weights: {newest:?}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}
