//! The agent's policy: each legal move is scored by weighted features (the search's value among
//! them) and one is sampled from a softmax at a temperature. The weights are what learning moves.

use rand::Rng;
use serde::{Deserialize, Serialize};
use shakmaty::{Chess, Move};

use crate::features::{FEATURE_COUNT, MoveFeatures, NAMES, VERIFIED_SACRIFICE};
use crate::search::SearchStats;
use crate::shakmaty;
use crate::verify;

/// The default search depth (plies, the move itself included). With the deeper look at sacrifices
/// (see [`crate::verify`]) a move takes 21 ms on average, 104 ms at the 99th percentile.
pub const DEFAULT_DEPTH: u32 = 2;
pub const DEFAULT_TEMPERATURE: f64 = 0.4;

/// A versioned set of weights with its sampling settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PolicyParams {
    pub version: i64,
    pub weights: Vec<f64>,
    /// In pawns of weighted score: higher plays more varied moves.
    pub temperature: f64,
    pub depth: u32,
}

impl Default for PolicyParams {
    /// Version 0: a sober player that only trusts the search (one pawn of search value is one
    /// unit of score). Aggression is what it has to learn.
    fn default() -> Self {
        let mut weights = vec![0.0; FEATURE_COUNT];
        weights[0] = 1.0;
        Self {
            version: 0,
            weights,
            temperature: DEFAULT_TEMPERATURE,
            depth: DEFAULT_DEPTH,
        }
    }
}

impl PolicyParams {
    /// Parameters stored as JSON. Versions learned before the last features were added have
    /// fewer weights: the new features weigh nothing until learning moves them. More weights
    /// than features is refused.
    pub fn from_json(value: &serde_json::Value) -> Result<Self, String> {
        let mut params: PolicyParams =
            serde_json::from_value(value.clone()).map_err(|e| format!("policy parameters: {e}"))?;
        if (1..FEATURE_COUNT).contains(&params.weights.len()) {
            params.weights.resize(FEATURE_COUNT, 0.0);
        }
        if params.weights.len() != FEATURE_COUNT {
            return Err(format!(
                "policy parameters have {} weights, expected {FEATURE_COUNT}",
                params.weights.len()
            ));
        }
        if !params.temperature.is_finite()
            || params.temperature <= 0.0
            || params.weights.iter().any(|w| !w.is_finite())
        {
            return Err("policy parameters must be finite with a positive temperature".into());
        }
        Ok(params)
    }

    pub fn named_weights(&self) -> Vec<(&'static str, f64)> {
        NAMES
            .iter()
            .copied()
            .zip(self.weights.iter().copied())
            .collect()
    }

    /// Whether the `verified_sacrifice` feature changes what this policy plays.
    pub fn weighs_verified_sacrifices(&self) -> bool {
        self.weights
            .get(VERIFIED_SACRIFICE)
            .is_some_and(|w| *w != 0.0)
    }
}

/// The policy's softmax over some moves, given their features: what the agent samples from and
/// what learning differentiates. The same arithmetic serves a move choice over every legal move
/// and a replayed position over its judged moves alone.
pub struct MoveSoftmax {
    /// Each move's exp(score − the top score), and their sum.
    exps: Vec<f64>,
    total: f64,
    /// The features' expectation under the softmax.
    expected: [f64; FEATURE_COUNT],
    temperature: f64,
}

impl MoveSoftmax {
    pub fn over(params: &PolicyParams, features: &[[f64; FEATURE_COUNT]]) -> Self {
        let scores: Vec<f64> = features
            .iter()
            .map(|f| {
                f.iter()
                    .zip(&params.weights)
                    .map(|(x, w)| x * w)
                    .sum::<f64>()
                    / params.temperature
            })
            .collect();
        let top = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let exps: Vec<f64> = scores.iter().map(|s| (s - top).exp()).collect();
        let total: f64 = exps.iter().sum();
        let mut expected = [0.0; FEATURE_COUNT];
        for (f, e) in features.iter().zip(&exps) {
            for (acc, x) in expected.iter_mut().zip(f) {
                *acc += x * e / total;
            }
        }
        Self {
            exps,
            total,
            expected,
            temperature: params.temperature,
        }
    }

    pub fn probability(&self, i: usize) -> f64 {
        self.exps[i] / self.total
    }

    /// d log π / d weights of a move with features `f`: (f − E[f]) / temperature.
    pub fn log_prob_gradient(&self, f: &[f64; FEATURE_COUNT]) -> [f64; FEATURE_COUNT] {
        let mut g = [0.0; FEATURE_COUNT];
        for ((g, x), mean) in g.iter_mut().zip(f).zip(self.expected) {
            *g = (x - mean) / self.temperature;
        }
        g
    }

    /// The move a uniform draw from [0, 1) picks; there must be one.
    fn draw(&self, uniform: f64) -> usize {
        let mut draw = uniform * self.total;
        for (i, e) in self.exps.iter().enumerate() {
            if draw < *e {
                return i;
            }
            draw -= e;
        }
        self.exps.len() - 1
    }

