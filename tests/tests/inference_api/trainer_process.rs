//! The LoRA loop across processes: a `lachesis train run --sync vllm-lora` process trains on the
//! server's batches and hot-loads each adapter through `/v1/load_lora_adapter`, as it would into
//! vLLM. The server then answers the adapter's name with the trainer's last adapter: its weight
//! version, and logprobs that the trainer's model, rebuilt from the adapter the process wrote,
//! reproduces.

use lachesis_tests::{TestApp, config_for, fresh_database, model_path};

use super::weights::{EXACT_GAP, lora_trainer, served_logprobs, trainer_logprobs};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trainer_process_hot_loads_its_adapter_into_the_running_server() {
    let mut config = config_for(&fresh_database().await);
    config.model = Some(model_path());
    config.envs = vec![
        r#"arithmetic:{"group_size": 4, "max_tokens": 24, "seed": 5}"#
            .parse()
            .unwrap(),
    ];
    let app = TestApp::spawn_with(config).await;
    let scratch = std::env::temp_dir().join(format!("lachesis-lora-loop-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&scratch);
    // A large learning rate, so two steps move the adapter measurably.
    let output = lachesis_tests::trainer_command(&app.base, "vllm-lora", "0.03", 2, &scratch)
        .args(["--vllm-url", &app.base, "--lora-name", "policy"])
        .output()
        .await
        .expect("the trainer runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "the trainer failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );

    // Two syncs: the adapter's second load is what its name answers with.
    let models = app.get("/v1/models").await;
    let adapter = models["data"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|m| m["id"] == "policy")
        .unwrap_or_else(|| panic!("the adapter is listed: {models}"))
        .clone();
    assert_eq!(adapter["weight_version"], 2, "{models}");

    // The served adapter is the one the process wrote last, and it moved from the base.
    let (trainer, tokenizer) = lora_trainer();
    let tokens = tokenizer
        .encode("The capital of France is Paris, and the capital of Italy is Rome.")
        .unwrap();
    let base = trainer_logprobs(&trainer, &tokens, false);
    lachesis_train::checkpoint::load_adapter(&trainer.model, &scratch.join("adapter_sync"))
        .expect("the trainer's last adapter reads back");
    let adapted = trainer_logprobs(&trainer, &tokens, true);
    let (served, version) = served_logprobs(&app, Some("policy"), &tokens).await;
    assert_eq!(version, 2);
    let (served_base, base_version) = served_logprobs(&app, None, &tokens).await;
    assert_eq!(base_version, 0, "any other name is still the base model");
    // The served answer is the trainer's adapter, up to float summation order, and far from
    // the base.
    let mean_gap = |a: &[f32], b: &[f32]| {
        a.iter().zip(b).map(|(x, y)| (x - y).abs()).sum::<f32>() / a.len() as f32
    };
    let to_adapter = mean_gap(&served, &adapted);
    let to_base = mean_gap(&served, &base);
    eprintln!(
        "served against the adapter {to_adapter:.6}, against the base {to_base:.4}, base served {:.4}",
        mean_gap(&served_base, &base)
    );
    assert!(to_adapter < EXACT_GAP, "{to_adapter}");
    assert!(
        to_base > 0.3,
        "two steps at this rate move the adapter: {to_base} from the base"
    );
    let _ = std::fs::remove_dir_all(&scratch);
}
