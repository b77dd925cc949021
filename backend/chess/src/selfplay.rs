//! Self-play: the learning agent against a fixed baseline (version 0), judged by the engine and
//! updated after every few games; each update is a new policy version.

use lachesis_shared::chess::rules::{MAX_PLIES, outcome_of, uci_of};
use lachesis_shared::chess::{GameEnd, GameOutcome, Side};
use rand::SeedableRng;
use rand::rngs::StdRng;
use shakmaty::{Chess, Color, Position};

use crate::agent::{self, Decision, PolicyParams};
use crate::judge;
use crate::learn::{self, Credit, LearnSettings};
use crate::search;
use crate::shakmaty;

#[derive(Debug, Clone, PartialEq)]
pub struct SelfPlayConfig {
    pub games: usize,
    pub seed: u64,
    /// Games played by one policy version before it learns from them.
    pub games_per_version: usize,
    /// Games longer than this are adjudicated on material.
    pub max_plies: usize,
    pub judge_depth: u32,
    pub learn: LearnSettings,
}

impl Default for SelfPlayConfig {
    fn default() -> Self {
        Self {
            games: 50,
            seed: 1,
            games_per_version: 5,
            max_plies: 120,
            judge_depth: 2,
            learn: LearnSettings::default(),
        }
    }
}

/// How one policy version played.
#[derive(Debug, Clone, PartialEq)]
pub struct VersionStats {
    pub version: i64,
    pub games: usize,
    pub agent_moves: usize,
    pub sacrifices: usize,
    pub mean_aggression: f64,
    pub mean_reward: f64,
    pub wins: usize,
    pub draws: usize,
    pub losses: usize,
}

impl VersionStats {
    pub fn sacrifice_rate(&self) -> f64 {
        self.sacrifices as f64 / self.agent_moves.max(1) as f64
    }
}

/// One finished game, from the agent's side.
pub struct PlayedGame {
    pub agent_side: Side,
    pub outcome: GameOutcome,
    /// The agent's moves: the position before each, and the decision taken there.
    pub agent_moves: Vec<(Chess, Decision)>,
    pub ucis: Vec<String>,
}

/// +1 when the agent won, −1 when it lost, 0 for a draw.
pub fn result_for(outcome: &GameOutcome, agent: Side) -> f64 {
    match outcome.winner {
        Some(w) if w == agent => 1.0,
        Some(_) => -1.0,
        None => 0.0,
    }
}

/// Plays one game between `agent` and `baseline`.
pub fn play_game(
    agent: &PolicyParams,
    baseline: &PolicyParams,
    agent_side: Side,
    max_plies: usize,
    rng: &mut StdRng,
) -> PlayedGame {
    let mut pos = Chess::default();
    let mut agent_moves = Vec::new();
    let mut ucis = Vec::new();
    let agent_color = if agent_side == Side::White {
        Color::White
    } else {
        Color::Black
    };
    let outcome = loop {
        if let Some(outcome) = outcome_of(&pos, ucis.len().min(MAX_PLIES)) {
            break outcome;
        }
        if ucis.len() >= max_plies {
            break adjudicate(&pos);
        }
        let mover = if pos.turn() == agent_color {
            agent
        } else {
            baseline
        };
        let Some(decision) = agent::choose(mover, &pos, rng) else {
            break adjudicate(&pos);
        };
        let m = decision.chosen;
        ucis.push(uci_of(m));
        let before = pos.clone();
        pos.play_unchecked(m);
        if before.turn() == agent_color {
            agent_moves.push((before, decision));
        }
    };
    PlayedGame {
        agent_side,
        outcome,
        agent_moves,
        ucis,
    }
}

/// A game cut short goes to the side a rook's worth of material ahead, else it is drawn.
fn adjudicate(pos: &Chess) -> GameOutcome {
    let white = match pos.turn() {
        Color::White => search::evaluate(pos),
        Color::Black => -search::evaluate(pos),
    };
    let winner = if white >= 500 {
        Some(Side::White)
    } else if white <= -500 {
        Some(Side::Black)
    } else {
        None
    };
    GameOutcome::new(GameEnd::MoveLimit, winner)
}

/// Plays `config.games` games, learning every `games_per_version`; `on_version` sees each
/// version's figures as soon as it has played. Returns every version's figures and the last policy.
pub fn run(
    config: &SelfPlayConfig,
    mut on_version: impl FnMut(&VersionStats),
) -> (Vec<VersionStats>, PolicyParams) {
    let mut rng = StdRng::seed_from_u64(config.seed);
    let baseline = PolicyParams::default();
    let mut params = PolicyParams::default();
    let mut all = Vec::new();
    let per_version = config.games_per_version.max(1);
    let mut played = 0;
    while played < config.games {
        let batch = per_version.min(config.games - played);
        let mut stats = VersionStats {
            version: params.version,
            games: batch,
            agent_moves: 0,
            sacrifices: 0,
            mean_aggression: 0.0,
            mean_reward: 0.0,
            wins: 0,
            draws: 0,
            losses: 0,
        };
        let mut credits = Vec::new();
        for g in 0..batch {
            let side = if (played + g) % 2 == 0 {
                Side::White
            } else {
                Side::Black
            };
            let game = play_game(&params, &baseline, side, config.max_plies, &mut rng);
            let result = result_for(&game.outcome, side);
            match result {
                r if r > 0.0 => stats.wins += 1,
                r if r < 0.0 => stats.losses += 1,
                _ => stats.draws += 1,
            }
            for (before, decision) in &game.agent_moves {
                let verdict = judge::engine_verdict(before, decision.chosen, config.judge_depth);
                stats.agent_moves += 1;
                stats.sacrifices += usize::from(verdict.material_offered > 0);
                stats.mean_aggression += verdict.aggression;
                stats.mean_reward += verdict.total;
                credits.push(Credit {
                    log_prob_gradient: decision.log_prob_gradient,
                    reward: verdict.total,
                    result,
                });
            }
        }
        let n = stats.agent_moves.max(1) as f64;
        stats.mean_aggression /= n;
        stats.mean_reward /= n;
        on_version(&stats);
        all.push(stats);
        params = learn::update(&params, &credits, &config.learn).0;
        played += batch;
    }
    (all, params)
}

/// `sacrifice rate A -> B; aggression C -> D`, first version to last.
pub fn summary_line(versions: &[VersionStats]) -> String {
    match (versions.first(), versions.last()) {
        (Some(first), Some(last)) => format!(
            "sacrifice rate {:.3} -> {:.3}; aggression {:.2} -> {:.2}",
            first.sacrifice_rate(),
            last.sacrifice_rate(),
            first.mean_aggression,
            last.mean_aggression
        ),
        _ => "no games played".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fifty_games_of_self_play_raise_sacrifices_and_aggression() {
        let config = SelfPlayConfig {
            seed: 7,
            ..SelfPlayConfig::default()
        };
        let (versions, last) = run(&config, |_| {});
        let (first, final_) = (versions.first().unwrap(), versions.last().unwrap());
        assert_eq!(versions.len(), 10);
        assert!(
            final_.sacrifice_rate() > first.sacrifice_rate(),
            "{}",
            summary_line(&versions)
        );
        assert!(
            final_.mean_aggression > first.mean_aggression,
            "{}",
            summary_line(&versions)
        );
        // The rise comes from the weights the judge rewards, and versions count the updates.
        let default = PolicyParams::default();
        assert!(last.weights[2] > default.weights[2] && last.weights[3] > default.weights[3]);
        assert_eq!(last.version, 10);
    }
}
