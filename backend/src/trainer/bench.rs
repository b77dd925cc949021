//! `lachesis bench train`: training tokens/s of one GRPO step (forward, loss, backward, AdamW)
//! on a llama of given shape with random data. `scripts/bench-train.sh` runs the same shapes in
//! PyTorch on the CPU (`scripts/bench-train/torch_grpo.py`) and prints the ratio.

use lachesis_train::{
    LlamaConfig, LoraConfig, LossConfig, OptimConfig, TrainConfig, TrainLlama, TrainMode, TrainRow,
    Trainer,
};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

#[derive(Debug, Clone, clap::Args)]
pub struct TrainBenchArgs {
    #[arg(long, default_value_t = 256)]
    pub vocab: usize,
    #[arg(long, default_value_t = 64)]
    pub hidden: usize,
    #[arg(long, default_value_t = 256)]
    pub intermediate: usize,
    #[arg(long, default_value_t = 2)]
    pub layers: usize,
    #[arg(long, default_value_t = 4)]
    pub heads: usize,
    #[arg(long, default_value_t = 2)]
    pub kv_heads: usize,
    /// Sequences per step.
    #[arg(long, default_value_t = 8)]
    pub batch: usize,
    /// Tokens per sequence.
    #[arg(long, default_value_t = 64)]
    pub seq: usize,
    /// Timed steps (after two untimed ones).
    #[arg(long, default_value_t = 20)]
    pub steps: usize,
    /// LoRA rank on q_proj and v_proj; 0 trains every weight.
    #[arg(long, default_value_t = 0)]
    pub lora_rank: usize,
}

#[derive(Debug, Clone, Copy)]
pub struct TrainBenchResult {
    pub tokens_per_second: f64,
    pub seconds_per_step: f64,
    pub trainable_parameters: usize,
}

pub fn run_train_bench(args: &TrainBenchArgs) -> anyhow::Result<TrainBenchResult> {
    lachesis_native::allocator::keep_freed_memory();
    let config = LlamaConfig {
        vocab_size: args.vocab,
        hidden_size: args.hidden,
        intermediate_size: args.intermediate,
        num_hidden_layers: args.layers,
        num_attention_heads: args.heads,
        num_key_value_heads: Some(args.kv_heads),
        rms_norm_eps: 1e-5,
        rope_theta: 10_000.0,
        max_position_embeddings: args.seq.max(2),
        tie_word_embeddings: false,
    };
    let mode = if args.lora_rank > 0 {
        TrainMode::Lora(LoraConfig {
            rank: args.lora_rank,
            alpha: 2.0 * args.lora_rank as f64,
            targets: vec!["q_proj".into(), "v_proj".into()],
            seed: 0,
        })
    } else {
        TrainMode::Full
    };
    let model = TrainLlama::random(config, 0, mode)?;
    let trainable_parameters = model.trainable().iter().map(|(_, v)| v.elem_count()).sum();
    let mut trainer = Trainer::new(
        model,
        TrainConfig {
            loss: LossConfig::default(),
            optim: OptimConfig {
                lr: 1e-4,
                ..OptimConfig::default()
            },
            micro_batch: args.batch,
        },
    )?;
    let rows = random_rows(args);
    for _ in 0..2 {
        trainer.step(&rows)?;
    }
    let started = std::time::Instant::now();
    for _ in 0..args.steps {
        trainer.step(&rows)?;
    }
    let seconds = started.elapsed().as_secs_f64();
    let tokens = (args.batch * args.seq * args.steps) as f64;
    Ok(TrainBenchResult {
        tokens_per_second: tokens / seconds,
        seconds_per_step: seconds / args.steps.max(1) as f64,
        trainable_parameters,
    })
}

/// Random tokens; the second half of each sequence is the completion, advantages alternate ±1,
/// and the behaviour logprob is uniform's (the PyTorch script builds the same).
fn random_rows(args: &TrainBenchArgs) -> Vec<TrainRow> {
    let mut rng = StdRng::seed_from_u64(1);
    let uniform = -(args.vocab as f32).ln();
    (0..args.batch)
        .map(|i| {
            let len = args.seq + 1;
            TrainRow {
                tokens: (0..len)
                    .map(|_| rng.random_range(0..args.vocab as u32))
                    .collect(),
                trained: (0..len).map(|t| t > len / 2).collect(),
                inference_logprobs: Some(vec![uniform; len]),
                advantages: vec![if i % 2 == 0 { 1.0 } else { -1.0 }; len],
                temperature: 1.0,
                score: 0.0,
            }
        })
        .collect()
}
