//! Learning from judged games: REINFORCE on the policy's feature weights.
//!
//! Each agent move carries d log π / d w (from [`crate::agent::Decision`]) and a return: the
//! judge's reward for the move plus the game's result, weighted. Returns are centred on their
//! mean over the update (a baseline, so an update moves towards the better moves of the batch
//! rather than towards every move), and the step is clipped so one odd game cannot wreck a policy.

use lachesis_shared::chess::{MoveMark, MoveReward};

use crate::agent::PolicyParams;
use crate::features::FEATURE_COUNT;
use crate::trust_region;

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LearnSettings {
    pub learning_rate: f64,
    /// How much a win (+1), draw (0) or loss (−1) adds to every move's return.
    pub result_weight: f64,
    /// The largest change of the weight vector in one update (Euclidean norm).
    pub max_step: f64,
    /// Weights are kept within ± this.
    pub max_weight: f64,
    /// What a pawn given up against Stockfish's best line takes off a move's return.
    pub loss_weight: f64,
    /// Losses are counted up to this many pawns: a move is not worse than "lost".
    pub max_loss_pawns: f64,
    /// Added to the return of a sacrifice Stockfish marks `!` or `!!`.
    pub sound_sacrifice_bonus: f64,
    /// Taken off the return of a sacrifice Stockfish finds unsound: the judge's aggression score
    /// pays for any material offered, and without a price on the unsound ones the agent learns
    /// to offer material whatever it costs.
    pub unsound_sacrifice_penalty: f64,
    /// How [`update_expected`] turns its gradient into a step ([`update`] always clips).
    pub step_rule: StepRule,
}

/// How an expected-gradient update is sized.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum StepRule {
    /// The gradient times the learning rate, its norm clipped to `max_step`.
    Clipped,
    /// The natural gradient: the gradient solved against the policy's Fisher information matrix
    /// (plus `damping` on its diagonal), the step then sized so the policy over the likely moves
    /// moves `max_kl` nats per position, whatever the learning rate (see [`trust_region`]). A
    /// rare feature, such as a verified sacrifice, barely changes the policy when its weight
    /// moves, so it may move far; a common one, such as the search's value, moves little. With a
    /// clipped step, the common features take the whole of it.
    Natural { damping: f64, max_kl: f64 },
}

impl Default for LearnSettings {
    fn default() -> Self {
        Self {
            learning_rate: 8.0,
            result_weight: 0.1,
            max_step: 1.0,
            max_weight: 12.0,
            loss_weight: 0.2,
            max_loss_pawns: 3.0,
            sound_sacrifice_bonus: 1.0,
            unsound_sacrifice_penalty: 1.0,
            step_rule: StepRule::Clipped,
        }
    }
}

/// One agent move's share of an update.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Credit {
    pub log_prob_gradient: [f64; FEATURE_COUNT],
    /// The reward model's score of the move, in [0, 1].
    pub reward: f64,
    /// The game's result for the agent: 1 win, 0 draw, −1 loss.
    pub result: f64,
}

/// What one judged move is worth to learning: the judge's combined score, less what the move
/// gives up against Stockfish's best line when Stockfish judged it, plus a bonus for a sound
/// sacrifice or minus a penalty for an unsound one. Without those terms an unsound sacrifice
/// scores like a sound one on aggression, and the agent learns to throw pieces away.
pub fn move_return(reward: &MoveReward, settings: &LearnSettings) -> f64 {
    let lost_pawns = reward.engine.as_ref().map_or(0.0, |engine| {
        f64::from(crate::oracle::loss_cp(engine.best_cp, engine.played_cp)) / 100.0
    });
    let sound_sacrifice = matches!(reward.mark, Some(MoveMark::Brilliant | MoveMark::Good));
    reward.total - settings.loss_weight * lost_pawns.min(settings.max_loss_pawns)
        + if sound_sacrifice {
            settings.sound_sacrifice_bonus
        } else if reward.material_offered > 0 && reward.engine.is_some() {
            -settings.unsound_sacrifice_penalty
        } else {
            0.0
        }
}

/// A person's 1–5 rating as a reward in [0, 1].
pub fn rating_reward(rating: u8) -> f64 {
    f64::from(rating.clamp(1, 5) - 1) / 4.0
}

