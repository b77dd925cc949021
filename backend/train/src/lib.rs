//! GRPO training for Lachesis, on candle: a llama whose every parameter trains (with Hugging
//! Face's names), LoRA with a frozen-weight matmul, the GRPO / Dr. GRPO / DAPO losses with
//! standard PPO clipping, AdamW with warmup and clipping, gradient accumulation, and checkpoints in
//! HF and PEFT layouts.
//!
//! Kept in its own crate, like inference, so the server rebuilds quickly; the loop that talks to
//! the trajectory API and swaps weights into inference is the server's `trainer` room.

pub mod checkpoint;
pub mod config;
pub mod fused;
pub mod gguf;
pub mod linear;
pub mod loss;
pub mod model;
pub mod optim;
pub mod products;
pub mod rows;
pub mod tiny;
pub mod trainer;

#[cfg(test)]
mod model_tests;

pub use config::LlamaConfig;
pub use loss::{LossConfig, RatioBase, Variant};
pub use model::{LoraConfig, TrainLlama, TrainMode};
pub use optim::OptimConfig;
pub use rows::{RowOptions, TrainRow, rows_from_batch};
pub use trainer::{StepReport, TrainConfig, Trainer};

use lachesis_inference::llama::Llama;

/// Everything training can refuse or fail at.
#[derive(Debug, thiserror::Error)]
pub enum TrainError {
    #[error("configuration: {0}")]
    Config(String),
    #[error("batch: {0}")]
    Batch(String),
    #[error("checkpoint: {0}")]
    Checkpoint(String),
    #[error("tensor: {0}")]
    Tensor(#[from] candle_core::Error),
}

/// The model's current weights as an inference model, for the in-process swap and hot-loaded
/// adapters. `quantize` makes the base matrices Q8_0 (the engine's speed for real models); LoRA
/// updates stay beside them in f32, so the served model is the trained one up to the base's own
/// quantization. The tiny model stays f32 so its samples follow the trained distribution exactly.
pub fn inference_model(model: &TrainLlama, quantize: bool) -> Result<Llama, TrainError> {
    let config = serde_json::to_vec(&model.config.to_hf_json()).expect("config serialises");
    let (tensors, adapters) = model.served_parts()?;
    Ok(Llama::from_hf_tensors(
        &config,
        tensors,
        adapters,
        model.config.max_position_embeddings,
        quantize,
    )?)
}
