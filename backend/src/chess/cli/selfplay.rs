//! `lachesis chess selfplay`: the agent learns from games against its version 0, judged by
//! Stockfish or by its own shallow search.

use std::path::PathBuf;

use clap::{Args, ValueEnum};
use lachesis_chess::sacrifice_price::{self, SacrificeTarget};
use lachesis_chess::selfplay::{self, SelfPlayConfig, VersionStats};
use lachesis_chess::stockfish::{self, EngineConfig, EnginePool, SearchLimit};

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SelfPlayJudge {
    /// Stockfish decides soundness; each likely move of the agent's is judged, and the agent
    /// learns from all of them (the expected policy gradient).
    Stockfish,
    /// The shallow search alone (material offered against what a depth-2 search says it costs).
    Search,
}

#[derive(Args)]
pub struct SelfPlayArgs {
    #[arg(long, default_value_t = 50)]
    pub games: usize,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    #[arg(long, value_enum, default_value = "stockfish")]
    pub judge: SelfPlayJudge,
    /// Games each policy version plays before it learns from them.
    #[arg(long, default_value_t = 10)]
    pub games_per_version: usize,
    /// Games version 0 and the final version each play against version 0 after learning,
    /// judged but not learned from; the summary compares them. 0 compares the first and last
    /// learning versions instead.
    #[arg(long, default_value_t = selfplay::DEFAULT_EVALUATION_GAMES)]
    pub evaluation_games: usize,
    /// How many earlier versions' judged positions each update learns from again, besides the
    /// games just played (Stockfish judging only; 0 learns from the new games alone).
    #[arg(long, default_value_t = selfplay::DEFAULT_REPLAY_VERSIONS)]
    pub replay_versions: usize,
    /// Sacrifices a move the learner is held to: a price on offering material, paid while a
    /// version sacrifices less often and charged while it sacrifices more (Stockfish judging
    /// only). 0 leaves the rate to the returns alone.
    #[arg(long, default_value_t = sacrifice_price::DEFAULT_SACRIFICE_TARGET)]
    pub sacrifice_target: f64,
    /// What offering material adds to a move's return after a version that never sacrificed
    /// (a sound sacrifice earns 3).
    #[arg(long, default_value_t = sacrifice_price::DEFAULT_SACRIFICE_PRICE)]
    pub sacrifice_price: f64,
    #[command(flatten)]
    pub engine: EngineArgs,
    /// Write the last version's parameters here (JSON), for `lachesis chess rate --policy`.
    #[arg(long)]
    pub save_policy: Option<PathBuf>,
}

#[derive(Args)]
pub struct EngineArgs {
    /// The Stockfish binary (default: Debian's /usr/games/stockfish or `stockfish` on PATH).
    #[arg(long, env = "LACHESIS_STOCKFISH")]
    pub stockfish: Option<PathBuf>,
    /// Plies Stockfish searches per judged position.
    #[arg(long, default_value_t = 8)]
    pub stockfish_depth: u32,
}

impl EngineArgs {
    fn path(&self) -> anyhow::Result<PathBuf> {
        self.stockfish
            .clone()
            .or_else(stockfish::locate)
            .ok_or_else(|| {
                anyhow::anyhow!(
                    "no Stockfish found: apt-get install stockfish, or pass --stockfish PATH"
                )
            })
    }
}

impl SelfPlayArgs {
    /// The rate the learner is held to, if any; a rate outside [0, 1] or a price that is negative
    /// or not a number is refused.
    fn sacrifice_target(&self) -> anyhow::Result<Option<SacrificeTarget>> {
        if !(0.0..=1.0).contains(&self.sacrifice_target) {
            anyhow::bail!(
                "--sacrifice-target is sacrifices a move, from 0 to 1 (got {})",
                self.sacrifice_target
            );
        }
        if !(self.sacrifice_price.is_finite() && self.sacrifice_price >= 0.0) {
            anyhow::bail!(
                "--sacrifice-price must be 0 or more (got {})",
                self.sacrifice_price
            );
        }
        Ok((self.sacrifice_target > 0.0).then_some(SacrificeTarget {
            rate: self.sacrifice_target,
            price: self.sacrifice_price,
        }))
    }
}

