//! `lachesis env ...`: serve an environment to a trajectory API, process groups to a file, or
//! evaluate a policy, as atroposlib's `serve`, `process` and `evaluate` subcommands do.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use serde_json::{Map, Value};
use tokio::sync::watch;

use super::arithmetic::baseline::BaselinePolicy;
use super::evaluate::EvaluateConfig;
use super::process::ProcessConfig;
use super::runner::RunnerConfig;
use super::standalone::DatabaseParts;
use super::{EnvOptions, Environment, registry};
use crate::policy::{
    EmbeddedPolicy, OpenAiPolicy, Policy, ServerPool, ServerPoolConfig, VllmPolicy,
};
use lachesis_inference::{Engine, EngineOptions, ModelTokenizer};

#[derive(Debug, Clone, clap::Subcommand)]
// Variants are boxed: their arguments are large and the enum sits in the binary's `Command`.
pub enum EnvCommand {
    /// Serve an environment to a trajectory API until the trainer's steps are done.
    Serve(Box<EnvServeArgs>),
    /// Roll out N groups to FILE.jsonl (no API) and render FILE.html to read them.
    Process(Box<EnvProcessArgs>),
    /// Run the environment's evaluation once; write DIR/metrics.json and DIR/samples.jsonl.
    Evaluate(Box<EnvEvaluateArgs>),
    /// List the built-in environments.
    List,
}

/// Which environment, and how its groups are sampled.
#[derive(Debug, Clone, clap::Args)]
pub struct EnvArgs {
    /// The environment (see `lachesis env list`).
    pub name: String,
    /// Sequences per group (the environment's default when absent).
    #[arg(long)]
    pub group_size: Option<usize>,
    /// Completion budget per sequence.
    #[arg(long)]
    pub max_tokens: Option<usize>,
    #[arg(long)]
    pub temperature: Option<f32>,
    /// An environment-specific setting, KEY=VALUE (VALUE read as JSON, else as text); repeatable.
    #[arg(long = "set", value_name = "KEY=VALUE", value_parser = parse_setting)]
    pub settings: Vec<(String, Value)>,
    /// The platform database, for environments that need more than a policy (Pay-to-Play pays
    /// its judges through this database's ledger, settled in the ledger alone).
    #[arg(long, env = "DATABASE_URL", hide_env_values = true)]
    pub database_url: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum PolicyKind {
    /// The embedded model (`--model`, a GGUF file), in this process.
    Embedded,
    /// vLLM servers (`--server`, repeatable), with token ids and logprobs.
    Vllm,
    /// OpenAI-compatible servers (`--server`), tokenized locally with `--model`/`--tokenizer`.
    Openai,
    /// The built-in solver of the arithmetic environment: no model needed.
    Baseline,
}

/// Where completions come from.
#[derive(Debug, Clone, clap::Args)]
pub struct PolicyArgs {
    #[arg(long, value_enum, default_value_t = PolicyKind::Embedded)]
    pub policy: PolicyKind,
    /// A GGUF model: the embedded policy's weights, and the tokenizer for remote servers.
    #[arg(long)]
    pub model: Option<PathBuf>,
    /// A Hugging Face tokenizer directory (tokenizer.json, tokenizer_config.json).
    #[arg(long)]
    pub tokenizer: Option<PathBuf>,
    /// An inference server's base URL; repeat for several.
    #[arg(long = "server", value_name = "URL")]
    pub servers: Vec<String>,
    /// The model name to ask remote servers for.
    #[arg(long)]
    pub model_name: Option<String>,
    #[arg(long, env = "LACHESIS_INFERENCE_API_KEY", hide_env_values = true)]
    pub api_key: Option<String>,
    /// Seeds the policy's sampling and the environment's item stream.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// The baseline policy's chance of answering correctly.
    #[arg(long, default_value_t = 0.5)]
    pub baseline_accuracy: f64,
}

/// Which environment, played by which policy.
#[derive(Debug, Clone, clap::Args)]
pub struct PlayArgs {
    #[command(flatten)]
    pub env: EnvArgs,
    #[command(flatten)]
    pub policy: PolicyArgs,
}

impl PlayArgs {
    /// The policy the flags describe, and the environment it plays (see `build_env`).
    async fn build(
        &self,
        shutdown: &watch::Receiver<bool>,
    ) -> anyhow::Result<(Arc<dyn Policy>, Arc<dyn Environment>)> {
        let policy = build_policy(&self.policy)?;
        let env = build_env(&self.env, &self.policy, &policy, shutdown).await?;
        Ok((policy, env))
    }
}

#[derive(Debug, Clone, clap::Args)]
pub struct EnvServeArgs {
    #[command(flatten)]
    pub play: PlayArgs,
    /// The trajectory API's base URL.
    #[arg(
        long,
        env = "LACHESIS_API_URL",
        default_value = "http://127.0.0.1:8000"
    )]
    pub api: String,
    /// The run to post to (`/runs/NAME/...`); `default` uses the plain Atropos paths.
    #[arg(long, default_value = crate::trajectory::DEFAULT_RUN)]
    pub run: String,
    /// Bearer token for the trajectory API.
    #[arg(long, env = "LACHESIS_API_TOKEN", hide_env_values = true)]
    pub api_token: Option<String>,
    /// The name to register under (the environment's name by default).
    #[arg(long)]
    pub desired_name: Option<String>,
    #[arg(long, default_value_t = 1.0)]
    pub weight: f64,
    #[arg(long)]
    pub min_batch_allocation: Option<f64>,
    #[arg(long, default_value_t = 8)]
    pub max_workers: usize,
    /// Pause while the queue holds this many batches (0: no bound).
    #[arg(long, default_value_t = 3)]
    pub max_batches_offpolicy: i64,
    /// Stop past this trainer step (the trainer's num_steps by default).
    #[arg(long)]
    pub total_steps: Option<i64>,
    /// Send groups whose scores are all equal (dropped by default: no GRPO signal).
    #[arg(long)]
    pub allow_same_scores: bool,
    /// Send each sequence's chat messages with its group.
    #[arg(long)]
    pub include_messages: bool,
    #[arg(long, default_value_t = 600)]
    pub worker_timeout_secs: u64,
}

