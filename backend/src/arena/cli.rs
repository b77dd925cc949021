//! `lachesis arena …`: the arena's offline commands. `arena fit BATTLES.jsonl` rates the battles of
//! a Chatbot-Arena-format file (see [`super::battles_file`]) and prints the leaderboard.

use std::fs::File;
use std::io::{BufReader, Write};
use std::path::PathBuf;

use anyhow::Context;
use serde::Serialize;

use super::battles_file::{DEFAULT_MAX_BYTES, ParseOptions, ParsedBattles, parse_battles};
use super::bootstrap::{BootstrapOptions, Interval, Leaderboard, leaderboard};
use super::ratings::{FitOptions, RatingError};

/// The most bootstrap rounds accepted: every round keeps one rating per model until the intervals
/// are taken, so an absurd count would exhaust memory before it finished.
pub const MAX_ROUNDS: usize = 100_000;

#[derive(Debug, Clone, clap::Subcommand)]
pub enum ArenaCommand {
    /// Rate the battles of a Chatbot-Arena-format JSONL file (`model_a`, `model_b`, `winner` per
    /// line) and print the leaderboard with 95% bootstrap intervals and rank ranges.
    Fit(FitArgs),
}

#[derive(Debug, Clone, clap::Args)]
pub struct FitArgs {
    /// The battles, one JSON object per line.
    pub battles: PathBuf,
    /// Bootstrap rounds (resampled refits) behind the intervals.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(0..=MAX_ROUNDS as u64))]
    pub rounds: u64,
    /// Seed of the bootstrap's resampling.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Hold answer length fixed (every battle then needs numeric `len_a` and `len_b`).
    #[arg(long)]
    pub style_control: bool,
    /// Print the leaderboard as JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Skip battles whose `excluded` field is a string (how our export marks excluded votes).
    #[arg(long)]
    pub skip_excluded: bool,
    /// Refuse a file larger than this many bytes.
    #[arg(long, default_value_t = DEFAULT_MAX_BYTES)]
    pub max_bytes: u64,
}

/// Runs an arena command, printing to stdout.
pub fn run(command: ArenaCommand) -> anyhow::Result<()> {
    match command {
        ArenaCommand::Fit(args) => {
            let fitted = fit_file(&args)?;
            let text = if args.json {
                let mut s = serde_json::to_string_pretty(&report(&fitted))?;
                s.push('\n');
                s
            } else {
                render_table(&fitted.battles.names, &fitted.leaderboard) + &summary(&fitted)
            };
            std::io::stdout().lock().write_all(text.as_bytes())?;
            Ok(())
        }
    }
}

/// The battles read and the leaderboard fitted to them.
#[derive(Debug, Clone)]
pub struct Fitted {
    pub battles: ParsedBattles,
    pub leaderboard: Leaderboard,
    pub rounds: usize,
}

/// Reads and rates the file `args.battles`.
pub fn fit_file(args: &FitArgs) -> anyhow::Result<Fitted> {
    let file = File::open(&args.battles)
        .with_context(|| format!("cannot open {}", args.battles.display()))?;
    let options = ParseOptions {
        skip_excluded: args.skip_excluded,
        require_lengths: args.style_control,
        max_bytes: args.max_bytes,
        ..ParseOptions::default()
    };
    let battles = parse_battles(BufReader::new(file), &options)
        .with_context(|| format!("cannot read the battles in {}", args.battles.display()))?;
    // Bounded by the value parser, so this cannot truncate.
    let rounds = usize::try_from(args.rounds).unwrap_or(MAX_ROUNDS);
    let fit = FitOptions {
        style_control: args.style_control,
        ..FitOptions::default()
    };
    let boot = BootstrapOptions {
        rounds,
        confidence: 0.95,
        seed: args.seed,
    };
    let board = leaderboard(battles.names.len(), &battles.votes, fit, boot).map_err(|e| {
        let line = vote_of(&e).and_then(|k| battles.lines.get(k));
        match line {
            Some(line) => anyhow::anyhow!("{}: line {line}: {e}", args.battles.display()),
            None => anyhow::anyhow!("{}: {e}", args.battles.display()),
        }
    })?;
    Ok(Fitted {
        battles,
        leaderboard: board,
        rounds,
    })
}

/// The vote a rating error is about. The parser rejects everything the fitter would, so this is a
/// safety net that keeps the file's line in the message should the two ever drift apart.
fn vote_of(e: &RatingError) -> Option<usize> {
    match e {
        RatingError::ContenderOutOfRange { vote, .. }
        | RatingError::SelfComparison { vote, .. }
        | RatingError::InvalidLength { vote }
        | RatingError::MissingLength { vote } => Some(*vote),
        RatingError::NoVotes | RatingError::InvalidPenalty(_) | RatingError::NotConverged(_) => {
            None
        }
    }
}