pub(super) fn selfplay(args: SelfPlayArgs) -> anyhow::Result<()> {
    let config = SelfPlayConfig {
        sacrifice_target: args.sacrifice_target()?,
        games: args.games,
        seed: args.seed,
        games_per_version: args.games_per_version,
        evaluation_games: args.evaluation_games,
        replay_versions: args.replay_versions,
        ..SelfPlayConfig::default()
    };
    let pool = match args.judge {
        // Two: learning searches on one at a time, the evaluation's two versions each on its own.
        SelfPlayJudge::Stockfish => Some(EnginePool::start(EngineConfig {
            limit: SearchLimit::Depth(args.engine.stockfish_depth),
            processes: 2,
            ..EngineConfig::new(args.engine.path()?)
        })?),
        SelfPlayJudge::Search => None,
    };
    println!(
        "version  games  agent moves  sacrifice rate (95%)  sound (95%)  loss cp  aggression  reward  price   W/D/L"
    );
    let report = selfplay::run(&config, pool.as_ref(), |v| print_row(v, ""))?;
    if let Some(evaluation) = &report.evaluation {
        println!(
            "after learning, {} games each against version 0, judged and not learned from:",
            config.evaluation_games
        );
        print_row(&evaluation.version_0, " v0");
        print_row(&evaluation.final_version, " final");
    }
    let params = &report.final_params;
    let weights: Vec<String> = params
        .named_weights()
        .iter()
        .map(|(name, w)| format!("{name} {w:.2}"))
        .collect();
    println!(
        "final weights (version {}): {}",
        params.version,
        weights.join(", ")
    );
    if let Some(path) = &args.save_policy {
        std::fs::write(path, serde_json::to_string_pretty(params)?)?;
        println!("saved version {} to {}", params.version, path.display());
    }
    println!("{}", report.margins_line());
    println!("{}", report.summary_line());
    Ok(())
}

/// One version's row of the table; `label` marks the rows measured after learning.
fn print_row(v: &VersionStats, label: &str) {
    println!(
        "{:>7}  {:>5}  {:>11}  {:>20}  {:>11}  {:>7.0}  {:>10.2}  {:>6.3}  {:>5.2}   {}/{}/{}{label}",
        v.version,
        v.games,
        v.agent_moves,
        v.rate_with_margin(),
        v.sound_share_with_margin(),
        v.mean_loss_cp,
        v.mean_aggression,
        v.mean_reward,
        v.sacrifice_price,
        v.wins,
        v.draws,
        v.losses
    );
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct SelfPlay {
        #[command(flatten)]
        args: SelfPlayArgs,
    }

    fn target(flags: &[&str]) -> anyhow::Result<Option<SacrificeTarget>> {
        let flags = std::iter::once("selfplay").chain(flags.iter().copied());
        SelfPlay::try_parse_from(flags)
            .unwrap()
            .args
            .sacrifice_target()
    }

    #[test]
    fn version_0_and_the_final_version_play_a_hundred_evaluation_games_unless_told() {
        let parse = |flags: &[&str]| {
            let flags = std::iter::once("selfplay").chain(flags.iter().copied());
            SelfPlay::try_parse_from(flags)
                .unwrap()
                .args
                .evaluation_games
        };
        assert_eq!(parse(&[]), 100);
        assert_eq!(parse(&["--evaluation-games", "20"]), 20);
        assert_eq!(parse(&["--evaluation-games", "0"]), 0);
    }

    #[test]
    fn the_sacrifice_target_has_a_default_a_flag_and_bounds() {
        assert_eq!(target(&[]).unwrap(), Some(SacrificeTarget::default()));
        assert_eq!(
            target(&["--sacrifice-target", "0.3", "--sacrifice-price", "2"]).unwrap(),
            Some(SacrificeTarget {
                rate: 0.3,
                price: 2.0
            })
        );
        assert_eq!(target(&["--sacrifice-target", "0"]).unwrap(), None);
        for (flag, value) in [
            ("--sacrifice-target", "1.5"),
            ("--sacrifice-target", "-0.1"),
            ("--sacrifice-price", "-1"),
            ("--sacrifice-price", "NaN"),
        ] {
            let refused = target(&[&format!("{flag}={value}")])
                .unwrap_err()
                .to_string();
            assert!(refused.contains(flag), "{refused}");
        }
    }
}
