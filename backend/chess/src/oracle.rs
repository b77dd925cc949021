//! Stockfish as the judge of soundness. A move is searched against the engine's best line from
//! the same position: the value lost by playing it decides whether a sacrifice is sound (it
//! keeps the evaluation within a margin, or wins) and which annotation the move earns.
//!
//! Annotations follow lichess's analysis: inaccuracies, mistakes and blunders by how much the
//! mover's winning chances fall (`2 / (1 + e^(-0.00368208·cp)) − 1`, on −1..1, with drops of 0.1,
//! 0.2 and 0.3); `!!` only for a sound sacrifice that is the best move or within a few centipawns
//! of it, `!` for any other sound sacrifice.

use lachesis_shared::chess::rules::{fen_of, parse_uci, san_of, uci_of};
use lachesis_shared::chess::{EngineView, GameEnd, GameOutcome, MoveMark, MoveReward, Side};
use shakmaty::{Chess, Color, Move, Position};

use crate::features::{self, MoveFeatures};
use crate::judge::{aggression_of, combine, round1};
use crate::shakmaty;
use crate::stockfish::{Analysis, EngineError, EnginePool, MATE_CP, Score};

pub const STOCKFISH_JUDGE: &str = "stockfish";

/// Evaluations are compared within ± this: past it a position is won or lost either way, so a
/// mate in three that becomes a crushing material lead is not a "loss".
const DECIDED_CP: i32 = 1_000;

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OracleSettings {
    /// A sacrifice losing more than this against the best move is unsound.
    pub unsound_margin_cp: i32,
    /// A sound sacrifice within this of the best move is brilliant.
    pub near_best_cp: i32,
}

impl Default for OracleSettings {
    fn default() -> Self {
        Self {
            unsound_margin_cp: 100,
            near_best_cp: 30,
        }
    }
}

/// The engine's figures for one move, from the mover's side.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Assessment {
    pub best_cp: i32,
    pub played_cp: i32,
    /// The engine's best move (UCI), `None` in a position with no legal move.
    pub best_uci: Option<String>,
    pub depth: u32,
}

impl Assessment {
    /// Centipawns the move gives up against the best move, both capped at a decided game.
    pub fn loss_cp(&self) -> i32 {
        loss_cp(self.best_cp, self.played_cp)
    }

    /// How far the mover's winning chances fall, on lichess's −1..1 scale.
    pub fn chance_drop(&self) -> f64 {
        (winning_chances(self.best_cp) - winning_chances(self.played_cp)).max(0.0)
    }

    pub fn is_best(&self, m: Move) -> bool {
        self.best_uci.as_deref() == Some(uci_of(m).as_str())
    }
}

/// Centipawns between the best move's value and the played one's, both capped at a decided game.
pub fn loss_cp(best_cp: i32, played_cp: i32) -> i32 {
    let cap = |cp: i32| cp.clamp(-DECIDED_CP, DECIDED_CP);
    (cap(best_cp) - cap(played_cp)).max(0)
}

/// The mover's winning chances on −1..1 for an evaluation in centipawns.
pub fn winning_chances(cp: i32) -> f64 {
    let cp = f64::from(cp.clamp(-DECIDED_CP, DECIDED_CP));
    2.0 / (1.0 + (-0.003_682_08 * cp).exp()) - 1.0
}

/// Searches the position before `m` and, unless `m` is the engine's choice, `m` alone.
pub fn assess(pool: &EnginePool, pos: &Chess, m: Move) -> Result<Assessment, EngineError> {
    BestLine::search(pool, pos)?.assess(pool, m)
}

/// [`assess`] for several moves of one position: one search for the best line, one
/// multi-line search for all of `moves`.
pub fn assess_each(
    pool: &EnginePool,
    pos: &Chess,
    moves: &[Move],
) -> Result<Vec<Assessment>, EngineError> {
    BestLine::search(pool, pos)?.assess_each(pool, moves)
}