#[derive(Debug, Clone, clap::Args)]
pub struct EnvProcessArgs {
    #[command(flatten)]
    pub play: PlayArgs,
    /// FILE.jsonl to write (replaced if present); the viewer goes to FILE.html.
    #[arg(long)]
    pub out: PathBuf,
    #[arg(long, default_value_t = 8)]
    pub groups: usize,
}

#[derive(Debug, Clone, clap::Args)]
pub struct EnvEvaluateArgs {
    #[command(flatten)]
    pub play: PlayArgs,
    /// The directory for metrics.json and samples.jsonl.
    #[arg(long)]
    pub out: PathBuf,
    /// The task name in `atropos|TASK|0` (`NAME_eval` by default).
    #[arg(long)]
    pub task: Option<String>,
}

pub async fn run(cmd: EnvCommand) -> anyhow::Result<()> {
    match cmd {
        EnvCommand::List => {
            for env in registry::REGISTRY {
                println!("{}\t{}", env.name, env.description);
            }
        }
        EnvCommand::Serve(args) => {
            let (stop, shutdown) = watch::channel(false);
            let (policy, env) = args.play.build(&shutdown).await?;
            tokio::spawn(async move {
                crate::signals::shutdown_signal().await;
                let _ = stop.send(true);
            });
            let config = runner_config(&args);
            let report = super::runner::run(&args.api, env.as_ref(), policy, config, shutdown)
                .await
                .with_context(|| format!("serving {} to {}", args.play.env.name, args.api))?;
            println!(
                "stopped ({:?}): {} groups sent, dropped {} for equal scores and {} as too long, \
                 {} failed to send",
                report.stopped_by,
                report.groups_sent,
                report.dropped_same_scores,
                report.dropped_too_long,
                report.send_errors
            );
        }
        EnvCommand::Process(args) => {
            let (_stop, shutdown) = watch::channel(false);
            let (policy, env) = args.play.build(&shutdown).await?;
            let config = ProcessConfig::new(&args.out, args.groups);
            let report = super::process::process(env.as_ref(), policy.as_ref(), &config).await?;
            println!(
                "{} groups written to {}; viewer: {}",
                report.groups_written,
                report.jsonl.display(),
                report.html.display()
            );
        }
        EnvCommand::Evaluate(args) => {
            let (_stop, shutdown) = watch::channel(false);
            let (policy, env) = args.play.build(&shutdown).await?;
            let config = EvaluateConfig {
                out_dir: args.out.clone(),
                model_name: args.play.policy.model_name.clone(),
                task_name: args.task.clone(),
                generation_parameters: Map::new(),
            };
            let report = super::evaluate::evaluate(env.as_ref(), policy.as_ref(), &config).await?;
            for (key, value) in &report.outcome.metrics {
                println!("{key}: {value}");
            }
            println!("written to {}", report.metrics_path.display());
        }
    }
    Ok(())
}

