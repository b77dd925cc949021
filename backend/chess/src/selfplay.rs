//! Self-play: the learning agent against a fixed baseline (version 0), judged by Stockfish (or,
//! without it, the shallow-search judge) and updated after every few games; each update is a new
//! policy version.

use std::collections::VecDeque;

use lachesis_shared::chess::MoveReward;
use lachesis_shared::chess::rules::{MAX_PLIES, outcome_of, uci_of};
use lachesis_shared::chess::{GameEnd, GameOutcome, Side};
use rand::SeedableRng;
use rand::rngs::StdRng;
use shakmaty::{Chess, Color, Move, Position};

use crate::agent::{self, Decision, PolicyParams};
use crate::evaluation::{self, Evaluation};
use crate::features::OFFERS_MATERIAL;
use crate::judge;
use crate::learn::{self, Credit, JudgedPosition, LearnSettings, PositionCredit, StepRule};
use crate::oracle::{self, OracleSettings, Soundness};
use crate::sacrifice_price::SacrificeTarget;
use crate::search;
use crate::shakmaty;
use crate::stockfish::{EngineError, EnginePool};
pub use crate::version_stats::{GameCounts, VersionStats};

#[derive(Debug, Clone, PartialEq)]
pub struct SelfPlayConfig {
    pub games: usize,
    pub seed: u64,
    /// Games played by one policy version before it learns from them.
    pub games_per_version: usize,
    /// Games longer than this are adjudicated: by Stockfish's evaluation when it judges, else on
    /// material.
    pub max_plies: usize,
    /// Depth of the shallow-search judge, used when no Stockfish judges.
    pub judge_depth: u32,
    pub oracle: OracleSettings,
    pub learn: LearnSettings,
    /// Games that version 0 and the final version each play against version 0 once learning
    /// is done, judged but not learned from; the summary compares the two. With 0 it compares
    /// the first and last versions' learning games instead.
    pub evaluation_games: usize,
    /// How many earlier versions' judged positions each update learns from again, besides the
    /// games just played (Stockfish judging only): ten games are few, and an update that sees
    /// only them can undo what the ones before it learned.
    pub replay_versions: usize,
    /// How often the agent is held to offering material (Stockfish judging only: the shallow
    /// judge's one-draw update has no likely moves to price); `None` leaves it to the returns.
    pub sacrifice_target: Option<SacrificeTarget>,
}

impl Default for SelfPlayConfig {
    fn default() -> Self {
        Self {
            games: 50,
            seed: 1,
            games_per_version: 10,
            max_plies: 120,
            judge_depth: 2,
            oracle: OracleSettings::default(),
            // Natural-gradient steps of a fixed size in policy space, so the rare verified
            // sacrifice can earn a weight within four updates. A sound sacrifice is worth six
            // times what an unsound one costs: even the verified ones are unsound more often
            // than not, every shortlisted sacrifice is judged (see `agent`), and at a lower
            // price the agent learns to sacrifice less, if more soundly. A lost game still
            // costs every move.
            learn: LearnSettings {
                result_weight: 0.3,
                sound_sacrifice_bonus: 3.0,
                unsound_sacrifice_penalty: 0.5,
                step_rule: StepRule::Natural {
                    damping: 0.05,
                    max_kl: 0.05,
                },
                ..LearnSettings::default()
            },
            evaluation_games: DEFAULT_EVALUATION_GAMES,
            replay_versions: DEFAULT_REPLAY_VERSIONS,
            sacrifice_target: Some(SacrificeTarget::default()),
        }
    }
}

/// Ten times a learning version's games. Version 0's rate, the yardstick of the summary, ranged
/// 0.061-0.121 over seeds 1-6 in twenty games each, 0.065-0.096 over seeds 1-13 in forty and
/// 0.067-0.087 in a hundred (one sharp game can hold many of a version's sacrifices).
pub const DEFAULT_EVALUATION_GAMES: usize = 100;

/// None. Over seeds 1-13, learning again from every earlier version (4) took the final rate to
/// at least twice version 0's on ten seeds rather than six, but left the sound share flat or lower
/// on three, where without it the share rose on all thirteen.
pub const DEFAULT_REPLAY_VERSIONS: usize = 0;

