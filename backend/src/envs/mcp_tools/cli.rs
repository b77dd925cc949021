//! `lachesis mcp`: the MCP tools environment from the command line.

use std::time::Instant;

use clap::Subcommand;

use super::{McpToolsEnv, solver};
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
    }
}
