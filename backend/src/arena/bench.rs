//! `lachesis bench arena`: our leaderboard (Bradley–Terry fit plus bootstrap) against a
//! FastChat-style Python reference (`scripts/bench_arena.py`: scikit-learn's LogisticRegression on
//! FastChat's `compute_mle_elo` design matrix, bootstrap by resampling battles and refitting), on
//! the same simulated battles, in one run.
//!
//! Votes are drawn from known strengths and written to a temporary JSONL in Chatbot Arena's format;
//! both sides read that file. Only the rating work is timed, not reading the file. Python runs
//! fewer bootstrap rounds (each is a full dense refit, seconds apiece at the default size) and its
//! mean time per round is extrapolated to ours; the output says so.

use std::fs::File;
use std::io::{BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{Context, bail};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::Deserialize;

use super::battles_file::{ParseOptions, parse_battles};
use super::bootstrap::{BootstrapOptions, leaderboard};
use super::ratings::{ELO_OFFSET, FitOptions, Outcome, fit_bradley_terry};
use crate::bench::python_peer::{PythonPeerArgs, PythonPeerDefaults};

/// Share of simulated battles that end in a tie or both-bad (split evenly), about what the public
/// Chatbot Arena data has.
const TIE_SHARE: f64 = 0.3;
/// Half the spread of the simulated strengths in log-odds units: ±2 is about ±350 rating points,
/// the spread of a real leaderboard's top to bottom.
const STRENGTH_SPREAD: f64 = 2.0;

#[derive(Debug, Clone, clap::Args)]
pub struct ArenaBenchArgs {
    /// Simulated contenders.
    #[arg(long, default_value_t = 50)]
    pub contenders: usize,
    /// Simulated battles.
    #[arg(long, default_value_t = 200_000)]
    pub votes: usize,
    /// Bootstrap rounds for our leaderboard; Python's time is extrapolated to this many.
    #[arg(long, default_value_t = 1000)]
    pub rounds: usize,
    /// Bootstrap rounds Python actually runs (its mean per round is extrapolated to `--rounds`).
    #[arg(long, default_value_t = 20)]
    pub python_rounds: usize,
    /// Seed of the simulation and of both bootstraps.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// FastChat's ratings in Python (`--python`, `--script`).
    #[command(flatten)]
    pub reference: PythonPeerArgs<Self>,
}

impl PythonPeerDefaults for ArenaBenchArgs {
    const PYTHON_ENV: &'static str = "LACHESIS_ARENA_PYTHON";
    const PYTHON: &'static str = ".venv/arena-ref/bin/python";
    const PYTHON_HELP: &'static str = "A Python with numpy and scikit-learn";
    const SCRIPT: &'static str = "scripts/bench_arena.py";
}

/// The figures of one run.
#[derive(Debug, Clone, PartialEq)]
pub struct ArenaBenchReport {
    pub contenders: usize,
    pub votes: usize,
    pub rounds: usize,
    pub python_rounds: usize,
    /// Our point fit alone.
    pub ours_fit_seconds: f64,
    /// Our whole leaderboard: point fit plus `rounds` bootstrap refits (and intervals, ranks).
    pub ours_seconds: f64,
    /// Python's point fit, building the design matrix included (FastChat builds it in every fit).
    pub python_fit_seconds: f64,
    /// Python's mean time per bootstrap round (resample, build, refit).
    pub python_round_seconds: f64,
    /// `python_fit_seconds + rounds · python_round_seconds`.
    pub python_extrapolated_seconds: f64,
    /// `python_extrapolated_seconds / ours_seconds`: how many times faster ours is.
    pub ratio: Option<f64>,
    /// Largest |ours − Python| over the contenders' point ratings, Python's shifted to mean 1000.
    pub max_rating_diff: f64,
    /// The reference's versions, as it reported them.
    pub python_versions: String,
}

/// What `scripts/bench_arena.py` prints.
#[derive(Debug, Deserialize)]
struct PythonResult {
    models: Vec<String>,
    ratings: Vec<f64>,
    fit_seconds: f64,
    round_seconds: Vec<f64>,
    versions: String,
}

/// Simulates the battles, times both sides, and compares their ratings.
pub fn run_arena_bench(args: &ArenaBenchArgs) -> anyhow::Result<ArenaBenchReport> {
    if args.contenders < 2 {
        bail!("--contenders must be at least 2");
    }
    if args.votes == 0 {
        bail!("--votes must be positive");
    }
    let strengths = simulated_strengths(args.contenders);
    let file = TempFile(std::env::temp_dir().join(format!(
        "lachesis-bench-arena-{}-{}.jsonl",
        std::process::id(),
        args.seed
    )));
    write_battles(&file.0, &strengths, args.votes, args.seed)?;

    // Our side reads the same file through the same parser as `lachesis arena fit` (untimed).
    let reader = BufReader::new(File::open(&file.0)?);
    let battles = parse_battles(reader, &ParseOptions::default())?;
    let n = battles.names.len();
    let started = Instant::now();
    let point = fit_bradley_terry(n, &battles.votes, FitOptions::default())?;
    let ours_fit_seconds = started.elapsed().as_secs_f64();
    let boot = BootstrapOptions {
        rounds: args.rounds,
        confidence: 0.95,
        seed: args.seed,
    };
    let started = Instant::now();
    let board = leaderboard(n, &battles.votes, FitOptions::default(), boot)?;
    let ours_seconds = started.elapsed().as_secs_f64();
    std::hint::black_box(&board);

    let py = run_python(args, &file.0)?;
    let python_round_seconds = mean(&py.round_seconds);
    let python_extrapolated_seconds = py.fit_seconds + args.rounds as f64 * python_round_seconds;

    let ours = point.elo();
    let theirs = align_python(&battles.names, &py)?;
    let max_rating_diff = max_abs_diff(&ours, &theirs);
    Ok(ArenaBenchReport {
        contenders: n,
        votes: battles.votes.len(),
        rounds: args.rounds,
        python_rounds: py.round_seconds.len(),
        ours_fit_seconds,
        ours_seconds,
        python_fit_seconds: py.fit_seconds,
        python_round_seconds,
        python_extrapolated_seconds,
        ratio: (ours_seconds > 0.0).then(|| python_extrapolated_seconds / ours_seconds),
        max_rating_diff,
        python_versions: py.versions,
    })
}

/// Prints the report to stdout.
pub fn print_arena_report(r: &ArenaBenchReport) {
    println!(
        "arena leaderboard: {} contenders, {} battles, {} bootstrap rounds",
        r.contenders, r.votes, r.rounds
    );
    println!("reference: {}", r.python_versions);
    println!();
    println!("{:<44} {:>12}", "", "seconds");
    println!("{:<44} {:>12.4}", "ours: point fit", r.ours_fit_seconds);
    println!(
        "{:<44} {:>12.4}",
        format!("ours: fit + {} rounds", r.rounds),
        r.ours_seconds
    );
    println!(
        "{:<44} {:>12.4}",
        "python (FastChat-style): point fit", r.python_fit_seconds
    );
    println!(
        "{:<44} {:>12.4}",
        format!("python: per round (mean of {})", r.python_rounds),
        r.python_round_seconds
    );
    println!(
        "{:<44} {:>12.4}",
        format!("python: fit + {} rounds, extrapolated", r.rounds),
        r.python_extrapolated_seconds
    );
    match r.ratio {
        Some(x) => println!("python / ours: {x:.1}x"),
        None => println!("python / ours: n/a"),
    }
    println!();
    println!(
        "Python ran {} bootstrap rounds; its time for {} is its point fit plus {} times its mean \
         round.",
        r.python_rounds, r.rounds, r.rounds
    );
    println!(
        "max |rating difference|, ours vs python point fit: {:.4} (python's ratings shifted to \
         mean 1000; ours: 1000 + 400/ln10·θ with Σθ = 0)",
        r.max_rating_diff
    );
}

/// Strengths evenly spread over ±[`STRENGTH_SPREAD`], summing to zero like our fitted ones.
fn simulated_strengths(n: usize) -> Vec<f64> {
    let step = 2.0 * STRENGTH_SPREAD / (n.max(2) - 1) as f64;
    (0..n).map(|k| -STRENGTH_SPREAD + step * k as f64).collect()
}

fn logistic(z: f64) -> f64 {
    1.0 / (1.0 + (-z).exp())
}

/// Writes `votes` battles between uniformly drawn distinct pairs, in Chatbot Arena's format: a tie
/// or both-bad with probability [`TIE_SHARE`], else a win drawn from the Bradley–Terry model.
fn write_battles(path: &Path, strengths: &[f64], votes: usize, seed: u64) -> anyhow::Result<()> {
    let n = strengths.len();
    let mut rng = StdRng::seed_from_u64(seed);
    let mut out = BufWriter::new(
        File::create(path).with_context(|| format!("cannot create {}", path.display()))?,
    );
    for _ in 0..votes {
        let a = rng.random_range(0..n);
        let b = (a + rng.random_range(1..n)) % n;
        let u = rng.random::<f64>();
        let outcome = if u < TIE_SHARE / 2.0 {
            Outcome::Tie
        } else if u < TIE_SHARE {
            Outcome::BothBad
        } else if rng.random::<f64>() < logistic(strengths[a] - strengths[b]) {
            Outcome::AWins
        } else {
            Outcome::BWins
        };
        let winner = match outcome {
            Outcome::AWins => "model_a",
            Outcome::BWins => "model_b",
            Outcome::Tie => "tie",
            Outcome::BothBad => "tie (bothbad)",
        };
        writeln!(
            out,
            r#"{{"model_a":"model-{a}","model_b":"model-{b}","winner":"{winner}"}}"#
        )?;
    }
    out.flush()?;
    Ok(())
}

fn run_python(args: &ArenaBenchArgs, battles: &Path) -> anyhow::Result<PythonResult> {
    let out = Command::new(&args.reference.python)
        .arg(&args.reference.script)
        .arg(battles)
        .arg("--rounds")
        .arg(args.python_rounds.to_string())
        .arg("--seed")
        .arg(args.seed.to_string())
        .output()
        .with_context(|| {
            format!(
                "cannot run {} (set --python or LACHESIS_ARENA_PYTHON; scripts/ensure-arena-ref.sh \
                 prints one)",
                args.reference.python.display()
            )
        })?;
    if !out.status.success() {
        bail!(
            "{} {} failed ({}): {}",
            args.reference.python.display(),
            args.reference.script.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    serde_json::from_slice(&out.stdout).with_context(|| {
        format!(
            "unexpected output from {}: {}",
            args.reference.script.display(),
            String::from_utf8_lossy(&out.stdout).trim()
        )
    })
}

/// Python's point ratings in our contender order, shifted to mean [`ELO_OFFSET`] (its unpenalised
/// fit leaves the common offset to the solver).
fn align_python(names: &[String], py: &PythonResult) -> anyhow::Result<Vec<f64>> {
    if py.models.len() != py.ratings.len() {
        bail!("the Python reference returned mismatched models and ratings");
    }
    let mean = mean(&py.ratings);
    names
        .iter()
        .map(|name| {
            py.models
                .iter()
                .position(|m| m == name)
                .map(|k| py.ratings[k] - mean + ELO_OFFSET)
                .with_context(|| format!("the Python reference did not rate {name}"))
        })
        .collect()
}

fn mean(xs: &[f64]) -> f64 {
    if xs.is_empty() {
        0.0
    } else {
        xs.iter().sum::<f64>() / xs.len() as f64
    }
}

fn max_abs_diff(a: &[f64], b: &[f64]) -> f64 {
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f64::max)
}

/// Removes the simulated battles when the run ends, whichever way it ends.
struct TempFile(PathBuf);

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_ratings_are_aligned_by_name_and_mean() {
        let py = PythonResult {
            models: vec!["b".into(), "a".into()],
            ratings: vec![1500.0, 1300.0],
            fit_seconds: 0.0,
            round_seconds: vec![],
            versions: String::new(),
        };
        let names = vec!["a".to_owned(), "b".to_owned()];
        assert_eq!(align_python(&names, &py).unwrap(), vec![900.0, 1100.0]);
        let missing = vec!["c".to_owned()];
        assert!(align_python(&missing, &py).is_err());
    }

    #[test]
    fn simulated_strengths_are_centred() {
        let s = simulated_strengths(5);
        assert!(s.iter().sum::<f64>().abs() < 1e-12);
        assert!((s[4] - s[0] - 2.0 * STRENGTH_SPREAD).abs() < 1e-12);
    }

    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        args: ArenaBenchArgs,
    }

    fn parse(argv: &[&str]) -> ArenaBenchArgs {
        use clap::Parser;
        Cli::parse_from(std::iter::once("bench").chain(argv.iter().copied())).args
    }

    #[test]
    fn defaults_are_the_documented_sizes() {
        let a = parse(&["--python", "py"]);
        assert_eq!(
            (a.contenders, a.votes, a.rounds, a.python_rounds, a.seed),
            (50, 200_000, 1000, 20, 0)
        );
    }

    /// The whole benchmark against the real Python reference, at sizes small enough for a debug
    /// build: it needs `LACHESIS_ARENA_PYTHON` (the test command sets it from
    /// scripts/ensure-arena-ref.sh). `LACHESIS_ARENA_BENCH_ARGS` sets other sizes
    /// (`lachesis bench arena`'s flags).
    #[test]
    fn benchmark_runs_against_python() {
        let sizes = std::env::var("LACHESIS_ARENA_BENCH_ARGS").unwrap_or_else(|_| {
            "--contenders 8 --votes 5000 --rounds 20 --python-rounds 3 --seed 1".into()
        });
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/bench_arena.py");
        let script = script.to_string_lossy().into_owned();
        let mut argv: Vec<&str> = sizes.split_whitespace().collect();
        argv.extend(["--script", &script]);
        let args = parse(&argv);
        let r = run_arena_bench(&args).unwrap();
        print_arena_report(&r);
        assert_eq!(r.python_rounds, args.python_rounds);
        assert!(r.max_rating_diff < 0.5, "{r:?}");
    }
}
