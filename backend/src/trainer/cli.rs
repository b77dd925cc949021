//! `lachesis train`: `demo` (the tiny model learning a toy task, end to end) and `run` (GRPO on a
//! real llama, with the embedded engine, a restarted vLLM or vLLM's runtime LoRA loading).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use lachesis_inference::{Engine, EngineOptions, ModelTokenizer};
use lachesis_train::checkpoint;
use lachesis_train::{
    LoraConfig, LossConfig, OptimConfig, RatioBase, RowOptions, TrainConfig, TrainLlama, TrainMode,
    Trainer, Variant, inference_model,
};
use tokio::sync::watch;

use super::demo::{DemoOptions, run_demo};
use super::held_out::HeldOut;
use super::sync::{RemoteReload, VllmLora, VllmRestart};
use super::{LoopConfig, TrainLoop, WeightSync};
use crate::config::ServeConfig;
use crate::envs::in_process::EnvSpec;
use crate::policy::{EmbeddedPolicy, Policy};

#[derive(Debug, Clone, clap::Subcommand)]
pub enum TrainCommand {
    /// A tiny random llama learns "answer (7·d + 3) mod 10" by GRPO through the trajectory API.
    Demo(DemoArgs),
    /// GRPO on a llama model (GGUF or Hugging Face folder) from a trajectory API's batches.
    Run(Box<RunArgs>),
}

/// Where the trajectory API is: a running server, or one served in this process.
#[derive(Debug, Clone, clap::Args)]
pub struct ApiArgs {
    /// A running trajectory API; without it one is served in this process on DATABASE_URL.
    #[arg(long, env = "LACHESIS_API")]
    pub api: Option<String>,
    #[arg(long, env = "DATABASE_URL")]
    pub database_url: Option<String>,
}

#[derive(Debug, Clone, clap::Args)]
pub struct DemoArgs {
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    #[arg(long, default_value_t = DemoOptions::new(0).steps)]
    pub steps: usize,
    #[arg(long, default_value_t = DemoOptions::new(0).lr)]
    pub lr: f64,
    #[command(flatten)]
    pub api: ApiArgs,
}

