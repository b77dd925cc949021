//! Evaluate mode (atroposlib's `evaluate` subcommand and `evaluate_log`): run the environment's
//! evaluation once and write `{DIR}/metrics.json` in the lighteval-like layout nous-evals reads,
//! plus `{DIR}/samples.jsonl`, one sample per line.

use std::collections::BTreeMap;
use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::time::Instant;

use serde_json::{Map, Value, json};

use super::{EnvError, Environment, EvalOutcome};
use crate::policy::Policy;

#[derive(Debug, Clone, Default, PartialEq)]
pub struct EvaluateConfig {
    pub out_dir: PathBuf,
    /// `config_general.model_name`; the policy's name when `None`.
    pub model_name: Option<String>,
    /// The task in `atropos|{task}|0`; `{env}_eval` when `None`, as atroposlib names it.
    pub task_name: Option<String>,
    /// Merged over `{"max_new_tokens": ...}` from the environment's config.
    pub generation_parameters: Map<String, Value>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct EvaluateReport {
    pub metrics_path: PathBuf,
    pub samples_path: PathBuf,
    pub outcome: EvalOutcome,
    pub seconds: f64,
}

pub async fn evaluate(
    env: &dyn Environment,
    policy: &dyn Policy,
    config: &EvaluateConfig,
) -> Result<EvaluateReport, EnvError> {
    env.setup().await?;
    let started = Instant::now();
    let outcome = env.evaluate(policy).await?;
    let seconds = started.elapsed().as_secs_f64();

    let task = config
        .task_name
        .clone()
        .unwrap_or_else(|| format!("{}_eval", env.name()));
    let model = config.model_name.clone().unwrap_or_else(|| policy.name());
    let mut params = Map::new();
    params.insert("max_new_tokens".into(), json!(env.config().max_tokens));
    params.extend(config.generation_parameters.clone());
    let document = metrics_document(&task, &model, seconds, &params, &outcome.metrics);

    std::fs::create_dir_all(&config.out_dir)?;
    let metrics_path = config.out_dir.join("metrics.json");
    let pretty =
        serde_json::to_vec_pretty(&document).map_err(|e| EnvError::Other(e.to_string()))?;
    std::fs::write(&metrics_path, pretty)?;

    // Written even when empty, so the layout is the same for every environment.
    let samples_path = config.out_dir.join("samples.jsonl");
    let mut samples = BufWriter::new(std::fs::File::create(&samples_path)?);
    for sample in &outcome.samples {
        serde_json::to_writer(&mut samples, sample).map_err(|e| EnvError::Other(e.to_string()))?;
        samples.write_all(b"\n")?;
    }
    samples.flush()?;
    tracing::info!(path = %metrics_path.display(), ?outcome.metrics, "evaluation written");
    Ok(EvaluateReport {
        metrics_path,
        samples_path,
        outcome,
        seconds,
    })
}

/// `metrics.json` as atroposlib's `evaluate_log` writes it; note that it spells
/// `total_evaluation_time_seconds` as a string (`str(end - start)`), which readers expect.
pub fn metrics_document(
    task: &str,
    model_name: &str,
    seconds: f64,
    generation_parameters: &Map<String, Value>,
    metrics: &BTreeMap<String, f64>,
) -> Value {
    json!({
        "config_general": {
            "model_name": model_name,
            "total_evaluation_time_seconds": seconds.to_string(),
            "generation_parameters": generation_parameters,
        },
        "results": {
            format!("atropos|{task}|0"): metrics,
            "all": metrics,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::envs::arithmetic::baseline::BaselinePolicy;
    use crate::envs::{EnvOptions, TempDir, build};

    #[tokio::test]
    async fn evaluate_writes_metrics_json_and_samples_jsonl_in_atropos_layout() {
        let dir = TempDir::new("evaluate");
        let env = build("arithmetic", &EnvOptions::default()).unwrap();
        let policy = BaselinePolicy::new(1.0, 9, None);
        let config = EvaluateConfig {
            out_dir: dir.0.join("eval"),
            model_name: Some("smollm2-135m".into()),
            generation_parameters: Map::from_iter([("temperature".into(), json!(0.0))]),
            ..EvaluateConfig::default()
        };
        let report = evaluate(env.as_ref(), &policy, &config)
            .await
            .expect("evaluates");

        let metrics: Value =
            serde_json::from_slice(&std::fs::read(&report.metrics_path).unwrap()).unwrap();
        let general = &metrics["config_general"];
        assert_eq!(general["model_name"], "smollm2-135m");
        assert!(general["total_evaluation_time_seconds"].is_string());
        assert_eq!(general["generation_parameters"]["temperature"], 0.0);
        assert_eq!(general["generation_parameters"]["max_new_tokens"], 96);
        let task = &metrics["results"]["atropos|arithmetic_eval|0"];
        assert_eq!(task["eval/percent_correct"], 1.0);
        assert_eq!(task, &metrics["results"]["all"]);

        let samples = std::fs::read_to_string(&report.samples_path).unwrap();
        assert_eq!(samples.lines().count(), 32);
        let first: Value = serde_json::from_str(samples.lines().next().unwrap()).unwrap();
        assert_eq!(first["correct"], true);
    }

    #[test]
    fn the_task_key_follows_atropos_naming() {
        let metrics = BTreeMap::from([("acc".to_string(), 0.5)]);
        let doc = metrics_document("gsm8k_eval", "m", 1.5, &Map::new(), &metrics);
        assert_eq!(doc["results"]["atropos|gsm8k_eval|0"]["acc"], 0.5);
        assert_eq!(
            doc["config_general"]["total_evaluation_time_seconds"],
            "1.5"
        );
    }
}