/// A rank as shown: a single number when the intervals settle it, else the range `best-worst`.
pub fn rank_label(best: usize, worst: usize) -> String {
    if best == worst {
        best.to_string()
    } else {
        format!("{best}-{worst}")
    }
}

fn interval_label(i: &Interval) -> String {
    format!("[{:.1}, {:.1}]", i.lower, i.upper)
}

/// The leaderboard as a plain-text table, best first: rank (a range where the 95% intervals do not
/// separate the model from its neighbours), model, rating (1 decimal), 95% interval, votes.
pub fn render_table(names: &[String], board: &Leaderboard) -> String {
    let header = ["Rank", "Model", "Rating", "95% interval", "Votes"];
    let rows: Vec<[String; 5]> = board
        .rows
        .iter()
        .map(|r| {
            [
                rank_label(r.rank_best, r.rank_worst),
                names
                    .get(r.contender)
                    .cloned()
                    .unwrap_or_else(|| format!("#{}", r.contender)),
                format!("{:.1}", r.rating),
                interval_label(&r.interval),
                r.votes.to_string(),
            ]
        })
        .collect();
    let width = |c: usize| {
        rows.iter()
            .map(|r| r[c].chars().count())
            .chain([header[c].chars().count()])
            .max()
            .unwrap_or(0)
    };
    let widths: Vec<usize> = (0..header.len()).map(width).collect();
    // Text columns align left, numbers right.
    let line = |cells: [&str; 5]| {
        let mut s = String::new();
        for (c, cell) in cells.iter().enumerate() {
            let pad = widths[c].saturating_sub(cell.chars().count());
            if c > 0 {
                s.push_str("  ");
            }
            if c == 1 || c == 0 {
                s.push_str(cell);
                s.extend(std::iter::repeat_n(' ', pad));
            } else {
                s.extend(std::iter::repeat_n(' ', pad));
                s.push_str(cell);
            }
        }
        s.truncate(s.trim_end().len());
        s.push('\n');
        s
    };
    let mut out = line(header);
    for r in &rows {
        out.push_str(&line([&r[0], &r[1], &r[2], &r[3], &r[4]]));
    }
    out
}

/// The lines under the table: what was read and, with style control, the length coefficient.
fn summary(f: &Fitted) -> String {
    let b = &f.battles;
    let mut s = format!(
        "\n{} battles, {} models, {} bootstrap rounds",
        b.votes.len(),
        b.names.len(),
        f.rounds
    );
    if b.skipped_void > 0 {
        s.push_str(&format!(", {} void skipped", b.skipped_void));
    }
    if b.skipped_excluded > 0 {
        s.push_str(&format!(", {} excluded skipped", b.skipped_excluded));
    }
    s.push('\n');
    if let Some(beta) = f.leaderboard.style_coefficient {
        s.push_str(&format!(
            "style coefficient (log-odds per unit of normalised length difference): {beta:.3}"
        ));
        if let Some(i) = f.leaderboard.style_interval {
            s.push_str(&format!(" [{:.3}, {:.3}]", i.lower, i.upper));
        }
        s.push('\n');
    }
    s
}

/// `--json`'s output.
#[derive(Debug, Serialize)]
pub struct FitReport {
    pub battles: usize,
    pub models: usize,
    pub rounds: usize,
    pub skipped_void: usize,
    pub skipped_excluded: usize,
    /// Log-odds per unit of normalised length difference; only with style control.
    pub style_coefficient: Option<f64>,
    pub style_interval: Option<Interval>,
    /// Best first.
    pub rows: Vec<ReportRow>,
}

#[derive(Debug, Serialize)]
pub struct ReportRow {
    /// As in the table: `3` or `2-4`.
    pub rank: String,
    pub rank_best: usize,
    pub rank_worst: usize,
    pub model: String,
    pub rating: f64,
    pub lower: f64,
    pub upper: f64,
    pub votes: usize,
}

/// The leaderboard with names, for `--json`.
pub fn report(f: &Fitted) -> FitReport {
    let b = &f.battles;
    FitReport {
        battles: b.votes.len(),
        models: b.names.len(),
        rounds: f.rounds,
        skipped_void: b.skipped_void,
        skipped_excluded: b.skipped_excluded,
        style_coefficient: f.leaderboard.style_coefficient,
        style_interval: f.leaderboard.style_interval,
        rows: f
            .leaderboard
            .rows
            .iter()
            .map(|r| ReportRow {
                rank: rank_label(r.rank_best, r.rank_worst),
                rank_best: r.rank_best,
                rank_worst: r.rank_worst,
                model: b.names.get(r.contender).cloned().unwrap_or_default(),
                rating: r.rating,
                lower: r.interval.lower,
                upper: r.interval.upper,
                votes: r.votes,
            })
            .collect(),
    }
}
