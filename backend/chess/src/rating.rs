//! A yardstick: the agent plays a ladder of fixed opponents, from Stockfish at `UCI_Elo` 1350
//! (its weakest calibrated setting, rated 1350 by definition) down to players weak enough for the
//! agent to score against. No rung's rating is assumed: neighbours play calibration games, the
//! agent plays every rung, and [`rating_fit::fit`] rates everyone from all of those games at once.
//! [`estimate`] is the special case of one player against opponents of known rating, with a 95%
//! interval from the likelihood (so a match with no points still bounds it above).

use lachesis_shared::chess::rules::{fen_of, outcome_of, parse_uci};
use lachesis_shared::chess::{GameOutcome, Side};
use rand::Rng;
use rand::rngs::StdRng;
use rand::seq::IndexedRandom;
use shakmaty::{Chess, Color, Move, Position};

use crate::agent::{self, PolicyParams};
use crate::features::{FEATURE_COUNT, NAMES};
use crate::rating_fit::{self, FitError, Pairing};
use crate::shakmaty;
use crate::stockfish::{EngineError, EnginePool};
use crate::{oracle, selfplay};

/// What the agent scored against one opponent.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MatchResult {
    /// The opponent's rating.
    pub opponent: f64,
    pub games: usize,
    /// Wins plus half the draws.
    pub points: f64,
}

/// An Elo estimate. `point` is `None` when every game was won or every game lost (the
/// likelihood has no maximum); the interval is then open on that side.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EloEstimate {
    pub point: Option<f64>,
    pub low: Option<f64>,
    pub high: Option<f64>,
}

impl EloEstimate {
    /// `1412 (95% 1290–1530)`, `below 1180 (95%)`, `above 2900 (95%)`.
    /// Nothing known: no games link the player to a fixed rating.
    pub const UNKNOWN: EloEstimate = EloEstimate {
        point: None,
        low: None,
        high: None,
    };

    pub fn shown(&self) -> String {
        match (self.point, self.low, self.high) {
            (Some(p), Some(l), Some(h)) => format!("{p:.0} (95% {l:.0}–{h:.0})"),
            (_, None, Some(h)) => format!("below {h:.0} (95%)"),
            (_, Some(l), None) => format!("above {l:.0} (95%)"),
            _ => "no games".into(),
        }
    }
}

/// The expected score of a player rated `r` against one rated `opponent`.
pub fn expected(r: f64, opponent: f64) -> f64 {
    1.0 / (1.0 + 10f64.powf((opponent - r) / 400.0))
}

fn log_likelihood(r: f64, results: &[MatchResult]) -> f64 {
    results
        .iter()
        .map(|m| {
            let e = expected(r, m.opponent).clamp(1e-300, 1.0 - 1e-16);
            m.points * e.ln() + (m.games as f64 - m.points) * (1.0 - e).ln()
        })
        .sum()
}

/// Ratings are searched within this far of the opponents.
const SPAN: f64 = 2_000.0;

pub fn estimate(results: &[MatchResult]) -> EloEstimate {
    let played: Vec<MatchResult> = results.iter().copied().filter(|m| m.games > 0).collect();
    if played.is_empty() {
        return EloEstimate {
            point: None,
            low: None,
            high: None,
        };
    }
    let lowest = played
        .iter()
        .map(|m| m.opponent)
        .fold(f64::INFINITY, f64::min)
        - SPAN;
    let highest = played
        .iter()
        .map(|m| m.opponent)
        .fold(f64::NEG_INFINITY, f64::max)
        + SPAN;
    let points: f64 = played.iter().map(|m| m.points).sum();
    let games: f64 = played.iter().map(|m| m.games as f64).sum();
    // The score equation Σ points = Σ games·E(r) is monotone in r: bisect it.
    let point = (points > 0.0 && points < games).then(|| {
        bisect(lowest, highest, |r| {
            played
                .iter()
                .map(|m| m.games as f64 * expected(r, m.opponent))
                .sum::<f64>()
                - points
        })
    });
    // The interval: ratings whose log-likelihood is within 1.92 (χ²₁ at 95% / 2) of the best.
    let best = match point {
        Some(p) => log_likelihood(p, &played),
        // All lost (or all won): the supremum is the limit at the open end, a log-likelihood of 0.
        None => 0.0,
    };
    let inside = |r: f64| log_likelihood(r, &played) - (best - 1.92);
    let (low, high) = match point {
        Some(p) => (
            Some(bisect(lowest, p, inside)),
            Some(bisect(p, highest, |r| -inside(r))),
        ),
        None if points <= 0.0 => (None, Some(bisect(lowest, highest, |r| -inside(r)))),
        None => (Some(bisect(lowest, highest, inside)), None),
    };
    EloEstimate { point, low, high }
}