#[derive(Debug, Clone, clap::Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub api: ApiArgs,
    /// The model: a llama GGUF (dequantized for training) or a Hugging Face folder.
    #[arg(long, env = "LACHESIS_MODEL")]
    pub model: PathBuf,
    #[arg(long, default_value = "default")]
    pub run: String,
    #[arg(long, default_value = "grpo")]
    pub variant: Variant,
    /// What each token's importance ratio is taken against: `inference` (the sampling engine's
    /// logprobs, where the rollout sent them) or `trainer` (the trained model's own before the
    /// step, as TRL does: with one pass per batch nothing is clipped).
    #[arg(long, default_value = "trainer")]
    pub ratio_base: RatioBase,
    #[arg(long, default_value_t = 1e-5)]
    pub lr: f64,
    #[arg(long, default_value_t = 0)]
    pub warmup_steps: usize,
    /// Decay the rate linearly to `lr · final_lr_ratio` over the run's steps.
    #[arg(long)]
    pub lr_decay: bool,
    #[arg(long, default_value_t = 0.1)]
    pub final_lr_ratio: f64,
    #[arg(long, default_value_t = 1.0)]
    pub max_grad_norm: f64,
    #[arg(long, default_value_t = 0.0)]
    pub weight_decay: f64,
    #[arg(long, default_value_t = 0.2)]
    pub eps_low: f64,
    /// DAPO's clip-higher; defaults to eps_low.
    #[arg(long)]
    pub eps_high: Option<f64>,
    /// KL penalty weight to the starting model (0: none).
    #[arg(long, default_value_t = 0.0)]
    pub kl_beta: f64,
    /// Dr. GRPO's constant length.
    #[arg(long, default_value_t = 512)]
    pub dr_grpo_length: usize,
    /// Drop groups whose rewards are all equal (DAPO's dynamic sampling).
    #[arg(long)]
    pub dynamic_sampling: bool,
    /// LoRA rank; 0 fine-tunes every weight.
    #[arg(long, default_value_t = 0)]
    pub lora_rank: usize,
    #[arg(long, default_value_t = 16.0)]
    pub lora_alpha: f64,
    #[arg(long, value_delimiter = ',', default_value = "q_proj,v_proj")]
    pub lora_targets: Vec<String>,
    /// Sequences per optimizer step (the API's batch size).
    #[arg(long, default_value_t = 32)]
    pub batch_size: usize,
    /// Sequences per forward/backward pass (gradient accumulation over the batch).
    #[arg(long, default_value_t = 8)]
    pub micro_batch: usize,
    #[arg(long, default_value_t = 2048)]
    pub max_token_len: usize,
    #[arg(long, default_value_t = 10)]
    pub steps: usize,
    #[arg(long)]
    pub checkpoint_dir: Option<PathBuf>,
    #[arg(long, default_value_t = 0)]
    pub checkpoint_interval: usize,
    /// A checkpoint folder written by this trainer to continue from (weights and optimizer).
    #[arg(long)]
    pub resume: Option<PathBuf>,
    /// How new weights reach inference: embedded, vllm-restart, vllm-lora, reload (a running
    /// server reads the merged model through `POST /update_weights_from_disk`) or none.
    #[arg(long, default_value = "embedded")]
    pub sync: String,
    #[arg(long, default_value_t = 1)]
    pub sync_interval: usize,
    /// Environments run in this process, answered by the embedded engine (`--sync embedded`).
    #[arg(long = "env")]
    pub envs: Vec<EnvSpec>,
    /// The inference server's root URL (`--sync vllm-lora` and `reload`; a Lachesis server
    /// answers both), or where the restarted server listens [default: the trajectory API's URL
    /// for `reload`, http://127.0.0.1:9001 otherwise].
    #[arg(long)]
    pub vllm_url: Option<String>,
    /// The command that serves a model folder, the folder appended (`--sync vllm-restart`).
    #[arg(long, default_value = "vllm serve")]
    pub vllm_command: String,
    /// Arguments after the folder.
    #[arg(long, default_value = "--port 9001 --served-model-name lachesis")]
    pub vllm_args: String,
    #[arg(long, default_value = "lachesis")]
    pub lora_name: String,
    /// Evaluate each `--env` environment on its held-out set before the first step and every N
    /// steps (0: never), printing `eval step S ENV: ...` and charting `ENV:eval/...` on the run's
    /// dashboard.
    #[arg(long, default_value_t = 0)]
    pub eval_interval: usize,
    #[arg(long, default_value_t = 600)]
    pub vllm_startup_seconds: u64,
}

pub async fn run(command: TrainCommand) -> anyhow::Result<()> {
    match command {
        TrainCommand::Demo(args) => demo(args).await,
        TrainCommand::Run(args) => train(*args).await,
    }
}

/// The API's base URL, serving one in this process when none is given (kept alive by the guard).
async fn api_base(
    args: &ApiArgs,
) -> anyhow::Result<(String, Option<tokio::sync::oneshot::Sender<()>>)> {
    if let Some(api) = &args.api {
        return Ok((api.clone(), None));
    }
    let database_url = args
        .database_url
        .clone()
        .context("give --api URL, or DATABASE_URL to serve the trajectory API in this process")?;
    let config = ServeConfig::local(&database_url);
    let server = crate::app::Server::build(&config).await?;
    let base = format!("http://{}", server.local_addr());
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(server.run_until(async move {
        let _ = rx.await;
    }));
    Ok((base, Some(tx)))
}

async fn demo(args: DemoArgs) -> anyhow::Result<()> {
    let (api, _server) = api_base(&args.api).await?;
    let options = DemoOptions {
        steps: args.steps,
        lr: args.lr,
        ..DemoOptions::new(args.seed)
    };
    let report = run_demo(&api, &options, |step, reward| {
        println!("step {step:>3} mean reward {reward:.3}");
    })
    .await?;
    println!(
        "training tokens/s {:.0} (mean over steps)",
        report.tokens_per_second
    );
    println!("final mean reward {:.3}", report.final_reward());
    Ok(())
}

