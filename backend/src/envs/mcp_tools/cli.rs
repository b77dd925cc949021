//! `lachesis mcp`: the MCP tools environment from the command line.

use std::path::PathBuf;
use std::time::Instant;

use clap::Subcommand;

use super::{McpToolsEnv, bfcl, solver};
use crate::envs::EnvOptions;

#[derive(Subcommand)]
pub enum McpCommand {
    /// Plays generated tasks with their planned calls on fresh servers and checks the outcomes:
    /// the proof that the tasks are solvable. Prints `solved P% (n/N)`.
    Solve {
        #[arg(long, default_value_t = 200)]
        tasks: usize,
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Episodes played at once (each starts its own servers).
        #[arg(long, default_value_t = 4)]
        concurrency: usize,
    },
    /// Asks a policy (the embedded model by default) the Berkeley Function Calling Leaderboard's
    /// non-live questions and prints its accuracy per category. The data come from
    /// scripts/ensure-bfcl-data.sh.
    Bfcl(Box<BfclArgs>),
}

#[derive(Debug, Clone, clap::Args)]
pub struct BfclArgs {
    /// The first N questions of each category (all when absent).
    #[arg(long)]
    pub per_category: Option<usize>,
    /// The data directory (`LACHESIS_BFCL_DIR`, else .venv/bfcl/bfcl_eval/data).
    #[arg(long)]
    pub data: Option<PathBuf>,
    #[arg(long, default_value_t = bfcl::MIN_MAX_TOKENS)]
    pub max_tokens: usize,
    /// Also print each wrong answer and why.
    #[arg(long)]
    pub show_failures: bool,
    #[command(flatten)]
    pub policy: crate::envs::cli::PolicyArgs,
}

pub async fn run(command: McpCommand) -> anyhow::Result<()> {
    match command {
        McpCommand::Solve {
            tasks,
            seed,
            concurrency,
        } => {
            let env = McpToolsEnv::new(&EnvOptions::default())?;
            env.catalogue().await?;
            let started = Instant::now();
            let report = solver::solve(&env, tasks, seed, concurrency).await?;
            let seconds = started.elapsed().as_secs_f64();
            for (template, why) in &report.failures {
                eprintln!("unsolved {template}: {why}");
            }
            println!(
                "solved {:.1}% ({}/{}) in {seconds:.1} s, {:.2} episodes/s",
                report.percent(),
                report.solved,
                report.total,
                report.total as f64 / seconds.max(1e-9)
            );
            Ok(())
        }
        McpCommand::Bfcl(args) => run_bfcl(&args).await,
    }
}

async fn run_bfcl(args: &BfclArgs) -> anyhow::Result<()> {
    let policy = crate::envs::cli::build_policy(&args.policy)?;
    let dir = args.data.clone().unwrap_or_else(bfcl::data_dir);
    let started = Instant::now();
    let report = bfcl::evaluate(policy.as_ref(), &dir, args.per_category, args.max_tokens).await?;
    let seconds = started.elapsed().as_secs_f64();
    if args.show_failures {
        for outcome in &report.outcomes {
            if let Some(why) = &outcome.failure {
                eprintln!(
                    "{}: {why}\n  answered: {:?}",
                    outcome.id, outcome.completion
                );
            }
        }
    }
    println!("BFCL (non-live, AST) with {}", policy.name());
    for score in &report.categories {
        println!(
            "{:<18} {:5.1}% ({}/{}, {} unparsed)",
            score.category.name(),
            100.0 * score.accuracy(),
            score.correct,
            score.total,
            score.unparsed
        );
    }
    let questions: usize = report.categories.iter().map(|s| s.total).sum();
    println!("{questions} questions in {seconds:.1} s");
    Ok(())
}