/// The policy the flags describe. Only `baseline` is built here; the lead wires the others to the
/// constructors in `crate::policy`.
pub fn build_policy(args: &PolicyArgs) -> anyhow::Result<Arc<dyn Policy>> {
    // Remote servers and the baseline need only a tokenizer; the embedded policy needs the model.
    let tokenizer = || -> anyhow::Result<Option<ModelTokenizer>> {
        Ok(match (&args.tokenizer, model_path(args)) {
            (Some(dir), _) => Some(
                ModelTokenizer::from_hf_dir(dir)
                    .with_context(|| format!("loading the tokenizer in {}", dir.display()))?,
            ),
            (None, Some(model)) => Some(
                ModelTokenizer::from_gguf_file(&model)
                    .with_context(|| format!("reading the tokenizer of {}", model.display()))?,
            ),
            (None, None) => None,
        })
    };
    let pool = || -> anyhow::Result<ServerPool> {
        if args.servers.is_empty() {
            bail!("--policy {:?} needs at least one --server URL", args.policy);
        }
        Ok(ServerPool::new(ServerPoolConfig {
            base_urls: args.servers.clone(),
            api_key: args.api_key.clone(),
            ..ServerPoolConfig::default()
        })?)
    };
    let remote_tokenizer = || -> anyhow::Result<Arc<ModelTokenizer>> {
        tokenizer()?.map(Arc::new).context(
            "a remote policy needs the model's tokenizer: pass --tokenizer DIR or --model FILE.gguf",
        )
    };
    let model_name = || args.model_name.clone().unwrap_or_else(|| "default".into());
    match args.policy {
        PolicyKind::Baseline => Ok(Arc::new(BaselinePolicy::new(
            args.baseline_accuracy,
            args.seed,
            tokenizer()?.map(Arc::new),
        ))),
        PolicyKind::Embedded => {
            let model = model_path(args).context(
                "no model: pass --model FILE.gguf (or run scripts/ensure-model.sh for SmolLM2)",
            )?;
            let engine = Engine::load(&model, EngineOptions::default())
                .with_context(|| format!("loading {}", model.display()))?;
            Ok(Arc::new(EmbeddedPolicy::new(engine)))
        }
        PolicyKind::Vllm => Ok(Arc::new(VllmPolicy::new(
            pool()?,
            remote_tokenizer()?,
            model_name(),
        ))),
        PolicyKind::Openai => Ok(Arc::new(OpenAiPolicy::new(
            pool()?,
            remote_tokenizer()?,
            model_name(),
            true,
        ))),
    }
}

/// `--model`, else the default SmolLM2 in the model cache when it is there.
fn model_path(args: &PolicyArgs) -> Option<PathBuf> {
    args.model
        .clone()
        .or_else(|| crate::config::default_model_path().filter(|p| p.exists()))
}

/// The environment the flags name: built from its options alone, or, for one that needs more than
/// a policy and given `--database-url`, from that database's parts as a server would host it.
async fn build_env(
    env: &EnvArgs,
    policy_args: &PolicyArgs,
    policy: &Arc<dyn Policy>,
    shutdown: &watch::Receiver<bool>,
) -> anyhow::Result<Arc<dyn Environment>> {
    let options = EnvOptions {
        seed: policy_args.seed,
        group_size: env.group_size,
        max_tokens: env.max_tokens,
        temperature: env.temperature,
        settings: env.settings.iter().cloned().collect(),
    };
    let descriptor = registry::find(&env.name);
    match (descriptor, &env.database_url) {
        (Some(descriptor), Some(url)) if descriptor.needs == registry::ServerNeeds::Ledger => {
            let parts = DatabaseParts::connect(url, policy.clone(), shutdown.clone()).await?;
            Ok(descriptor.host(&options, &parts)?.env)
        }
        _ => Ok(Arc::from(super::build(&env.name, &options)?)),
    }
}

