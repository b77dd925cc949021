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