/// Stockfish's best line from one position, searched once, against which any number of its
/// moves can then be assessed.
pub struct BestLine {
    fen: String,
    best: Analysis,
}

impl BestLine {
    pub fn search(pool: &EnginePool, pos: &Chess) -> Result<Self, EngineError> {
        let fen = fen_of(pos);
        let best = pool.analyse(&fen, None)?;
        Ok(BestLine { fen, best })
    }

    /// `m` searched alone (unless it is the engine's choice).
    pub fn assess(&self, pool: &EnginePool, m: Move) -> Result<Assessment, EngineError> {
        let played = uci_of(m);
        let played_score = if self.best.best.as_deref() == Some(played.as_str()) {
            self.best.score
        } else {
            pool.analyse(&self.fen, Some(&played))?.score
        };
        Ok(self.against(played_score))
    }

    /// `moves` in one multi-line search. A move's score there depends on which others share
    /// the search; [`BestLine::assess`] does not.
    pub fn assess_each(
        &self,
        pool: &EnginePool,
        moves: &[Move],
    ) -> Result<Vec<Assessment>, EngineError> {
        let ucis: Vec<String> = moves.iter().map(|m| uci_of(*m)).collect();
        let scores = pool.analyse_each(&self.fen, &ucis)?;
        Ok(scores
            .into_iter()
            .map(|score| self.against(score))
            .collect())
    }

    fn against(&self, played: Score) -> Assessment {
        Assessment {
            best_cp: self.best.score.centipawns(),
            played_cp: played.centipawns(),
            best_uci: self.best.best.clone(),
            depth: self.best.depth,
        }
    }
}

/// Stockfish's evaluation at which an unfinished game is adjudicated won.
pub const DECISIVE_CP: i32 = 300;

/// An unfinished game's result by Stockfish: won for a side it rates [`DECISIVE_CP`] or more
/// ahead, else drawn.
pub fn adjudicate(pool: &EnginePool, pos: &Chess) -> Result<GameOutcome, EngineError> {
    let to_move = pool.analyse(&fen_of(pos), None)?.score.centipawns();
    let white = if pos.turn() == Color::White {
        to_move
    } else {
        -to_move
    };
    let winner = if white >= DECISIVE_CP {
        Some(Side::White)
    } else if white <= -DECISIVE_CP {
        Some(Side::Black)
    } else {
        None
    };
    Ok(GameOutcome::new(GameEnd::MoveLimit, winner))
}

/// Whether a move's sacrifice holds up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Soundness {
    NoSacrifice,
    Sound,
    Unsound,
}

/// A sacrifice is sound when it keeps the evaluation within the margin of the best move and
/// does not leave the mover lost ([`DECISIVE_CP`] or more behind): in a lost position every move
/// "keeps" the evaluation, and counting those as sound taught the agent to throw pieces away once
/// a game was gone.
pub fn soundness(offered_cp: i32, assessment: &Assessment, settings: &OracleSettings) -> Soundness {
    if offered_cp <= 0 {
        Soundness::NoSacrifice
    } else if assessment.loss_cp() <= settings.unsound_margin_cp
        && assessment.played_cp > -DECISIVE_CP
    {
        Soundness::Sound
    } else {
        Soundness::Unsound
    }
}

pub fn mark(
    offered_cp: i32,
    assessment: &Assessment,
    settings: &OracleSettings,
) -> Option<MoveMark> {
    let drop = assessment.chance_drop();
    let by_drop = if drop >= 0.3 {
        Some(MoveMark::Blunder)
    } else if drop >= 0.2 {
        Some(MoveMark::Mistake)
    } else if drop >= 0.1 {
        Some(MoveMark::Inaccuracy)
    } else {
        None
    };
    match soundness(offered_cp, assessment, settings) {
        Soundness::Sound if assessment.loss_cp() <= settings.near_best_cp => {
            Some(MoveMark::Brilliant)
        }
        Soundness::Sound => by_drop.or(Some(MoveMark::Good)),
        Soundness::Unsound => by_drop.or(Some(MoveMark::Inaccuracy)),
        Soundness::NoSacrifice => by_drop,
    }
}

