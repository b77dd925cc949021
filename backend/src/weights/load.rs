//! Reading weights from disk into a model the engine can serve: a PEFT LoRA adapter applied
//! beside the served base's matrices, or a whole Hugging Face llama folder. Blocking; callers run
//! these on the blocking pool. Every failure leaves the server as it was: nothing is swapped until
//! the new model has answered a forward pass.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use candle_core::{Device, Tensor};
use lachesis_inference::llama::{Llama, LowRank};
use lachesis_train::model::{PROJECTIONS, peft_name};
use lachesis_train::{LoraConfig, TrainLlama, TrainMode, checkpoint, inference_model};
use serde::Deserialize;

use super::error::WeightsError;
pub use crate::inference::limits::TrainedPrecision;

/// `adapter_config.json` is a few hundred bytes; anything past this is not one.
const MAX_ADAPTER_CONFIG_BYTES: u64 = 64 * 1024;
/// The largest rank accepted: PEFT's own examples stay under 256.
const MAX_RANK: usize = 1024;

/// What is read from a request's folder, and how much of it.
#[derive(Debug, Clone, Copy)]
pub struct LoadLimits {
    pub max_bytes: u64,
    pub context_cap: usize,
}

/// The fields of PEFT's `adapter_config.json` that decide what the adapter computes.
#[derive(Debug, Deserialize)]
struct AdapterConfig {
    peft_type: String,
    r: usize,
    lora_alpha: f64,
    target_modules: serde_json::Value,
    #[serde(default)]
    bias: Option<String>,
    #[serde(default)]
    modules_to_save: Option<serde_json::Value>,
    #[serde(default)]
    use_dora: bool,
    #[serde(default)]
    use_rslora: bool,
}

fn bad(message: impl Into<String>) -> WeightsError {
    WeightsError::BadRequest(message.into())
}

/// `path` as an existing folder (links resolved), or a typed refusal.
fn folder(path: &Path, field: &str) -> Result<PathBuf, WeightsError> {
    if !path.is_absolute() {
        return Err(bad(format!("{field} must be an absolute path")));
    }
    let resolved = std::fs::canonicalize(path).map_err(|_| {
        bad(format!(
            "{field} {} is not a readable folder",
            path.display()
        ))
    })?;
    if !resolved.is_dir() {
        return Err(bad(format!("{field} {} is not a folder", path.display())));
    }
    Ok(resolved)
}

fn file_size(path: &Path) -> Result<u64, WeightsError> {
    let meta =
        std::fs::metadata(path).map_err(|_| bad(format!("{} is missing", path.display())))?;
    if !meta.is_file() {
        return Err(bad(format!("{} is not a file", path.display())));
    }
    Ok(meta.len())
}

fn within(what: &'static str, bytes: u64, limits: &LoadLimits) -> Result<(), WeightsError> {
    if bytes > limits.max_bytes {
        return Err(WeightsError::TooLarge {
            what,
            bytes,
            limit: limits.max_bytes,
        });
    }
    Ok(())
}

/// The LoRA settings an adapter folder declares, checked against what the merge supports.
fn adapter_lora(dir: &Path) -> Result<LoraConfig, WeightsError> {
    let path = dir.join("adapter_config.json");
    if file_size(&path)? > MAX_ADAPTER_CONFIG_BYTES {
        return Err(bad("adapter_config.json is too large to be a PEFT config"));
    }
    let body = std::fs::read(&path).map_err(|_| bad("adapter_config.json cannot be read"))?;
    // serde's message names the field and position only; the file's text is never echoed.
    let config: AdapterConfig = serde_json::from_slice(&body).map_err(|e| {
        bad(format!(
            "adapter_config.json is not a PEFT LoRA config (line {}, column {}: {:?})",
            e.line(),
            e.column(),
            e.classify()
        ))
    })?;
    if config.peft_type != "LORA" {
        return Err(bad("adapter_config.json: peft_type must be \"LORA\""));
    }
    if !(1..=MAX_RANK).contains(&config.r) {
        return Err(bad(format!(
            "adapter_config.json: r must be between 1 and {MAX_RANK}"
        )));
    }
    if !config.lora_alpha.is_finite() {
        return Err(bad("adapter_config.json: lora_alpha must be a number"));
    }
    if config.use_dora || config.use_rslora {
        return Err(bad(
            "adapter_config.json: DoRA and rsLoRA adapters are not supported (plain LoRA is)",
        ));
    }
    if config.bias.as_deref().is_some_and(|b| b != "none") {
        return Err(bad("adapter_config.json: only bias \"none\" is supported"));
    }
    let saves_modules = match &config.modules_to_save {
        None | Some(serde_json::Value::Null) => false,
        Some(serde_json::Value::Array(list)) => !list.is_empty(),
        Some(_) => true,
    };
    if saves_modules {
        return Err(bad(
            "adapter_config.json: modules_to_save is not supported (the adapter may only hold LoRA matrices)",
        ));
    }
    let names: Vec<String> = match &config.target_modules {
        serde_json::Value::Array(list) => list
            .iter()
            .map(|v| v.as_str().map(str::to_owned))
            .collect::<Option<_>>()
            .ok_or_else(|| bad("adapter_config.json: target_modules must be names"))?,
        _ => {
            return Err(bad(
                "adapter_config.json: give target_modules as a list of projection names",
            ));
        }
    };
    let known: HashSet<&str> = PROJECTIONS.iter().map(|(p, _)| *p).collect();
    if names.is_empty() {
        return Err(bad("adapter_config.json: target_modules is empty"));
    }
    if let Some(other) = names.iter().find(|n| !known.contains(n.as_str())) {
        return Err(bad(format!(
            "adapter_config.json: target module {other:?} is not a llama projection ({})",
            PROJECTIONS.map(|(p, _)| p).join(", ")
        )));
    }
    Ok(LoraConfig {
        rank: config.r,
        alpha: config.lora_alpha,
        targets: names,
        seed: 0,
    })
}