/// Everything one self-play run produced.
#[derive(Debug, Clone, PartialEq)]
pub struct SelfPlayReport {
    pub versions: Vec<VersionStats>,
    /// Each game's score for the agent, in order: 1 a win, 0.5 a draw, 0 a loss.
    pub scores: Vec<f64>,
    /// Version 0 and the final version measured side by side after learning.
    pub evaluation: Option<Evaluation>,
    pub final_params: PolicyParams,
}

impl SelfPlayReport {
    /// The agent's score against version 0 over the last `n` games: wins and half the draws.
    pub fn recent_score(&self, n: usize) -> f64 {
        let recent = &self.scores[self.scores.len().saturating_sub(n)..];
        recent.iter().sum::<f64>() / recent.len().max(1) as f64
    }

    /// The two versions the summary compares: version 0 and the final version as measured after
    /// learning, or, without that measurement, the first and last learning versions.
    pub fn compared(&self) -> Option<(&VersionStats, &VersionStats)> {
        match &self.evaluation {
            Some(e) => Some((&e.version_0, &e.final_version)),
            None => Some((self.versions.first()?, self.versions.last()?)),
        }
    }

    /// `sacrifice rate A -> B; aggression C -> D; sound sacrifices E% -> F%; score vs version 0
    /// S%`, A, C and E version 0's and B, D and F the final version's (see [`Self::compared`]),
    /// S over the last ten learning games.
    pub fn summary_line(&self) -> String {
        match self.compared() {
            Some((first, last)) => format!(
                "sacrifice rate {:.3} -> {:.3}; aggression {:.2} -> {:.2}; sound sacrifices {:.0}% -> {:.0}%; score vs version 0 {:.0}%",
                first.sacrifice_rate(),
                last.sacrifice_rate(),
                first.mean_aggression,
                last.mean_aggression,
                100.0 * first.sound_share(),
                100.0 * last.sound_share(),
                100.0 * self.recent_score(10),
            ),
            None => "no games played".into(),
        }
    }

    /// The summary's sacrifice rates and sound shares with their 95% margins, each game one
    /// sample: whether the change is larger than what the games of one policy spread over. Then
    /// the two multiplied, sound sacrifices per move: version 0's sacrifices are mostly unsound,
    /// so a version can sacrifice soundly several times as often while its rate, which counts
    /// both kinds, rises far less.
    pub fn margins_line(&self) -> String {
        match self.compared() {
            Some((first, last)) => format!(
                "95% margins, each game one sample: sacrifice rate {} -> {}; sound sacrifices {} -> {}; sound sacrifices per move {} -> {}",
                first.rate_with_margin(),
                last.rate_with_margin(),
                first.sound_share_with_margin(),
                last.sound_share_with_margin(),
                first.sound_rate_with_margin(),
                last.sound_rate_with_margin(),
            ),
            None => "no games played".into(),
        }
    }
}

/// One finished game, from the agent's side.
pub struct PlayedGame {
    pub agent_side: Side,
    pub outcome: GameOutcome,
    /// The agent's moves: the position before each, and the decision taken there.
    pub agent_moves: Vec<(Chess, Decision)>,
    pub ucis: Vec<String>,
    /// Where the game stopped.
    pub final_position: Chess,
}

/// +1 when the agent won, −1 when it lost, 0 for a draw.
pub fn result_for(outcome: &GameOutcome, agent: Side) -> f64 {
    match outcome.winner {
        Some(w) if w == agent => 1.0,
        Some(_) => -1.0,
        None => 0.0,
    }
}

/// Plays one game between `agent` and `baseline`. With `learning`, the agent's decisions carry
/// everything learning needs (see [`agent::choose`]); without, the agent only plays, and the same
/// random stream gives the same game at less cost.
pub fn play_game(
    agent: &PolicyParams,
    baseline: &PolicyParams,
    agent_side: Side,
    max_plies: usize,
    learning: bool,
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
        // Only the agent's moves are learned from; the baseline just plays.
        let decision = if pos.turn() == agent_color && learning {
            agent::choose(agent, &pos, rng)
        } else if pos.turn() == agent_color {
            agent::choose_to_play(agent, &pos, rng)
        } else {
            agent::choose_to_play(baseline, &pos, rng)
        };
        let Some(decision) = decision else {
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
        final_position: pos,
    }
}