/// A root of an increasing `f` on [lo, hi], or the nearer end when there is none inside.
pub(crate) fn bisect(mut lo: f64, mut hi: f64, f: impl Fn(f64) -> f64) -> f64 {
    for _ in 0..200 {
        let mid = (lo + hi) / 2.0;
        if f(mid) < 0.0 {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    (lo + hi) / 2.0
}

/// The anchor's rating: Stockfish's own calibration of its weakest `UCI_Elo`.
pub const ANCHOR_ELO: f64 = 1350.0;

/// One player on the ladder (or the agent being rated).
#[derive(Debug, Clone, PartialEq)]
pub enum Player {
    /// Stockfish at `UCI_Elo` 1350 (the engine handed to [`play`]).
    Stockfish,
    /// This crate's search alone (version 0's evaluation, whatever the agent has learned since)
    /// at `depth` plies, its moves sampled at `temperature` pawns.
    Search { depth: u32, temperature: f64 },
    /// The agent being rated.
    Agent(PolicyParams),
    /// A uniformly random legal move.
    Random,
    /// `base`'s move, except that a `share` (0–1) of moves, drawn at random, are `with`'s: a
    /// strength between the two.
    Blend {
        base: Box<Player>,
        share: f64,
        with: Box<Player>,
    },
}

impl Player {
    pub fn blend(base: Player, share: f64, with: Player) -> Self {
        Player::Blend {
            base: Box::new(base),
            share,
            with: Box::new(with),
        }
    }

    /// What the player is, for the printed table.
    pub fn name(&self) -> String {
        match self {
            Player::Stockfish => format!("Stockfish UCI_Elo {ANCHOR_ELO:.0}"),
            Player::Search { depth, temperature } => {
                format!("search depth {depth}, temperature {temperature:.1}")
            }
            Player::Agent(p) => format!("policy version {}", p.version),
            Player::Random => "a random mover".into(),
            Player::Blend { base, share, with } => format!(
                "{}, {:.0}% of moves by {}",
                base.name(),
                100.0 * share,
                with.name()
            ),
        }
    }

    /// A move in `pos` (which has one), and whether it put material en prise (a sacrifice, as
    /// self-play counts them: only this crate's policies report it).
    fn choose(
        &self,
        pos: &Chess,
        engine: &EnginePool,
        rng: &mut StdRng,
    ) -> Result<(Move, bool), EngineError> {
        let policy = |params: &PolicyParams, rng: &mut StdRng| {
            agent::choose_to_play(params, pos, rng)
                .map(|d| (d.chosen, d.features.offered_centipawns() > 0))
                .ok_or_else(|| EngineError::Protocol("no legal move in a live game".into()))
        };
        match self {
            Player::Stockfish => {
                let best = engine.analyse(&fen_of(pos), None)?.best.ok_or_else(|| {
                    EngineError::Protocol("no move in a position that has one".into())
                })?;
                let m = parse_uci(pos, &best)
                    .map_err(|e| EngineError::Protocol(format!("{best}: {e}")))?;
                Ok((m, false))
            }
            Player::Search { depth, temperature } => {
                policy(&search_params(*depth, *temperature), rng)
            }
            Player::Agent(params) => policy(params, rng),
            Player::Random => pos
                .legal_moves()
                .choose(rng)
                .map(|m| (*m, false))
                .ok_or_else(|| EngineError::Protocol("no legal move in a live game".into())),
            Player::Blend { base, share, with } => {
                if rng.random::<f64>() < *share {
                    with.choose(pos, engine, rng)
                } else {
                    base.choose(pos, engine, rng)
                }
            }
        }
    }
}

/// The ladder, strongest first: the anchor, the anchor with a quarter, half and three quarters
/// of its moves played by this crate's depth-2 search, that search alone (what version 0 plays),
/// and the search with a tenth of its moves random. Every move the search plays can be a blunder
/// the anchor punishes, so strength falls steadily with the search's share. In two runs of 20
/// games a pair, each rung scored 82%, 68%, 68%, 78% and 84% against the next: inside 15–85%, so
/// every link carries information, where the search alone scored 1 of 20 against the anchor.
pub fn ladder() -> Vec<Player> {
    let search = || Player::Search {
        depth: 2,
        temperature: 0.4,
    };
    vec![
        Player::Stockfish,
        Player::blend(Player::Stockfish, 0.25, search()),
        Player::blend(Player::Stockfish, 0.5, search()),
        Player::blend(Player::Stockfish, 0.75, search()),
        search(),
        Player::blend(search(), 0.1, Player::Random),
    ]
}

/// Policy parameters that weigh the search's value alone: one pawn of it is one unit of score.
fn search_params(depth: u32, temperature: f64) -> PolicyParams {
    let mut weights = vec![0.0; FEATURE_COUNT];
    if let Some(search) = NAMES.iter().position(|name| *name == "search") {
        weights[search] = 1.0;
    }
    PolicyParams {
        version: 0,
        weights,
        temperature,
        depth,
    }
}

/// One finished game, with each side's moves and sacrifices (index 0 White).
#[derive(Debug, Clone, PartialEq)]
pub struct LadderGame {
    pub outcome: GameOutcome,
    pub moves: [usize; 2],
    pub sacrifices: [usize; 2],
}

/// Games still going after this many plies are adjudicated by Stockfish's evaluation (3 pawns
/// decides), below the rules' own move limit so that the limit never calls a won game drawn.
pub const MAX_GAME_PLIES: usize = 200;

/// One game; `engine` is Stockfish at `UCI_Elo` 1350, which plays for the Stockfish rungs and
/// adjudicates a game that reaches [`MAX_GAME_PLIES`].
pub fn play(
    white: &Player,
    black: &Player,
    engine: &EnginePool,
    rng: &mut StdRng,
) -> Result<LadderGame, EngineError> {
    let mut pos = Chess::default();
    let mut plies = 0;
    let mut moves = [0; 2];
    let mut sacrifices = [0; 2];
    let outcome = loop {
        if let Some(outcome) = outcome_of(&pos, plies) {
            break outcome;
        }
        if plies >= MAX_GAME_PLIES {
            break oracle::adjudicate(engine, &pos)?;
        }
        let (mover, side) = match pos.turn() {
            Color::White => (white, 0),
            Color::Black => (black, 1),
        };
        let (m, sacrifice) = mover.choose(&pos, engine, rng)?;
        moves[side] += 1;
        sacrifices[side] += usize::from(sacrifice);
        pos.play_unchecked(m);
        plies += 1;
    };
    Ok(LadderGame {
        outcome,
        moves,
        sacrifices,
    })
}

/// What `side` scored: 1 a win, ½ a draw, 0 a loss.
pub fn points_for(outcome: &GameOutcome, side: Side) -> f64 {
    (selfplay::result_for(outcome, side) + 1.0) / 2.0
}

/// Wins, draws and losses of the first player of a pairing.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Record {
    pub wins: usize,
    pub draws: usize,
    pub losses: usize,
}

impl Record {
    pub fn add(&mut self, points: f64) {
        if points > 0.5 {
            self.wins += 1;
        } else if points < 0.5 {
            self.losses += 1;
        } else {
            self.draws += 1;
        }
    }

    pub fn games(&self) -> usize {
        self.wins + self.draws + self.losses
    }

    pub fn points(&self) -> f64 {
        self.wins as f64 + 0.5 * self.draws as f64
    }
}

/// How much is played: per adjacent pair of rungs, and by the agent against each rung.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Schedule {
    pub calibration_games: usize,
    pub agent_games: usize,
}