fn runner_config(args: &EnvServeArgs) -> RunnerConfig {
    RunnerConfig {
        run: args.run.clone(),
        api_token: args.api_token.clone(),
        desired_name: args.desired_name.clone(),
        weight: args.weight,
        min_batch_allocation: args.min_batch_allocation,
        max_workers: args.max_workers,
        max_batches_offpolicy: args.max_batches_offpolicy,
        total_steps: args.total_steps,
        ensure_scores_are_not_same: !args.allow_same_scores,
        include_messages: args.include_messages,
        worker_timeout: Duration::from_secs(args.worker_timeout_secs),
        ..RunnerConfig::default()
    }
}

/// `KEY=VALUE`, VALUE as JSON when it parses (`3`, `true`, `[1,2]`), else as a string.
fn parse_setting(text: &str) -> Result<(String, Value), String> {
    let (key, value) = text
        .split_once('=')
        .ok_or_else(|| format!("expected KEY=VALUE, got {text:?}"))?;
    if key.is_empty() {
        return Err("the key is empty".into());
    }
    let value = serde_json::from_str(value).unwrap_or_else(|_| Value::String(value.to_string()));
    Ok((key.to_string(), value))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(subcommand)]
        command: EnvCommand,
    }

    #[test]
    fn the_documented_command_lines_parse() {
        let cli = Cli::try_parse_from([
            "env",
            "serve",
            "arithmetic",
            "--api",
            "http://h:8000",
            "--policy",
            "vllm",
            "--server",
            "http://a:9000",
            "--server",
            "http://b:9000",
            "--run",
            "exp1",
            "--group-size",
            "16",
            "--set",
            "max_operand=50",
            "--set",
            "note=hi",
        ])
        .expect("parses");
        let EnvCommand::Serve(args) = cli.command else {
            panic!("expected serve");
        };
        assert_eq!(args.play.policy.policy, PolicyKind::Vllm);
        assert_eq!(args.play.policy.servers.len(), 2);
        assert_eq!(args.play.env.group_size, Some(16));
        assert_eq!(
            args.play.env.settings[0],
            ("max_operand".into(), Value::from(50))
        );
        assert_eq!(
            args.play.env.settings[1],
            ("note".into(), Value::from("hi"))
        );
        let config = runner_config(&args);
        assert_eq!(config.run, "exp1");
        assert!(config.ensure_scores_are_not_same);

        let cli = Cli::try_parse_from([
            "env",
            "process",
            "arithmetic",
            "--out",
            "g.jsonl",
            "--groups",
            "3",
            "--policy",
            "baseline",
        ])
        .expect("parses");
        assert!(matches!(cli.command, EnvCommand::Process(a) if a.groups == 3));
        let cli = Cli::try_parse_from(["env", "evaluate", "arithmetic", "--out", "dir"]);
        assert!(matches!(
            cli.expect("parses").command,
            EnvCommand::Evaluate(_)
        ));
    }

    #[test]
    fn policies_missing_what_they_need_say_so_and_baseline_builds() {
        let cli = Cli::try_parse_from(["env", "evaluate", "arithmetic", "--out", "d"]).unwrap();
        let EnvCommand::Evaluate(mut args) = cli.command else {
            panic!("expected evaluate");
        };
        args.play.policy.policy = PolicyKind::Vllm;
        let err = build_policy(&args.play.policy)
            .err()
            .expect("no server given");
        assert!(err.to_string().contains("--server"), "{err}");
        args.play.policy.servers = vec!["http://127.0.0.1:9".into()];
        args.play.policy.model = Some("/nonexistent/model.gguf".into());
        let err = build_policy(&args.play.policy).err().expect("no tokenizer");
        assert!(format!("{err:#}").contains("model.gguf"), "{err:#}");
        args.play.policy.policy = PolicyKind::Embedded;
        assert!(build_policy(&args.play.policy).is_err());
        args.play.policy.model = None;
        args.play.policy.policy = PolicyKind::Baseline;
        assert!(build_policy(&args.play.policy).is_ok());
    }

    #[tokio::test]
    async fn process_runs_from_the_command_line_with_the_baseline() {
        let dir = crate::envs::TempDir::new("cli");
        let out = dir.0.join("g.jsonl");
        let out_arg = out.to_string_lossy().into_owned();
        let cli = Cli::try_parse_from([
            "env",
            "process",
            "arithmetic",
            "--out",
            &out_arg,
            "--groups",
            "2",
            "--policy",
            "baseline",
            "--group-size",
            "2",
        ])
        .unwrap();
        run(cli.command).await.expect("runs");
        assert_eq!(std::fs::read_to_string(&out).unwrap().lines().count(), 2);
        assert!(dir.0.join("g.html").exists());
    }
}
