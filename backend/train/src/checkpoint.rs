//! Checkpoints a trainer can resume from and other tools can load.
//!
//! - Full fine-tune: Hugging Face's layout, `config.json` + `model.safetensors` (+ the tokenizer
//!   files when known), loadable by `transformers`, vLLM (`vllm serve DIR`) and our engine.
//! - LoRA: PEFT's layout, `adapter_config.json` + `adapter_model.safetensors` under PEFT's
//!   tensor names, loadable by PEFT and by vLLM's `/v1/load_lora_adapter`.
//!
//! Both add `trainer_state.json` (step, weight version) and `optimizer.safetensors` (AdamW's
//! moments) for resuming. A checkpoint is written to a sibling folder and renamed into place, so
//! a crash never leaves a half-written checkpoint under the final name.

use std::collections::HashMap;
use std::path::Path;

use candle_core::{Device, Tensor};
use lachesis_inference::ModelTokenizer;
use serde::{Deserialize, Serialize};

use crate::TrainError;
use crate::config::LlamaConfig;
use crate::model::{TrainLlama, TrainMode};
use crate::trainer::Trainer;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrainerState {
    pub step: usize,
    pub weight_version: i64,
}

fn io(context: &str, path: &Path) -> impl Fn(std::io::Error) -> TrainError {
    let what = format!("{context} {}", path.display());
    move |e| TrainError::Checkpoint(format!("{what}: {e}"))
}

fn write_json(path: &Path, value: &serde_json::Value) -> Result<(), TrainError> {
    let body = serde_json::to_vec_pretty(value).expect("JSON values serialise");
    std::fs::write(path, body).map_err(io("writing", path))
}

/// Writes the trainer's checkpoint to `dir`, replacing what was there.
pub fn save(
    dir: &Path,
    trainer: &Trainer,
    tokenizer: Option<&ModelTokenizer>,
    base_model: &str,
    state: &TrainerState,
) -> Result<(), TrainError> {
    let name = dir
        .file_name()
        .ok_or_else(|| TrainError::Checkpoint(format!("{} is not a folder name", dir.display())))?;
    let staging = dir.with_file_name(format!(".{}.partial", name.to_string_lossy()));
    let _ = std::fs::remove_dir_all(&staging);
    std::fs::create_dir_all(&staging).map_err(io("creating", &staging))?;
    let model = &trainer.model;
    match &model.mode {
        TrainMode::Lora(lora) => {
            let tensors: HashMap<String, Tensor> = model
                .trainable()
                .iter()
                .map(|(n, v)| (n.clone(), v.as_tensor().clone()))
                .collect();
            candle_core::safetensors::save(&tensors, staging.join("adapter_model.safetensors"))?;
            write_json(
                &staging.join("adapter_config.json"),
                &serde_json::json!({
                    "peft_type": "LORA",
                    "task_type": "CAUSAL_LM",
                    "base_model_name_or_path": base_model,
                    "r": lora.rank,
                    "lora_alpha": lora.alpha,
                    "lora_dropout": 0.0,
                    "target_modules": lora.targets,
                    "bias": "none",
                    "fan_in_fan_out": false,
                    "inference_mode": true,
                    "init_lora_weights": true,
                    "modules_to_save": null,
                }),
            )?;
        }
        TrainMode::Full | TrainMode::Frozen => {
            candle_core::safetensors::save(
                &model.hf_tensors()?,
                staging.join("model.safetensors"),
            )?;
            write_json(&staging.join("config.json"), &model.config.to_hf_json())?;
        }
    }
    if let Some(tokenizer) = tokenizer {
        tokenizer
            .save_hf_dir(&staging)
            .map_err(|e| TrainError::Checkpoint(e.to_string()))?;
    }
    candle_core::safetensors::save(
        &trainer.optimizer.state(model.trainable()),
        staging.join("optimizer.safetensors"),
    )?;
    write_json(
        &staging.join("trainer_state.json"),
        &serde_json::to_value(state).expect("state serialises"),
    )?;
    let _ = std::fs::remove_dir_all(dir);
    std::fs::rename(&staging, dir).map_err(io("renaming into", dir))
}

/// A Hugging Face folder of the model's current weights with adapters merged in, the form a
/// server that knows nothing of LoRA (vLLM restarted on it, our engine) loads. Not resumable.
pub fn save_merged(
    dir: &Path,
    model: &TrainLlama,
    tokenizer: Option<&ModelTokenizer>,
) -> Result<(), TrainError> {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).map_err(io("creating", dir))?;
    candle_core::safetensors::save(&model.hf_tensors()?, dir.join("model.safetensors"))?;
    write_json(&dir.join("config.json"), &model.config.to_hf_json())?;
    if let Some(tokenizer) = tokenizer {
        tokenizer
            .save_hf_dir(dir)
            .map_err(|e| TrainError::Checkpoint(e.to_string()))?;
    }
    Ok(())
}

fn read_tensors(path: &Path) -> Result<HashMap<String, Tensor>, TrainError> {
    if !path.exists() {
        return Err(TrainError::Checkpoint(format!(
            "{} is missing",
            path.display()
        )));
    }
    Ok(candle_core::safetensors::load(path, &Device::Cpu)?)
}

/// The config of a Hugging Face model folder.
pub fn read_config(dir: &Path) -> Result<LlamaConfig, TrainError> {
    let path = dir.join("config.json");
    let body = std::fs::read(&path).map_err(io("reading", &path))?;
    serde_json::from_slice(&body)
        .map_err(|e| TrainError::Checkpoint(format!("{}: {e}", path.display())))
}

/// A full model from a Hugging Face folder (ours or any llama's, single-file or sharded).
pub fn load_hf(dir: &Path, mode: TrainMode) -> Result<TrainLlama, TrainError> {
    let config = read_config(dir)?;
    let mut tensors = HashMap::new();
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .map_err(io("reading", dir))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.extension().is_some_and(|e| e == "safetensors")
                && !p.ends_with("optimizer.safetensors")
        })
        .collect();
    files.sort();
    for file in files {
        tensors.extend(read_tensors(&file)?);
    }
    TrainLlama::from_tensors(config, tensors, mode)
}

/// Loads a PEFT adapter folder into a LoRA model built with the same rank and targets.
pub fn load_adapter(model: &TrainLlama, dir: &Path) -> Result<(), TrainError> {
    model.set_trainable(&read_tensors(&dir.join("adapter_model.safetensors"))?)
}

/// Resumes the optimizer and step counter from a checkpoint written by [`save`] (the weights are
/// loaded with [`load_hf`] or [`load_adapter`]).
pub fn resume(trainer: &mut Trainer, dir: &Path) -> Result<TrainerState, TrainError> {
    let path = dir.join("trainer_state.json");
    let body = std::fs::read(&path).map_err(io("reading", &path))?;
    let state: TrainerState = serde_json::from_slice(&body)
        .map_err(|e| TrainError::Checkpoint(format!("{}: {e}", path.display())))?;
    let moments = read_tensors(&dir.join("optimizer.safetensors"))?;
    let vars = trainer.model.trainable().to_vec();
    trainer
        .optimizer
        .load_state(&vars, &moments, state.step)
        .map_err(TrainError::Checkpoint)?;
    Ok(state)
}
