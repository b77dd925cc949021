//! A yardstick: the agent plays Stockfish held to fixed strengths, and its Elo is estimated from
//! the results by maximum likelihood under the logistic Elo model, with a 95% interval from the
//! likelihood profile (so a match with no points at all still bounds the rating from above).

use lachesis_shared::chess::rules::{MAX_PLIES, fen_of, outcome_of, parse_uci};
use lachesis_shared::chess::{GameOutcome, Side};
use rand::rngs::StdRng;
use shakmaty::{Chess, Color, Position};

use crate::agent::{self, PolicyParams};
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
fn bisect(mut lo: f64, mut hi: f64, f: impl Fn(f64) -> f64) -> f64 {
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

/// One game between the agent (`params`) and the engine behind `opponent`.
pub fn play_engine(
    params: &PolicyParams,
    opponent: &EnginePool,
    agent_side: Side,
    max_plies: usize,
    rng: &mut StdRng,
) -> Result<GameOutcome, EngineError> {
    let agent_color = match agent_side {
        Side::White => Color::White,
        Side::Black => Color::Black,
    };
    let mut pos = Chess::default();
    let mut plies = 0;
    loop {
        if let Some(outcome) = outcome_of(&pos, plies.min(MAX_PLIES)) {
            return Ok(outcome);
        }
        if plies >= max_plies {
            return oracle::adjudicate(opponent, &pos);
        }
        let m = if pos.turn() == agent_color {
            match agent::choose(params, &pos, rng) {
                Some(decision) => decision.chosen,
                None => return Ok(selfplay::adjudicate(&pos)),
            }
        } else {
            let best = opponent.analyse(&fen_of(&pos), None)?.best.ok_or_else(|| {
                EngineError::Protocol("no move in a position that has one".into())
            })?;
            parse_uci(&pos, &best).map_err(|e| EngineError::Protocol(format!("{best}: {e}")))?
        };
        pos.play_unchecked(m);
        plies += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_even_score_against_one_opponent_is_its_rating() {
        let e = estimate(&[MatchResult {
            opponent: 1500.0,
            games: 20,
            points: 10.0,
        }]);
        assert!((e.point.unwrap() - 1500.0).abs() < 1e-6, "{e:?}");
        let (low, high) = (e.low.unwrap(), e.high.unwrap());
        assert!(low < 1500.0 && high > 1500.0);
        // Symmetric for an even score; about ±160 for 20 games (SE = 400/(ln10·√(20/4)) ≈ 78).
        assert!(((1500.0 - low) - (high - 1500.0)).abs() < 1.0, "{e:?}");
        assert!((150.0..175.0).contains(&(high - 1500.0)), "{e:?}");
    }

    #[test]
    fn three_quarters_is_191_above_the_opponent() {
        // E = 0.75 ⇔ 10^(-d/400) = 1/3 ⇔ d = 400·log10(3) = 190.85.
        let e = estimate(&[MatchResult {
            opponent: 1400.0,
            games: 40,
            points: 30.0,
        }]);
        assert!((e.point.unwrap() - 1590.85).abs() < 0.1, "{e:?}");
        assert!(e.shown().starts_with("1591 (95% "), "{}", e.shown());
    }

    #[test]
    fn all_lost_bounds_from_above_and_all_won_from_below() {
        let lost = estimate(&[MatchResult {
            opponent: 1350.0,
            games: 10,
            points: 0.0,
        }]);
        assert_eq!((lost.point, lost.low), (None, None));
        // 10 losses: E(h)^0 (1-E(h))^10 = e^-1.92 ⇒ E(h) = 1 − e^-0.192 = 0.1747 ⇒ h = 1350 − 270.
        let h = lost.high.unwrap();
        assert!(
            (h - (1350.0 - 400.0 * ((1.0 - 0.1747) / 0.1747f64).log10())).abs() < 1.0,
            "{h}"
        );
        assert!(lost.shown().starts_with("below "));
        let won = estimate(&[MatchResult {
            opponent: 1350.0,
            games: 10,
            points: 10.0,
        }]);
        assert_eq!((won.point, won.high), (None, None));
        assert!(
            (won.low.unwrap() - (1350.0 + (1350.0 - h))).abs() < 1.0,
            "{won:?}"
        );
        assert_eq!(estimate(&[]).shown(), "no games");
    }

    #[test]
    fn results_against_several_opponents_combine() {
        // Half against 1400 and half against 1600 with equal records: 1500 by symmetry.
        let e = estimate(&[
            MatchResult {
                opponent: 1400.0,
                games: 10,
                points: 6.4,
            },
            MatchResult {
                opponent: 1600.0,
                games: 10,
                points: 3.6,
            },
        ]);
        assert!((e.point.unwrap() - 1500.0).abs() < 1e-6, "{e:?}");
    }
}