fn load_model(args: &RunArgs, mode: TrainMode) -> anyhow::Result<(TrainLlama, ModelTokenizer)> {
    if args.model.is_dir() {
        let model = checkpoint::load_hf(&args.model, mode)?;
        let tokenizer = ModelTokenizer::from_hf_dir(&args.model)?;
        Ok((model, tokenizer))
    } else {
        let (config, tensors, tokenizer) = lachesis_train::gguf::load_gguf(&args.model)?;
        Ok((TrainLlama::from_tensors(config, tensors, mode)?, tokenizer))
    }
}

async fn train(args: RunArgs) -> anyhow::Result<()> {
    // Every step frees and reallocates the same gigabytes of activations: keep them.
    lachesis_native::allocator::keep_freed_memory();
    let mode = if args.lora_rank > 0 {
        TrainMode::Lora(LoraConfig {
            rank: args.lora_rank,
            alpha: args.lora_alpha,
            targets: args.lora_targets.clone(),
            seed: 0,
        })
    } else {
        TrainMode::Full
    };
    let (mut model, tokenizer) = match (&args.resume, &mode) {
        (Some(dir), TrainMode::Full) => (
            checkpoint::load_hf(dir, TrainMode::Full)?,
            ModelTokenizer::from_hf_dir(dir)
                .or_else(|_| load_model(&args, TrainMode::Frozen).map(|(_, t)| t))?,
        ),
        _ => load_model(&args, mode.clone())?,
    };
    if let (Some(dir), TrainMode::Lora(_)) = (&args.resume, &mode) {
        checkpoint::load_adapter(&model, dir)?;
    }
    model.mode = mode.clone();
    let config = TrainConfig {
        loss: LossConfig {
            variant: args.variant,
            ratio_base: args.ratio_base,
            eps_low: args.eps_low,
            eps_high: args.eps_high.unwrap_or(args.eps_low),
            kl_beta: args.kl_beta,
            dr_grpo_length: args.dr_grpo_length,
        },
        optim: OptimConfig {
            lr: args.lr,
            warmup_steps: args.warmup_steps,
            decay_steps: if args.lr_decay { args.steps } else { 0 },
            final_lr_ratio: args.final_lr_ratio,
            max_grad_norm: args.max_grad_norm,
            weight_decay: args.weight_decay,
            ..OptimConfig::default()
        },
        micro_batch: args.micro_batch,
    };
    let mut trainer = Trainer::new(model, config)?;
    if let Some(dir) = &args.resume {
        let state = checkpoint::resume(&mut trainer, dir)?;
        println!("resumed at step {} from {}", state.step, dir.display());
    }
    let (api, _server) = api_base(&args.api).await?;
    // `reload` asks the platform the trainer posts to unless told otherwise: the one-command loop.
    let inference_url = args
        .vllm_url
        .clone()
        .unwrap_or_else(|| match args.sync.as_str() {
            "reload" => api.clone(),
            _ => "http://127.0.0.1:9001".into(),
        });
    let mut engine = None;
    let sync = match args.sync.as_str() {
        "none" => WeightSync::None { version: 0 },
        "embedded" => {
            let served = inference_model(&trainer.model, true)?;
            let e = Engine::from_model(
                served,
                tokenizer.clone(),
                args.model.display().to_string(),
                EngineOptions::default(),
            )?;
            engine = Some(e.clone());
            WeightSync::Embedded {
                engine: e,
                quantize: true,
            }
        }
        "vllm-restart" => WeightSync::VllmRestart(Box::new(VllmRestart::new(
            args.vllm_command
                .split_whitespace()
                .map(String::from)
                .collect(),
            args.vllm_args
                .split_whitespace()
                .map(String::from)
                .collect(),
            format!("{}/health", inference_url.trim_end_matches('/')),
            Duration::from_secs(args.vllm_startup_seconds),
        ))),
        "vllm-lora" => WeightSync::VllmLora(VllmLora::new(
            &inference_url,
            &args.lora_name,
            std::env::var("VLLM_API_KEY").ok(),
        )),
        // Loading weights is the admin's: against the platform itself, its admin token is the
        // one the trainer already holds.
        "reload" => WeightSync::Reload(RemoteReload::new(
            &inference_url,
            std::env::var("VLLM_API_KEY")
                .or_else(|_| std::env::var("LACHESIS_API_TOKEN"))
                .ok(),
        )),
        other => {
            bail!("unknown --sync {other:?}: embedded, vllm-restart, vllm-lora, reload or none")
        }
    };
    let loop_config = LoopConfig {
        run: args.run.clone(),
        api_token: std::env::var("LACHESIS_API_TOKEN").ok(),
        batch_size: args.batch_size,
        max_token_len: args.max_token_len,
        steps: args.steps,
        checkpoint_dir: args.checkpoint_dir.clone(),
        checkpoint_interval: args.checkpoint_interval,
        sync_interval: args.sync_interval,
        rows: RowOptions {
            variant: args.variant,
            drop_uniform_groups: args.dynamic_sampling,
        },
        poll_interval: Duration::from_millis(200),
        batch_timeout: Duration::from_secs(1800),
        base_model: args.model.display().to_string(),
    };
    let held_out = HeldOut::new(&args.envs, engine.as_ref(), args.eval_interval)?;
    let mut train = TrainLoop::connect(&api, trainer, sync, Some(tokenizer), loop_config).await?;
    if let Some(held_out) = &held_out {
        held_out.run(train.step_count(), &train).await?;
    }
    let (stop, stopped) = watch::channel(false);
    let envs = spawn_envs(&args, &api, engine.as_ref(), &stopped)?;
    while let Some(o) = train.next_step().await? {
        let r = &o.report;
        println!(
            "step {:>4} mean score {:.3} loss {:+.4} ratio {:.3} clip {:.3} kl {:.4} grad {:.3} align {:.4} tok/s {:.0} sync {:.2}s v{}",
            o.step,
            r.mean_score,
            r.loss,
            r.mean_ratio,
            r.clip_fraction,
            r.kl,
            r.grad_norm,
            r.logprob_alignment,
            r.tokens_per_second(),
            o.sync_seconds,
            o.weight_version,
        );
        if let Some(held_out) = held_out.as_ref().filter(|h| h.due(o.step)) {
            held_out.run(o.step, &train).await?;
        }
    }
    let _ = stop.send(true);
    for handle in envs {
        let _ = handle.await;
    }
    if let WeightSync::VllmRestart(restart) = &mut train.sync {
        restart.stop().await;
    }
    Ok(())
}

fn spawn_envs(
    args: &RunArgs,
    api: &str,
    engine: Option<&Engine>,
    stopped: &watch::Receiver<bool>,
) -> anyhow::Result<Vec<tokio::task::JoinHandle<()>>> {
    if args.envs.is_empty() {
        return Ok(Vec::new());
    }
    let engine = engine.context("--env needs --sync embedded (the envs use the trained engine)")?;
    let policy: Arc<dyn Policy> = Arc::new(EmbeddedPolicy::new(engine.clone()));
    let mut handles = Vec::new();
    for spec in &args.envs {
        let env = crate::envs::build(&spec.name, &spec.options)?;
        let config = crate::envs::runner::RunnerConfig {
            run: args.run.clone(),
            total_steps: Some(0),
            ..Default::default()
        };
        let (api, policy, stopped, name) = (
            api.to_owned(),
            policy.clone(),
            stopped.clone(),
            spec.name.clone(),
        );
        handles.push(tokio::spawn(async move {
            if let Err(e) =
                crate::envs::runner::run(&api, env.as_ref(), policy, config, stopped).await
            {
                tracing::error!(env = %name, error = %e, "environment failed");
            }
        }));
    }
    Ok(handles)
}