    /// Move indices, likeliest first.
    fn likeliest(&self) -> Vec<usize> {
        let mut order: Vec<usize> = (0..self.exps.len()).collect();
        order.sort_by(|a, b| self.exps[*b].total_cmp(&self.exps[*a]));
        order
    }
}

/// One move choice, with what learning needs to credit it.
#[derive(Debug, Clone)]
pub struct Decision {
    pub chosen: Move,
    pub features: MoveFeatures,
    /// The search's value of the chosen move and of the best move, in centipawns.
    pub chosen_value: i32,
    pub best_value: i32,
    /// d log π(chosen) / d weights: (f(chosen) − E_π[f]) / temperature.
    pub log_prob_gradient: [f64; FEATURE_COUNT],
    pub probability: f64,
    pub nodes: u64,
    /// The likeliest moves (the chosen one among them when it is likely enough), for learning
    /// from what the policy would have played on average rather than from one draw.
    pub candidates: Vec<Candidate>,
}

/// One move the policy might have played.
#[derive(Debug, Clone)]
pub struct Candidate {
    pub m: Move,
    pub probability: f64,
    /// d log π(m) / d weights.
    pub log_prob_gradient: [f64; FEATURE_COUNT],
    /// The move's features, so a later version can weigh it again.
    pub features: [f64; FEATURE_COUNT],
}

/// At most this many candidates are kept per decision, each at least [`MIN_CANDIDATE`] likely,
/// besides every sacrifice the shallow search rates close to its best move.
pub const MAX_CANDIDATES: usize = 6;
const MIN_CANDIDATE: f64 = 0.02;

/// Chooses a move for the side to move, with every feature measured so the decision can be
/// learned from; `None` when the game is over.
pub fn choose(params: &PolicyParams, pos: &Chess, rng: &mut impl Rng) -> Option<Decision> {
    choose_with(params, pos, true, rng)
}

/// [`choose`] for a player that does not learn from its moves (a fixed baseline, a rating game):
/// the deeper look at sacrifices is skipped when the policy gives it no weight. The move drawn is
/// the same; only the decision's gradient lacks that feature's term.
pub fn choose_to_play(params: &PolicyParams, pos: &Chess, rng: &mut impl Rng) -> Option<Decision> {
    choose_with(params, pos, params.weighs_verified_sacrifices(), rng)
}

fn choose_with(
    params: &PolicyParams,
    pos: &Chess,
    verify: bool,
    rng: &mut impl Rng,
) -> Option<Decision> {
    let mut stats = SearchStats::default();
    let (scored, best_value) = verify::scored_features(pos, params.depth, verify, &mut stats);
    if scored.is_empty() {
        return None;
    }
    let values: Vec<[f64; FEATURE_COUNT]> = scored.iter().map(|(_, _, f)| f.values()).collect();
    let softmax = MoveSoftmax::over(params, &values);
    let index = softmax.draw(rng.random::<f64>());
    let (chosen, chosen_value, f) = scored[index];
    let log_prob_gradient = softmax.log_prob_gradient(&values[index]);
    // Sacrifices the shallow search rates close to its best move (those the deeper look
    // considers) are kept however unlikely. Learning whether to trust the verified ones needs
    // every one judged, not only those the policy already plays; and the unverified ones are
    // what a larger weight on sacrifice in general would unlock: unjudged, they cost nothing in
    // the update, and the next version plays them.
    let kept = softmax
        .likeliest()
        .into_iter()
        .enumerate()
        .filter(|(rank, i)| {
            (*rank < MAX_CANDIDATES && softmax.probability(*i) >= MIN_CANDIDATE)
                || verify::shortlisted(&scored[*i].2, scored[*i].1, best_value)
        })
        .map(|(_, i)| Candidate {
            m: scored[i].0,
            probability: softmax.probability(i),
            log_prob_gradient: softmax.log_prob_gradient(&values[i]),
            features: values[i],
        })
        .collect();
    Some(Decision {
        chosen,
        features: f,
        chosen_value,
        best_value,
        log_prob_gradient,
        probability: softmax.probability(index),
        nodes: stats.nodes,
        candidates: kept,
    })
}

