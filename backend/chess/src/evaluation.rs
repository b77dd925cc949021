//! After self-play has learned, version 0 and the final version each play fresh games against
//! version 0, judged as the learning games were but not learned from. Without this the version
//! that learned from every game is never measured, and version 0 is known only from its ten
//! learning games.
//!
//! Both draw from the same random stream, so where they would move alike they do, and their
//! games part only where the policies do: the difference between them is less noisy than that of
//! two independent samples.

use rand::SeedableRng;
use rand::rngs::StdRng;

use crate::agent::PolicyParams;
use crate::selfplay::{self, SelfPlayConfig, VersionStats};
use crate::stockfish::{EngineError, EnginePool};

/// Version 0 and the final version, measured over the same number of games against version 0.
#[derive(Debug, Clone, PartialEq)]
pub struct Evaluation {
    pub version_0: VersionStats,
    pub final_version: VersionStats,
    /// Each game's score for the player measured: 1 a win, 0.5 a draw, 0 a loss.
    pub version_0_scores: Vec<f64>,
    pub final_scores: Vec<f64>,
}

impl Evaluation {
    /// The final version's score against version 0 over its evaluation games.
    pub fn final_score(&self) -> f64 {
        self.final_scores.iter().sum::<f64>() / self.final_scores.len().max(1) as f64
    }
}

/// Where the evaluation's random stream starts: apart from the learning games' stream.
fn evaluation_seed(seed: u64) -> u64 {
    seed ^ 0x5eed_e7a1_0000_0000
}

/// Measures version 0 and `final_params` over `config.evaluation_games` games each; `None` when
/// that is 0.
pub fn evaluate(
    final_params: &PolicyParams,
    config: &SelfPlayConfig,
    stockfish: Option<&EnginePool>,
) -> Result<Option<Evaluation>, EngineError> {
    if config.evaluation_games == 0 {
        return Ok(None);
    }
    let baseline = PolicyParams::default();
    let measure = |params: &PolicyParams| {
        let mut rng = StdRng::seed_from_u64(evaluation_seed(config.seed));
        selfplay::play_version(
            params,
            config.evaluation_games,
            0,
            &mut rng,
            stockfish,
            config,
            false,
        )
    };
    // Two threads: each measurement keeps its own random stream and every Stockfish search starts
    // from an empty hash, so running them side by side plays the very games one after the other
    // would, in about half the time on two cores (given a pool of two processes).
    let (version_0, final_version) = std::thread::scope(|scope| {
        let version_0 = scope.spawn(|| measure(&baseline));
        let final_version = measure(final_params);
        let version_0 = version_0
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        (version_0, final_version)
    });
    let (version_0, final_version) = (version_0?, final_version?);
    Ok(Some(Evaluation {
        version_0: version_0.stats,
        final_version: final_version.stats,
        version_0_scores: version_0.scores,
        final_scores: final_version.scores,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::learn::LearnSettings;
    use crate::stockfish::{EngineConfig, SearchLimit};

    #[test]
    fn version_0_against_itself_plays_what_the_final_version_plays_when_nothing_was_learned() {
        // No games to learn from: the final version is version 0's weights, so on the shared
        // random stream it plays the very same games.
        let config = SelfPlayConfig {
            games: 0,
            evaluation_games: 4,
            learn: LearnSettings::default(),
            ..SelfPlayConfig::default()
        };
        let report = selfplay::run(&config, None, |_| {}).unwrap();
        let evaluation = report.evaluation.as_ref().unwrap();
        assert!(report.versions.is_empty());
        assert_eq!(evaluation.version_0.per_game.len(), 4);
        assert_eq!(
            evaluation.version_0.per_game,
            evaluation.final_version.per_game
        );
        assert_eq!(evaluation.version_0_scores, evaluation.final_scores);
        assert_eq!(evaluation.final_version.version, 0);
        // The summary compares the evaluation's two, not the (absent) learning versions.
        assert!(
            report.summary_line().starts_with(&format!(
                "sacrifice rate {:.3} -> {:.3};",
                evaluation.version_0.sacrifice_rate(),
                evaluation.final_version.sacrifice_rate()
            )),
            "{}",
            report.summary_line()
        );
        // Games against itself: the agent is White in two and Black in two, and every game
        // counted a result.
        let v = &evaluation.version_0;
        assert_eq!(v.wins + v.draws + v.losses, 4);
    }

    #[test]
    fn side_by_side_on_two_engine_processes_each_version_plays_the_games_it_plays_alone() {
        let path = crate::stockfish::locate().expect(
            "no Stockfish: apt-get install stockfish (make test installs it), or set LACHESIS_STOCKFISH",
        );
        let pool = EnginePool::start(EngineConfig {
            limit: SearchLimit::Depth(4),
            processes: 2,
            ..EngineConfig::new(path)
        })
        .unwrap();
        let config = SelfPlayConfig {
            games: 2,
            games_per_version: 2,
            max_plies: 40,
            evaluation_games: 4,
            ..SelfPlayConfig::default()
        };
        let report = selfplay::run(&config, Some(&pool), |_| {}).unwrap();
        let evaluation = report.evaluation.unwrap();
        let alone = |params: &PolicyParams| {
            let mut rng = StdRng::seed_from_u64(evaluation_seed(config.seed));
            selfplay::play_version(params, 4, 0, &mut rng, Some(&pool), &config, false).unwrap()
        };
        let version_0 = alone(&PolicyParams::default());
        let final_version = alone(&report.final_params);
        assert_ne!(version_0.stats.per_game, final_version.stats.per_game);
        assert_eq!(
            (version_0.stats, version_0.scores),
            (evaluation.version_0, evaluation.version_0_scores)
        );
        assert_eq!(
            (final_version.stats, final_version.scores),
            (evaluation.final_version, evaluation.final_scores)
        );
    }

    #[test]
    fn no_evaluation_games_compare_the_learning_versions() {
        let config = SelfPlayConfig {
            games: 2,
            games_per_version: 1,
            evaluation_games: 0,
            learn: LearnSettings::default(),
            ..SelfPlayConfig::default()
        };
        let report = selfplay::run(&config, None, |_| {}).unwrap();
        assert!(report.evaluation.is_none());
        let (first, last) = report.compared().unwrap();
        assert_eq!((first.version, last.version), (0, 1));
    }
}