/// Everything one rating produced. Players are numbered rungs first (0 the anchor), the agent
/// last.
#[derive(Debug, Clone, PartialEq)]
pub struct LadderReport {
    /// `calibration[k]`: rung k against rung k+1, from rung k's side.
    pub calibration: Vec<Record>,
    /// The agent against each rung, from the agent's side.
    pub agent: Vec<Record>,
    /// Each rung's rating, then the agent's.
    pub ratings: Vec<EloEstimate>,
    pub agent_moves: usize,
    pub agent_sacrifices: usize,
}

impl LadderReport {
    pub fn agent_rating(&self) -> EloEstimate {
        self.ratings.last().copied().unwrap_or(EloEstimate::UNKNOWN)
    }

    /// Sacrifices per agent move over its games (0 when it made none).
    pub fn sacrifice_rate(&self) -> f64 {
        self.agent_sacrifices as f64 / self.agent_moves.max(1) as f64
    }

    pub fn agent_games(&self) -> usize {
        self.agent.iter().map(Record::games).sum()
    }
}

/// What stops a rating.
#[derive(Debug, thiserror::Error)]
pub enum LadderError {
    #[error(transparent)]
    Engine(#[from] EngineError),
    #[error("rating fit: {0}")]
    Fit(#[from] FitError),
    #[error("a ladder needs at least its anchor")]
    NoRungs,
}

/// Plays the schedule (colours alternate within each pairing) and fits all ratings, rung 0
/// fixed at [`ANCHOR_ELO`]. `on_pairing` sees each pairing's record as it finishes: the rungs'
/// indices (the agent is `rungs.len()`) and the record of the first.
pub fn rate(
    rungs: &[Player],
    agent: &PolicyParams,
    schedule: Schedule,
    engine: &EnginePool,
    rng: &mut StdRng,
    mut on_pairing: impl FnMut(usize, usize, &Record),
) -> Result<LadderReport, LadderError> {
    if rungs.is_empty() {
        return Err(LadderError::NoRungs);
    }
    let agent_index = rungs.len();
    let agent_player = Player::Agent(agent.clone());
    let mut pairings = Vec::new();
    let mut calibration = Vec::new();
    for (k, pair) in rungs.windows(2).enumerate() {
        let mut record = Record::default();
        for g in 0..schedule.calibration_games {
            let side = if g % 2 == 0 { Side::White } else { Side::Black };
            let (white, black) = match side {
                Side::White => (&pair[0], &pair[1]),
                Side::Black => (&pair[1], &pair[0]),
            };
            record.add(points_for(&play(white, black, engine, rng)?.outcome, side));
        }
        on_pairing(k, k + 1, &record);
        pairings.push(Pairing::new(k, k + 1, record.games(), record.points()));
        calibration.push(record);
    }
    let (mut agent_moves, mut agent_sacrifices) = (0, 0);
    let mut agent_records = Vec::new();
    for (k, rung) in rungs.iter().enumerate() {
        let mut record = Record::default();
        for g in 0..schedule.agent_games {
            let side = if g % 2 == 0 { Side::White } else { Side::Black };
            let (white, black, i) = match side {
                Side::White => (&agent_player, rung, 0),
                Side::Black => (rung, &agent_player, 1),
            };
            let game = play(white, black, engine, rng)?;
            agent_moves += game.moves[i];
            agent_sacrifices += game.sacrifices[i];
            record.add(points_for(&game.outcome, side));
        }
        on_pairing(agent_index, k, &record);
        pairings.push(Pairing::new(
            agent_index,
            k,
            record.games(),
            record.points(),
        ));
        agent_records.push(record);
    }
    let ratings = rating_fit::fit(agent_index + 1, &[(0, ANCHOR_ELO)], &pairings)?;
    Ok(LadderReport {
        calibration,
        agent: agent_records,
        ratings,
        agent_moves,
        agent_sacrifices,
    })
}

#[cfg(test)]
#[path = "rating_tests.rs"]
mod tests;
