//! `lachesis protein design`: the four stages once on a target, with the scripted designer, each
//! stage's outcome printed as it comes.

use std::path::PathBuf;

use clap::Subcommand;
use futures::future::BoxFuture;
use lachesis_shared::live::LiveEvent;
use lachesis_shared::protein::{ProteinEpisodeStep, ToolBackend};
use serde_json::{Map, Value, json};

use super::ProteinBinderEnv;
use super::episode::Observer;
use super::plan::PlanPolicy;
use crate::envs::EnvOptions;
use crate::envs::in_process::LiveFeed;

#[derive(Subcommand)]
pub enum ProteinCommand {
    /// Runs target structure, binder backbone, binder sequence and complex evaluation once on a
    /// target, choosing hotspots from its exposed surface, and prints each stage's outcome.
    Design(DesignArgs),
}

#[derive(Debug, clap::Args)]
pub struct DesignArgs {
    /// The target's PDB file (its first chain); the shipped debug target when absent.
    #[arg(long)]
    pub target: Option<PathBuf>,
    /// A NIM base URL for every tool (NVIDIA's is https://health.api.nvidia.com, with
    /// NVIDIA_API_KEY set); the local services when absent.
    #[arg(long)]
    pub nim_url: Option<String>,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// ProteinMPNN's weights, for the local services.
    #[arg(long, env = "LACHESIS_PROTEINMPNN_WEIGHTS")]
    pub proteinmpnn_weights: Option<PathBuf>,
}

/// Prints an episode's steps.
struct Printer;

fn backend_label(backend: ToolBackend) -> &'static str {
    match backend {
        ToolBackend::Nim => "NVIDIA NIM",
        ToolBackend::Local => "ProteinMPNN on this machine",
        ToolBackend::StandIn => "stand-in: geometric model, not a prediction",
    }
}

impl LiveFeed for Printer {
    fn publish(&self, event: LiveEvent) -> BoxFuture<'_, ()> {
        if let LiveEvent::ProteinEpisode(event) = event {
            match event.step {
                ProteinEpisodeStep::Started { target, sequence } => {
                    println!("target {target} ({} residues): {sequence}", sequence.len());
                }
                ProteinEpisodeStep::Called { stage, arguments } => {
                    println!("\n{}\n  call {arguments}", stage.label());
                }
                ProteinEpisodeStep::Answered {
                    ok,
                    summary,
                    waited_ms,
                    worked_ms,
                    backend,
                    ..
                } => {
                    let mark = if ok { "ok" } else { "FAILED" };
                    println!("  {mark} [{}] {summary}", backend_label(backend));
                    println!("  {worked_ms} ms working, {waited_ms} ms waiting");
                }
                ProteinEpisodeStep::Refused { reason } => println!("  refused: {reason}"),
                ProteinEpisodeStep::Finished(outcome) => {
                    println!(
                        "\n{} of 4 stages; reward {:.3}",
                        outcome.stages, outcome.reward
                    );
                    if let Some(plddt) = outcome.plddt {
                        println!("complex mean pLDDT {plddt:.1}");
                    }
                    match outcome.iptm {
                        Some(iptm) => println!("ipTM {iptm:.3}"),
                        None => println!("ipTM: not returned by the complex prediction"),
                    }
                }
            }
        }
        Box::pin(async {})
    }
}

pub async fn run(command: ProteinCommand) -> anyhow::Result<()> {
    let ProteinCommand::Design(args) = command;
    let mut settings = Map::new();
    if let Some(target) = &args.target {
        settings.insert("targets".into(), json!([target]));
        settings.insert("debug_target".into(), Value::Bool(false));
    }
    if let Some(url) = &args.nim_url {
        settings.insert("nim_url".into(), Value::String(url.clone()));
    }
    if let Some(weights) = &args.proteinmpnn_weights {
        settings.insert("proteinmpnn_weights".into(), json!(weights));
    }
    let options = EnvOptions {
        seed: args.seed,
        settings,
        ..EnvOptions::default()
    };
    let env = ProteinBinderEnv::new(&options)?;
    let policy = PlanPolicy::new(args.seed);
    let printer = Printer;
    let observer = Observer {
        feed: Some(&printer),
        episode: 0,
    };
    let episode = env.play(0, args.seed, &policy, &observer).await?;
    println!(
        "time: {} ms waiting on tools, {} ms of tools working, {} ms choosing calls",
        episode.waited_ms, episode.worked_ms, episode.model_ms
    );
    if episode.stages < 4 {
        anyhow::bail!("the design stopped after {} of 4 stages", episode.stages);
    }
    Ok(())
}