/// The reward learned from: the judge's, or the mean of the judge's and the person's rating.
pub fn blended_reward(judge_total: f64, rating: Option<u8>) -> f64 {
    match rating {
        Some(r) => 0.5 * judge_total + 0.5 * rating_reward(r),
        None => judge_total,
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct UpdateReport {
    pub moves: usize,
    pub mean_return: f64,
    pub step_norm: f64,
}

/// The next version of `params` after learning from `credits` (unchanged but for the version
/// when there is nothing to learn from).
pub fn update(
    params: &PolicyParams,
    credits: &[Credit],
    settings: &LearnSettings,
) -> (PolicyParams, UpdateReport) {
    if credits.is_empty() {
        return apply_step(params, [0.0; FEATURE_COUNT], 0.0, 0, 0.0, settings);
    }
    let returns: Vec<f64> = credits
        .iter()
        .map(|c| c.reward + settings.result_weight * c.result)
        .collect();
    let mean_return = returns.iter().sum::<f64>() / returns.len() as f64;
    let mut step = [0.0; FEATURE_COUNT];
    for (credit, ret) in credits.iter().zip(&returns) {
        let advantage = ret - mean_return;
        for (s, g) in step.iter_mut().zip(credit.log_prob_gradient) {
            *s += settings.learning_rate * advantage * g / credits.len() as f64;
        }
    }
    apply_step(
        params,
        step,
        settings.max_step,
        credits.len(),
        mean_return,
        settings,
    )
}

/// One position the agent moved in, with the moves it was likely to play there judged.
#[derive(Debug, Clone, PartialEq)]
pub struct PositionCredit {
    /// Each likely move: d log π / d w, its probability, its return.
    pub candidates: Vec<([f64; FEATURE_COUNT], f64, f64)>,
    /// d log π / d w of the move actually played, which the game's result is credited to.
    pub chosen_gradient: [f64; FEATURE_COUNT],
    /// The game's result for the agent: 1 win, 0 draw, −1 loss.
    pub result: f64,
}

/// The next version of `params` by the expected policy gradient: in every position, each likely
/// move pulls the weights by its probability times how much better it scored than the likely
/// moves' average there. Only the game's result is a one-draw estimate (credited to the moves
/// played, centred on the batch's mean result). Far less noisy than [`update`] when a judge can
/// score moves that were not played.
pub fn update_expected(
    params: &PolicyParams,
    positions: &[PositionCredit],
    settings: &LearnSettings,
) -> (PolicyParams, UpdateReport) {
    if positions.is_empty() {
        return apply_step(params, [0.0; FEATURE_COUNT], 0.0, 0, 0.0, settings);
    }
    let n = positions.len() as f64;
    let mean_result = positions.iter().map(|p| p.result).sum::<f64>() / n;
    let mut step = [0.0; FEATURE_COUNT];
    let mut mean_return = 0.0;
    for position in positions {
        let mass: f64 = position.candidates.iter().map(|c| c.1).sum();
        if mass > 0.0 {
            let average = position.candidates.iter().map(|c| c.1 * c.2).sum::<f64>() / mass;
            mean_return += average / n;
            for (gradient, probability, ret) in &position.candidates {
                for (s, g) in step.iter_mut().zip(gradient) {
                    *s += settings.learning_rate * probability / mass * (ret - average) * g / n;
                }
            }
        }
        let advantage = settings.result_weight * (position.result - mean_result);
        for (s, g) in step.iter_mut().zip(position.chosen_gradient) {
            *s += settings.learning_rate * advantage * g / n;
        }
    }
    match settings.step_rule {
        StepRule::Clipped => apply_step(
            params,
            step,
            settings.max_step,
            positions.len(),
            mean_return,
            settings,
        ),
        StepRule::Natural { damping, max_kl } => {
            let fisher = trust_region::fisher_matrix(positions);
            let direction =
                trust_region::solve_damped(&fisher, damping.max(f64::MIN_POSITIVE), &step)
                    .unwrap_or([0.0; FEATURE_COUNT]);
            let scale = trust_region::scale_to_kl(positions, &direction, max_kl);
            // The divergence, not the norm, bounds this step.
            let step = direction.map(|d| d * scale);
            apply_step(
                params,
                step,
                f64::INFINITY,
                positions.len(),
                mean_return,
                settings,
            )
        }
    }
}

/// The next version: `params` moved by `step`, its norm clipped to `max_step` and each weight
/// kept within bounds (a step that is not finite leaves its weight alone). An empty update still
/// makes a new version.
fn apply_step(
    params: &PolicyParams,
    step: [f64; FEATURE_COUNT],
    max_step: f64,
    moves: usize,
    mean_return: f64,
    settings: &LearnSettings,
) -> (PolicyParams, UpdateReport) {
    let mut next = params.clone();
    next.version = params.version + 1;
    let norm = step.iter().map(|s| s * s).sum::<f64>().sqrt();
    let scale = if norm > max_step {
        max_step / norm
    } else {
        1.0
    };
    for (w, s) in next.weights.iter_mut().zip(step) {
        if s.is_finite() {
            *w = (*w + s * scale).clamp(-settings.max_weight, settings.max_weight);
        }
    }
    let report = UpdateReport {
        moves,
        mean_return,
        step_norm: norm * scale,
    };
    (next, report)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn credit(g0: f64, g1: f64, reward: f64) -> Credit {
        let mut gradient = [0.0; FEATURE_COUNT];
        gradient[0] = g0;
        gradient[1] = g1;
        Credit {
            log_prob_gradient: gradient,
            reward,
            result: 0.0,
        }
    }

    #[test]
    fn weights_move_towards_the_better_rewarded_moves() {
        let params = PolicyParams::default();
        let settings = LearnSettings {
            learning_rate: 1.0,
            max_step: 10.0,
            ..LearnSettings::default()
        };
        // Move A (gradient along feature 1) earned 1.0, move B (against it) earned 0.0.
        let (next, report) = update(
            &params,
            &[credit(0.0, 1.0, 1.0), credit(0.0, -1.0, 0.0)],
            &settings,
        );
        // Baseline 0.5: advantages +0.5 and −0.5, so the step on feature 1 is (0.5·1 + 0.5·1)/2.
        assert!((next.weights[1] - 0.5).abs() < 1e-12, "{:?}", next.weights);
        assert_eq!(next.weights[0], params.weights[0]);
        assert_eq!(next.version, params.version + 1);
        assert!((report.mean_return - 0.5).abs() < 1e-12);
    }

    #[test]
    fn the_expected_gradient_weighs_every_likely_move_by_its_probability() {
        let params = PolicyParams::default();
        let settings = LearnSettings {
            learning_rate: 1.0,
            max_step: 10.0,
            ..LearnSettings::default()
        };
        let along = |x: f64| {
            let mut g = [0.0; FEATURE_COUNT];
            g[1] = x;
            g
        };
        // Two equally likely moves: A (gradient +1 on feature 1) worth 1, B (−1) worth 0. The
        // average is 0.5, so A pulls 0.5·0.5·1 and B pushes 0.5·(−0.5)·(−1): 0.5 in all.
        let position = PositionCredit {
            candidates: vec![(along(1.0), 0.5, 1.0), (along(-1.0), 0.5, 0.0)],
            chosen_gradient: along(-1.0),
            result: -1.0,
        };
        let (next, report) = update_expected(&params, std::slice::from_ref(&position), &settings);
        assert!((next.weights[1] - 0.5).abs() < 1e-12, "{:?}", next.weights);
        assert!((report.mean_return - 0.5).abs() < 1e-12);
        assert_eq!(next.version, 1);
        // A lost game and a won one: the result now pulls towards the won game's move too.
        let won = PositionCredit {
            chosen_gradient: along(1.0),
            result: 1.0,
            ..position.clone()
        };
        let (both, _) = update_expected(&params, &[position, won], &settings);
        // Moves: 0.5 per position, averaged; results ±1 around a mean of 0, weighted 0.1
        // (the server's result weight): (0.1·(−1)·(−1) + 0.1·1·1) / 2 = 0.1.
        assert!((both.weights[1] - 0.6).abs() < 1e-12, "{:?}", both.weights);
    }

    #[test]
    fn a_natural_step_moves_a_rare_feature_far_and_the_policy_by_the_set_amount() {
        let params = PolicyParams::default();
        let settings = LearnSettings {
            step_rule: StepRule::Natural {
                damping: 0.001,
                max_kl: 0.01,
            },
            ..LearnSettings::default()
        };
        let along = |i: usize, x: f64| {
            let mut g = [0.0; FEATURE_COUNT];
            g[i] = x;
            g
        };
        // Feature 1 is common: it tells the two likely moves of position A apart by a whole unit.
        // Feature 12 is rare: it tells those of position B apart by a tenth. In both, the move
        // with more of it scored 1 and the other 0.
        let position = |i: usize, x: f64| PositionCredit {
            candidates: vec![(along(i, x), 0.5, 1.0), (along(i, -x), 0.5, 0.0)],
            chosen_gradient: [0.0; FEATURE_COUNT],
            result: 0.0,
        };
        let (next, _) = update_expected(&params, &[position(1, 1.0), position(12, 0.1)], &settings);
        let common = next.weights[1] - params.weights[1];
        let rare = next.weights[12] - params.weights[12];
        // Plain gradients (per unit learning rate): 0.25 and 0.025. Fisher information: 0.5 and
        // 0.005. Natural directions: 0.25 / 0.501 and 0.025 / 0.006.
        let (natural_common, natural_rare) = (0.25 / 0.501, 0.025 / 0.006);
        assert!(rare > common && common > 0.0, "{common} {rare}");
        assert!(
            (rare / common - natural_rare / natural_common).abs() < 1e-9,
            "{common} {rare}"
        );
        // The policy moves by max_kl: position A's logits by ±common, B's by ±0.1·rare, and two
        // even moves whose logits move by ±y diverge by ln cosh y.
        let kl = 0.5 * (common.cosh().ln() + (0.1 * rare).cosh().ln());
        assert!((kl - 0.01).abs() < 1e-9, "{kl}");
        // Nothing else moved.
        for i in (0..FEATURE_COUNT).filter(|i| *i != 1 && *i != 12) {
            assert_eq!(next.weights[i], params.weights[i]);
        }
        // With nothing to tell moves apart, a natural step is no step.
        let (same, report) = update_expected(
            &params,
            &[PositionCredit {
                candidates: vec![(along(1, 1.0), 0.5, 0.3), (along(1, -1.0), 0.5, 0.3)],
                chosen_gradient: [0.0; FEATURE_COUNT],
                result: 0.0,
            }],
            &settings,
        );
        assert_eq!(same.weights, params.weights);
        assert_eq!(report.step_norm, 0.0);
    }

    #[test]
    fn a_move_is_worth_its_score_less_what_it_lost_plus_a_bonus_when_sound() {
        use lachesis_shared::chess::EngineView;
        let settings = LearnSettings::default();
        let reward = |best_cp: i32, played_cp: i32, mark: Option<MoveMark>| MoveReward {
            aggression: 5.0,
            brilliance: 5.0,
            soundness: 5.0,
            total: 0.5,
            material_offered: 300,
            justification: "x".into(),
            judge: "stockfish".into(),
            mark,
            engine: Some(EngineView {
                best_cp,
                played_cp,
                better_move: None,
                depth: 8,
            }),
        };
        // A sound sacrifice that loses half a pawn: 0.5 − 0.2·0.5 + 1.0.
        let sound = move_return(&reward(50, 0, Some(MoveMark::Good)), &settings);
        assert!((sound - 1.4).abs() < 1e-12, "{sound}");
        // An unsound sacrifice: five pawns lost count as three, and the penalty: 0.5 − 0.2·3 − 1.0.
        let blunder = move_return(&reward(100, -400, Some(MoveMark::Blunder)), &settings);
        assert!((blunder - (-1.1)).abs() < 1e-12, "{blunder}");
        // The same loss without a sacrifice: 0.5 − 0.2·3.
        let plain_blunder = MoveReward {
            material_offered: 0,
            ..reward(100, -400, Some(MoveMark::Blunder))
        };
        let plain_loss = move_return(&plain_blunder, &settings);
        assert!((plain_loss - (-0.1)).abs() < 1e-12, "{plain_loss}");
        // Without Stockfish's figures the judge's score stands alone.
        let plain = MoveReward {
            engine: None,
            ..reward(0, 0, None)
        };
        assert_eq!(move_return(&plain, &settings), 0.5);
    }

    #[test]
    fn equal_returns_teach_nothing_and_big_steps_are_clipped() {
        let params = PolicyParams::default();
        let settings = LearnSettings::default();
        let (same, _) = update(
            &params,
            &[credit(3.0, 1.0, 0.7), credit(-2.0, 4.0, 0.7)],
            &settings,
        );
        assert_eq!(same.weights, params.weights);
        let (big, report) = update(
            &params,
            &[credit(100.0, 0.0, 1.0), credit(-100.0, 0.0, 0.0)],
            &settings,
        );
        assert!((report.step_norm - settings.max_step).abs() < 1e-9);
        assert!((big.weights[0] - params.weights[0] - settings.max_step).abs() < 1e-9);
    }

    #[test]
    fn ratings_blend_with_the_judge() {
        assert_eq!(rating_reward(1), 0.0);
        assert_eq!(rating_reward(5), 1.0);
        assert_eq!(rating_reward(3), 0.5);
        assert_eq!(rating_reward(2), 0.25);
        // Out-of-range ratings count as the nearest of 1 and 5.
        assert_eq!(rating_reward(0), 0.0);
        assert_eq!(rating_reward(9), 1.0);
        assert_eq!(blended_reward(0.4, None), 0.4);
        // Half the judge's, half the person's: 0.5·0.4 + 0.5·1 and 0.5·0.4 + 0.5·0.
        assert!((blended_reward(0.4, Some(5)) - 0.7).abs() < 1e-12);
        assert!((blended_reward(0.4, Some(1)) - 0.2).abs() < 1e-12);
        // 0.5·1 + 0.5·0.5.
        assert!((blended_reward(1.0, Some(3)) - 0.75).abs() < 1e-12);
    }
}