/// Every legal move with its probability under `params`.
pub fn distribution(params: &PolicyParams, pos: &Chess) -> Vec<(Move, f64)> {
    let mut stats = SearchStats::default();
    let verify = params.weighs_verified_sacrifices();
    let (scored, _) = verify::scored_features(pos, params.depth, verify, &mut stats);
    let values: Vec<[f64; FEATURE_COUNT]> = scored.iter().map(|(_, _, f)| f.values()).collect();
    let softmax = MoveSoftmax::over(params, &values);
    scored
        .iter()
        .enumerate()
        .map(|(i, (m, _, _))| (*m, softmax.probability(i)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use lachesis_shared::chess::rules::{START_FEN, parse_fen, uci_of};
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    #[test]
    fn a_cold_sober_policy_takes_the_free_queen() {
        let params = PolicyParams {
            temperature: 0.05,
            ..PolicyParams::default()
        };
        let pos = parse_fen("4k3/8/8/3q4/8/8/3R4/4K3 w - - 0 1").unwrap();
        let mut rng = StdRng::seed_from_u64(1);
        let d = choose(&params, &pos, &mut rng).unwrap();
        assert_eq!(uci_of(d.chosen), "d2d5");
        assert!(d.probability > 0.99);
        assert_eq!(d.chosen_value, d.best_value);
    }

    #[test]
    fn the_gradient_points_from_the_average_move_to_the_chosen_one() {
        let params = PolicyParams::default();
        let pos = parse_fen(START_FEN).unwrap();
        let mut rng = StdRng::seed_from_u64(7);
        let d = choose(&params, &pos, &mut rng).unwrap();
        let p = |params: &PolicyParams| {
            distribution(params, &pos)
                .into_iter()
                .find(|(m, _)| *m == d.chosen)
                .unwrap()
                .1
        };
        assert!((p(&params) - d.probability).abs() < 1e-9);
        // Moving weights along the gradient makes the chosen move more likely.
        let mut nudged = params.clone();
        for (w, g) in nudged.weights.iter_mut().zip(d.log_prob_gradient) {
            *w += 0.05 * g;
        }
        assert!(p(&nudged) > p(&params), "{} -> {}", p(&params), p(&nudged));
    }

    #[test]
    fn a_player_that_does_not_learn_skips_the_deeper_look_until_it_weighs_it() {
        // c4 here is a pawn sacrifice the deeper search verifies (see `verify`).
        let pos = parse_fen("r1b2bnr/2q1kp2/1np1p1pp/pp6/1P3PPP/2PP4/P2QP1B1/1RB1K1NR w K - 0 17")
            .unwrap();
        let c4 = lachesis_shared::chess::rules::parse_uci(&pos, "c3c4").unwrap();
        let draw = |params: &PolicyParams, learning: bool| {
            let mut rng = StdRng::seed_from_u64(3);
            if learning {
                choose(params, &pos, &mut rng).unwrap()
            } else {
                choose_to_play(params, &pos, &mut rng).unwrap()
            }
        };
        let v0 = PolicyParams::default();
        let (learning, playing) = (draw(&v0, true), draw(&v0, false));
        // The same move, as likely: the feature weighs nothing in version 0.
        assert_eq!(learning.chosen, playing.chosen);
        assert!((learning.probability - playing.probability).abs() < 1e-12);
        // Learning keeps the verified sacrifice, and its gradient says it is one; playing never
        // looked, so no move's gradient has that term.
        let verified_term = |d: &Decision| {
            d.candidates
                .iter()
                .find(|c| c.m == c4)
                .map(|c| c.log_prob_gradient[crate::features::VERIFIED_SACRIFICE])
        };
        assert!(verified_term(&learning).is_some_and(|g| g > 0.0));
        assert!(
            playing
                .candidates
                .iter()
                .all(|c| c.log_prob_gradient[crate::features::VERIFIED_SACRIFICE] == 0.0)
        );
        // A policy that weighs verified sacrifices looks whether it learns or not.
        let mut trusting = v0.clone();
        trusting.weights[crate::features::VERIFIED_SACRIFICE] = 2.0;
        let (learning, playing) = (draw(&trusting, true), draw(&trusting, false));
        assert!(verified_term(&learning).is_some_and(|g| g > 0.0));
        assert!(verified_term(&playing).is_some_and(|g| g > 0.0));
        assert!((learning.probability - playing.probability).abs() < 1e-12);
    }

    #[test]
    fn stored_parameters_are_checked() {
        let good = serde_json::to_value(PolicyParams::default()).unwrap();
        assert_eq!(
            PolicyParams::from_json(&good).unwrap(),
            PolicyParams::default()
        );
        // An older version's ten weights: the three sacrifice kinds and offers_material start at
        // zero.
        let older = serde_json::json!({"version": 3, "weights": vec![0.5; 10], "temperature": 0.5, "depth": 2});
        let read = PolicyParams::from_json(&older).unwrap();
        assert_eq!(read.weights.len(), FEATURE_COUNT);
        assert_eq!(&read.weights[10..], &[0.0, 0.0, 0.0, 0.0]);
        let long = serde_json::json!({"version": 1, "weights": vec![1.0; FEATURE_COUNT + 1], "temperature": 0.5, "depth": 2});
        assert!(PolicyParams::from_json(&long).is_err());
        let empty =
            serde_json::json!({"version": 1, "weights": [], "temperature": 0.5, "depth": 2});
        assert!(PolicyParams::from_json(&empty).is_err());
        let cold = serde_json::json!({"version": 1, "weights": vec![0.0; FEATURE_COUNT], "temperature": 0.0, "depth": 2});
        assert!(PolicyParams::from_json(&cold).is_err());
    }
}