/// The served base in trainable form, with empty adapters of `mode`'s shape.
fn base_model(source: &Path, mode: TrainMode) -> Result<TrainLlama, WeightsError> {
    let internal = |e: lachesis_train::TrainError| WeightsError::Internal(e.to_string());
    if source.is_dir() {
        checkpoint::load_hf(source, mode).map_err(internal)
    } else {
        let (config, tensors, _) = lachesis_train::gguf::load_gguf(source).map_err(internal)?;
        TrainLlama::from_tensors(config, tensors, mode).map_err(internal)
    }
}

/// One forward pass over two tokens: weights that load but cannot compute are refused here,
/// before any request could reach them.
fn answers(model: &Llama) -> Result<(), WeightsError> {
    let input = Tensor::new(&[[1u32, 2]], &Device::Cpu)
        .map_err(|e| WeightsError::Internal(e.to_string()))?;
    let mut cache = model.new_cache();
    model
        .forward(&input, 0, &mut cache, false)
        .and_then(|logits| logits.flatten_all()?.to_vec1::<f32>())
        .map_err(|e| bad(format!("the new weights cannot run: {e}")))
        .and_then(|logits| {
            if logits.iter().all(|v| v.is_finite()) {
                Ok(())
            } else {
                Err(bad("the new weights compute non-finite logits"))
            }
        })
}

/// The base that adapters are served on: the served model's weights in Hugging Face's layout
/// (the layout its adapters are trained in), loaded once. Dense f32 serves an adapter as exactly
/// the model its trainer computes; Q8_0 takes a quarter of the memory and adds the base's
/// quantization noise.
pub fn adapter_base(source: &Path, precision: TrainedPrecision) -> Result<Llama, WeightsError> {
    let model = base_model(source, TrainMode::Full)?;
    inference_model(&model, precision == TrainedPrecision::Q8_0)
        .map_err(|e| WeightsError::Internal(e.to_string()))
}

/// `base` with the PEFT adapter in `lora_path` applied beside its matrices, in f32.
pub fn adapter_model(
    base: &Llama,
    lora_path: &Path,
    limits: &LoadLimits,
) -> Result<Llama, WeightsError> {
    let dir = folder(lora_path, "lora_path")?;
    let lora = adapter_lora(&dir)?;
    let tensors_path = dir.join("adapter_model.safetensors");
    within(
        "adapter_model.safetensors",
        file_size(&tensors_path)?,
        limits,
    )?;
    let mut tensors = candle_core::safetensors::load(&tensors_path, &Device::Cpu)
        .map_err(|e| bad(format!("adapter_model.safetensors: {e}")))?;
    let mut updates = HashMap::new();
    for layer in 0..base.layer_count() {
        for (projection, module) in PROJECTIONS {
            if !lora.targets.iter().any(|t| t == projection) {
                continue;
            }
            let mut take = |which: &str| {
                let name = peft_name(layer, projection, module, which);
                tensors
                    .remove(&name)
                    .ok_or_else(|| bad(format!("adapter_model.safetensors lacks {name}")))
            };
            let (a, b) = (take("lora_A")?, take("lora_B")?);
            if a.dims().first() != Some(&lora.rank) {
                return Err(bad(format!(
                    "the adapter's lora_A of layer {layer} {projection} is {:?}, not rank {}",
                    a.dims(),
                    lora.rank
                )));
            }
            let update = LowRank::new(&a, &b, lora.scale())
                .map_err(|e| bad(format!("layer {layer} {projection}: {e}")))?;
            updates.insert(
                format!("model.layers.{layer}.{module}.{projection}.weight"),
                update,
            );
        }
    }
    if let Some(extra) = tensors.keys().next() {
        return Err(bad(format!(
            "adapter_model.safetensors holds {extra:.120}, which is not a LoRA matrix of the \
             adapter's target_modules"
        )));
    }
    let served = base
        .with_adapters(updates)
        .map_err(|e| bad(format!("the adapter does not fit the served model: {e}")))?;
    answers(&served)?;
    Ok(served)
}

/// A whole Hugging Face llama folder (`config.json` and `*.safetensors`), held in f32 or
/// quantized to Q8_0 as the engine serves its own base.
pub fn full_model(
    model_path: &Path,
    limits: &LoadLimits,
    precision: TrainedPrecision,
) -> Result<Llama, WeightsError> {
    let dir = folder(model_path, "model_path")?;
    file_size(&dir.join("config.json"))?;
    let mut bytes = 0u64;
    let entries = std::fs::read_dir(&dir).map_err(|_| {
        bad(format!(
            "model_path {} cannot be listed",
            model_path.display()
        ))
    })?;
    for entry in entries.filter_map(Result::ok) {
        let path = entry.path();
        // Every .safetensors file is read by the loader, so every one counts.
        if path.extension().is_some_and(|e| e == "safetensors") {
            bytes = bytes.saturating_add(file_size(&path)?);
        }
    }
    if bytes == 0 {
        return Err(bad("model_path holds no .safetensors weights"));
    }
    within("model_path", bytes, limits)?;
    let quantize = precision == TrainedPrecision::Q8_0;
    let model = Llama::from_safetensors(&dir, limits.context_cap, quantize)
        .map_err(|e| bad(format!("model_path is not a llama checkpoint: {e}")))?;
    answers(&model)?;
    Ok(model)
}