/// A game cut short goes to the side a rook's worth of material ahead, else it is drawn.
pub(crate) fn adjudicate(pos: &Chess) -> GameOutcome {
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
/// version's figures as soon as it has played. With `stockfish`, Stockfish judges every agent move
/// and what a move loses against its best line counts against it; without, the shallow-search
/// judge does. Then, when `config.evaluation_games` is set, version 0 and the final version are
/// measured side by side (see [`crate::evaluation`]).
pub fn run(
    config: &SelfPlayConfig,
    stockfish: Option<&EnginePool>,
    mut on_version: impl FnMut(&VersionStats),
) -> Result<SelfPlayReport, EngineError> {
    let mut rng = StdRng::seed_from_u64(config.seed);
    let mut params = PolicyParams::default();
    let mut versions = Vec::new();
    let mut scores = Vec::new();
    let per_version = config.games_per_version.max(1);
    let mut judged_by_version: VecDeque<Vec<JudgedPosition>> = VecDeque::new();
    while scores.len() < config.games {
        let batch = per_version.min(config.games - scores.len());
        let mut played = play_version(
            &params,
            batch,
            scores.len(),
            &mut rng,
            stockfish,
            config,
            true,
        )?;
        // Only Stockfish's judging keeps likely moves to price.
        if let Some(target) = config.sacrifice_target.filter(|_| stockfish.is_some()) {
            played.price_sacrifices(target.price_after(played.stats.sacrifice_rate()));
        }
        on_version(&played.stats);
        versions.push(played.stats);
        scores.extend(played.scores);
        params = if stockfish.is_some() {
            let replayed: Vec<PositionCredit> = judged_by_version
                .iter()
                .flatten()
                .map(|p| p.credit_under(&params))
                .collect();
            // Only the last `replay_versions` versions are ever replayed.
            judged_by_version.push_back(played.judged);
            if judged_by_version.len() > config.replay_versions {
                judged_by_version.pop_front();
            }
            learn::update_expected_replaying(&params, &played.positions, &replayed, &config.learn).0
        } else {
            learn::update(&params, &played.credits, &config.learn).0
        };
    }
    let evaluation = evaluation::evaluate(&params, config, stockfish)?;
    Ok(SelfPlayReport {
        versions,
        scores,
        evaluation,
        final_params: params,
    })
}

/// One version's games, judged: its figures, each game's score for the agent, and what learning
/// needs from them.
pub(crate) struct PlayedVersion {
    pub stats: VersionStats,
    pub scores: Vec<f64>,
    pub credits: Vec<Credit>,
    pub positions: Vec<PositionCredit>,
    /// The same positions, kept for later versions to learn from again.
    pub judged: Vec<JudgedPosition>,
}

impl PlayedVersion {
    /// Adds `price` to the return of every likely move that offers material, in the positions
    /// learned from now and in those kept for later versions.
    fn price_sacrifices(&mut self, price: f64) {
        self.stats.sacrifice_price = price;
        for (position, judged) in self.positions.iter_mut().zip(&mut self.judged) {
            for (credit, (features, ret)) in
                position.candidates.iter_mut().zip(&mut judged.candidates)
            {
                if features[OFFERS_MATERIAL] > 0.0 {
                    credit.2 += price;
                    *ret += price;
                }
            }
        }
    }
}

/// `games` games of `params` against version 0, the agent White in even-numbered games (counting
/// from `first_game`). With `learning`, the agent's decisions keep what learning needs and
/// Stockfish also judges the policy's other likely moves in each position.
pub(crate) fn play_version(
    params: &PolicyParams,
    games: usize,
    first_game: usize,
    rng: &mut StdRng,
    stockfish: Option<&EnginePool>,
    config: &SelfPlayConfig,
    learning: bool,
) -> Result<PlayedVersion, EngineError> {
    let baseline = PolicyParams::default();
    let mut played = PlayedVersion {
        stats: VersionStats::new(params.version, games),
        scores: Vec::with_capacity(games),
        credits: Vec::new(),
        positions: Vec::new(),
        judged: Vec::new(),
    };
    let stats = &mut played.stats;
    for g in first_game..first_game + games {
        let side = if g % 2 == 0 { Side::White } else { Side::Black };
        let mut game = play_game(params, &baseline, side, config.max_plies, learning, rng);
        // Material alone would call every unfinished sacrificial game lost.
        if let (Some(pool), GameEnd::MoveLimit) = (stockfish, game.outcome.end) {
            game.outcome = oracle::adjudicate(pool, &game.final_position)?;
        }
        let result = result_for(&game.outcome, side);
        match result {
            r if r > 0.0 => stats.wins += 1,
            r if r < 0.0 => stats.losses += 1,
            _ => stats.draws += 1,
        }
        played.scores.push((result + 1.0) / 2.0);
        let mut counts = GameCounts::default();
        for (before, decision) in &game.agent_moves {
            let (verdict, sound) = match stockfish {
                Some(pool) => {
                    let (verdict, sound, position) =
                        judge_move(pool, before, decision, result, config, learning)?;
                    if let Some((position, judged)) = position {
                        played.positions.push(position);
                        played.judged.push(judged);
                    }
                    (verdict, sound)
                }
                None => {
                    let verdict =
                        judge::engine_verdict(before, decision.chosen, config.judge_depth);
                    played.credits.push(Credit {
                        log_prob_gradient: decision.log_prob_gradient,
                        reward: verdict.total,
                        result,
                    });
                    let sound = verdict.soundness >= 5.0;
                    (verdict, sound)
                }
            };
            counts.agent_moves += 1;
            if verdict.material_offered > 0 {
                counts.sacrifices += 1;
                counts.sound_sacrifices += usize::from(sound);
            }
            stats.mean_aggression += verdict.aggression;
            stats.mean_reward += verdict.total;
            if let Some(engine) = &verdict.engine {
                stats.mean_loss_cp += f64::from(oracle::loss_cp(engine.best_cp, engine.played_cp));
            }
        }
        stats.add_game(counts);
    }
    let n = stats.agent_moves.max(1) as f64;
    stats.mean_aggression /= n;
    stats.mean_reward /= n;
    stats.mean_loss_cp /= n;
    Ok(played)
}

/// One position learned from: as the policy that played it weighs it, and as later versions will.
type LearnedPosition = (PositionCredit, JudgedPosition);

/// Stockfish's verdict on the move played: the verdict, whether its sacrifice (if any) is sound,
/// and, with `learning`, the policy's likely moves in its position judged for learning.
fn judge_move(
    pool: &EnginePool,
    before: &Chess,
    decision: &Decision,
    result: f64,
    config: &SelfPlayConfig,
    learning: bool,
) -> Result<(MoveReward, bool, Option<LearnedPosition>), EngineError> {
    let best_line = oracle::BestLine::search(pool, before)?;
    let position = if learning {
        let moves: Vec<Move> = decision.candidates.iter().map(|c| c.m).collect();
        let assessments = best_line.assess_each(pool, &moves)?;
        let mut candidates = Vec::with_capacity(decision.candidates.len());
        let mut judged = Vec::with_capacity(decision.candidates.len());
        for ((m, assessment), c) in moves.iter().zip(&assessments).zip(&decision.candidates) {
            let verdict = oracle::verdict(before, *m, assessment, &config.oracle);
            let ret = learn::move_return(&verdict, &config.learn);
            candidates.push((c.log_prob_gradient, c.probability, ret));
            judged.push((c.features, ret));
        }
        let position = PositionCredit {
            candidates,
            chosen_gradient: decision.log_prob_gradient,
            result,
        };
        Some((position, JudgedPosition { candidates: judged }))
    } else {
        None
    };
    // The move played is judged on its own: in the multi-line search above its score depends
    // on which other moves share the search, and those change as the policy learns.
    let assessment = best_line.assess(pool, decision.chosen)?;
    let verdict = oracle::verdict(before, decision.chosen, &assessment, &config.oracle);
    let sound = oracle::soundness(verdict.material_offered, &assessment, &config.oracle)
        == Soundness::Sound;
    Ok((verdict, sound, position))
}

#[cfg(test)]
#[path = "selfplay_tests.rs"]
mod tests;
