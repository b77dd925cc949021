//! Learning from judged games: REINFORCE on the policy's feature weights.
//!
//! Each agent move carries d log π / d w (from [`crate::agent::Decision`]) and a return: the
//! judge's reward for the move plus the game's result, weighted. Returns are centred on their
//! mean over the update (a baseline, so an update moves towards the better moves of the batch
//! rather than towards every move), and the step is clipped so one odd game cannot wreck a policy.

use lachesis_shared::chess::{MoveMark, MoveReward};

use crate::agent::{MoveSoftmax, PolicyParams};
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

/// A judged position kept for later versions to learn from again: each likely move's features
/// and return. The returns are Stockfish's and the judge's, which do not depend on the policy,
/// so a later version can weigh the same moves by its own probabilities; what it cannot reuse is
/// the game's result, a single draw of the policy that played it.
#[derive(Debug, Clone, PartialEq)]
pub struct JudgedPosition {
    pub candidates: Vec<([f64; FEATURE_COUNT], f64)>,
}

impl JudgedPosition {
    /// The position as `params` would play it: probabilities over the judged moves alone (the
    /// update renormalises over them anyway), gradients of those renormalised probabilities,
    /// and no result to credit.
    pub fn credit_under(&self, params: &PolicyParams) -> PositionCredit {
        let features: Vec<[f64; FEATURE_COUNT]> = self.candidates.iter().map(|c| c.0).collect();
        let softmax = MoveSoftmax::over(params, &features);
        let candidates = self
            .candidates
            .iter()
            .enumerate()
            .map(|(i, (f, ret))| (softmax.log_prob_gradient(f), softmax.probability(i), *ret))
            .collect();
        PositionCredit {
            candidates,
            chosen_gradient: [0.0; FEATURE_COUNT],
            result: 0.0,
        }
    }
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
    update_expected_replaying(params, positions, &[], settings)
}

/// [`update_expected`] over `positions`, the games just played, and `replayed`, positions of
/// earlier games weighed again by `params` (see [`JudgedPosition::credit_under`]): their likely
/// moves count like the new ones' in the gradient, the Fisher information and the step's size,
/// and only the new games' results are credited.
pub fn update_expected_replaying(
    params: &PolicyParams,
    positions: &[PositionCredit],
    replayed: &[PositionCredit],
    settings: &LearnSettings,
) -> (PolicyParams, UpdateReport) {
    if positions.is_empty() && replayed.is_empty() {
        return apply_step(params, [0.0; FEATURE_COUNT], 0.0, 0, 0.0, settings);
    }
    let n = (positions.len() + replayed.len()) as f64;
    let mut step = [0.0; FEATURE_COUNT];
    let mut mean_return = 0.0;
    for position in positions.iter().chain(replayed) {
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
    }
    if !positions.is_empty() {
        let played = positions.len() as f64;
        let mean_result = positions.iter().map(|p| p.result).sum::<f64>() / played;
        for position in positions {
            let advantage = settings.result_weight * (position.result - mean_result);
            for (s, g) in step.iter_mut().zip(position.chosen_gradient) {
                *s += settings.learning_rate * advantage * g / played;
            }
        }
    }
    let moves = positions.len() + replayed.len();
    match settings.step_rule {
        StepRule::Clipped => apply_step(
            params,
            step,
            settings.max_step,
            moves,
            mean_return,
            settings,
        ),
        StepRule::Natural { damping, max_kl } => {
            let all: Vec<&PositionCredit> = positions.iter().chain(replayed).collect();
            let fisher = trust_region::fisher_matrix(&all);
            let direction =
                trust_region::solve_damped(&fisher, damping.max(f64::MIN_POSITIVE), &step)
                    .unwrap_or([0.0; FEATURE_COUNT]);
            let scale = trust_region::scale_to_kl(&all, &direction, max_kl);
            // The divergence, not the norm, bounds this step.
            let step = direction.map(|d| d * scale);
            apply_step(params, step, f64::INFINITY, moves, mean_return, settings)
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
#[path = "learn_tests.rs"]
mod tests;
