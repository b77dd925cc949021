//! `lachesis spatial ...`: prove generated tasks solvable, show a task, benchmark the physics.

use std::path::PathBuf;

use anyhow::Context;
use lachesis_shared::spatial::{DIFFICULTIES, describe_task};

use crate::envs::spatial::{bench, generate::generate, solve};

#[derive(Debug, Clone, clap::Subcommand)]
pub enum SpatialCommand {
    /// Run the built-in solver on N tasks per difficulty; prints `difficulty D: solved P% (n/N)`.
    Solve {
        /// One difficulty (1-4); all of them when absent.
        #[arg(long, value_parser = clap::value_parser!(u8).range(1..=4))]
        difficulty: Option<u8>,
        #[arg(long, default_value_t = 100)]
        tasks: u64,
        /// The first task's seed; the others follow it.
        #[arg(long, default_value_t = 0)]
        seed: u64,
    },
    /// Print a task's text and JSON.
    Task {
        #[arg(long, default_value_t = 0)]
        seed: u64,
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u8).range(1..=4))]
        difficulty: u8,
    },
    /// Step the 200-body benchmark scene and print steps per second (JSON).
    Bench {
        #[arg(long, default_value_t = 200)]
        bodies: usize,
        #[arg(long, default_value_t = 1000)]
        steps: u32,
        /// Also write the scene as JSON here (for the PyBullet side of scripts/bench-physics.sh).
        #[arg(long)]
        scene_out: Option<PathBuf>,
    },
}

pub fn run(command: SpatialCommand) -> anyhow::Result<()> {
    match command {
        SpatialCommand::Solve {
            difficulty,
            tasks,
            seed,
        } => {
            let difficulties: Vec<u8> = match difficulty {
                Some(d) => vec![d],
                None => DIFFICULTIES.collect(),
            };
            for d in difficulties {
                let (solved, total) = solve::solve_rate(d, tasks, seed);
                let percent = if total == 0 {
                    0.0
                } else {
                    100.0 * solved as f64 / total as f64
                };
                println!("difficulty {d}: solved {percent:.1}% ({solved}/{total})");
            }
            Ok(())
        }
        SpatialCommand::Task { seed, difficulty } => {
            let task = generate(seed, difficulty);
            println!("{}", describe_task(&task));
            println!("{}", serde_json::to_string_pretty(&task)?);
            Ok(())
        }
        SpatialCommand::Bench {
            bodies,
            steps,
            scene_out,
        } => {
            if let Some(path) = scene_out {
                let scene = serde_json::to_vec_pretty(&bench::scene(bodies))?;
                std::fs::write(&path, scene)
                    .with_context(|| format!("writing {}", path.display()))?;
            }
            let report = bench::run(bodies, steps);
            println!("{}", serde_json::to_string(&report)?);
            Ok(())
        }
    }
}