/// The oracle's verdict on `m` in `pos` from Stockfish's `assessment`.
pub fn verdict(
    pos: &Chess,
    m: Move,
    assessment: &Assessment,
    settings: &OracleSettings,
) -> MoveReward {
    let f = features::extract(pos, m, assessment.played_cp, assessment.best_cp);
    let offered = f.offered_centipawns();
    let aggression = aggression_of(&f);
    let loss = f64::from(assessment.loss_cp());
    let margin = f64::from(settings.unsound_margin_cp.max(1));
    // 10 for no loss, 5 at the margin (the edge of sound), 0 at twice the margin.
    let soundness_score = if offered <= 0 {
        5.0
    } else if assessment.played_cp <= -DECISIVE_CP {
        // Nothing is held by a sacrifice that leaves the mover lost.
        0.0
    } else {
        10.0 * (1.0 - loss / (2.0 * margin)).clamp(0.0, 1.0)
    };
    let mark = mark(offered, assessment, settings);
    let mates = assessment.played_cp > MATE_CP - 100;
    let brilliance = if mates {
        10.0
    } else if matches!(mark, Some(MoveMark::Blunder | MoveMark::Mistake)) {
        0.0
    } else if offered > 0 {
        soundness_score * (f64::from(offered) / 300.0).min(1.0)
    } else if assessment.loss_cp() == 0 && (f.check > 0.0 || f.capture > 0.0) {
        3.0
    } else {
        1.0
    };
    // A move searched alone can score above the whole position's search (a fixed depth finds in
    // the narrower search what the wider one cut): then no move is known to be better.
    let better_move = assessment
        .best_uci
        .as_deref()
        .filter(|best| *best != uci_of(m) && assessment.best_cp > assessment.played_cp)
        .and_then(|best| parse_uci(pos, best).ok())
        .map(|best| san_of(pos, best));
    MoveReward {
        aggression: round1(aggression),
        brilliance: round1(brilliance),
        soundness: round1(soundness_score),
        total: combine(aggression, brilliance, soundness_score),
        material_offered: offered,
        justification: justify(pos, m, &f, assessment, better_move.as_deref(), settings),
        judge: STOCKFISH_JUDGE.into(),
        mark,
        engine: Some(EngineView {
            best_cp: assessment.best_cp,
            played_cp: assessment.played_cp,
            better_move,
            depth: assessment.depth,
        }),
    }
}

/// An evaluation as people read it: `+1.3`, `-0.4`, `#3`, `#-2`.
pub fn shown_eval(cp: i32) -> String {
    lachesis_shared::chess::eval_text(cp, 1, true)
}

fn justify(
    pos: &Chess,
    m: Move,
    f: &MoveFeatures,
    a: &Assessment,
    better: Option<&str>,
    settings: &OracleSettings,
) -> String {
    let san = san_of(pos, m);
    let offered = f.offered_centipawns();
    let what = if offered > 0 {
        format!("{san} offers {:.1} pawns", f64::from(offered) / 100.0)
    } else {
        san.clone()
    };
    let engine = format!("Stockfish (depth {})", a.depth);
    let comparison = match better {
        None => format!(
            "{engine} agrees it is the best move ({})",
            shown_eval(a.played_cp)
        ),
        Some(best) => format!(
            "{engine} rates it {} against {} for {best}",
            shown_eval(a.played_cp),
            shown_eval(a.best_cp)
        ),
    };
    let conclusion = match soundness(offered, a, settings) {
        Soundness::Sound => ": the sacrifice is sound.",
        Soundness::Unsound => ": the sacrifice does not pay.",
        Soundness::NoSacrifice if a.loss_cp() > settings.unsound_margin_cp => {
            ": it gives away the advantage."
        }
        Soundness::NoSacrifice => ".",
    };
    format!("{what}; {comparison}{conclusion}")
}

#[cfg(test)]
#[path = "oracle_tests.rs"]
mod tests;
