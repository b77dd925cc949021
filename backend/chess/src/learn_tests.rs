//! Learning's updates, worked by hand.

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

/// A vector that is `x` on feature `i` and 0 elsewhere.
fn along(i: usize, x: f64) -> [f64; FEATURE_COUNT] {
    let mut v = [0.0; FEATURE_COUNT];
    v[i] = x;
    v
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
    // Two equally likely moves: A (gradient +1 on feature 1) worth 1, B (−1) worth 0. The
    // average is 0.5, so A pulls 0.5·0.5·1 and B pushes 0.5·(−0.5)·(−1): 0.5 in all.
    let position = PositionCredit {
        candidates: vec![(along(1, 1.0), 0.5, 1.0), (along(1, -1.0), 0.5, 0.0)],
        chosen_gradient: along(1, -1.0),
        result: -1.0,
    };
    let (next, report) = update_expected(&params, std::slice::from_ref(&position), &settings);
    assert!((next.weights[1] - 0.5).abs() < 1e-12, "{:?}", next.weights);
    assert!((report.mean_return - 0.5).abs() < 1e-12);
    assert_eq!(next.version, 1);
    // A lost game and a won one: the result now pulls towards the won game's move too.
    let won = PositionCredit {
        chosen_gradient: along(1, 1.0),
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

#[test]
fn a_replayed_position_is_weighed_by_the_policy_learning_from_it() {
    // Two judged moves whose features differ by one unit of feature 1, under a policy that
    // weighs it 2 at temperature 0.4: the logits differ by 5, so the first is e^5 times likelier.
    let judged = JudgedPosition {
        candidates: vec![(along(1, 1.0), 0.8), (along(1, 0.0), 0.2)],
    };
    let mut params = PolicyParams::default();
    params.weights[1] = 2.0;
    let credit = judged.credit_under(&params);
    let likelier = 5f64.exp() / (1.0 + 5f64.exp());
    assert!((credit.candidates[0].1 - likelier).abs() < 1e-12);
    assert!((credit.candidates[1].1 - (1.0 - likelier)).abs() < 1e-12);
    // d log p / d w1 is (x − E[x]) / temperature over the two moves.
    assert!((credit.candidates[0].0[1] - (1.0 - likelier) / 0.4).abs() < 1e-12);
    assert!((credit.candidates[1].0[1] - (0.0 - likelier) / 0.4).abs() < 1e-12);
    // Returns are the judge's, whatever the policy; no result is credited again.
    assert_eq!((credit.candidates[0].2, credit.candidates[1].2), (0.8, 0.2));
    assert_eq!(credit.chosen_gradient, [0.0; FEATURE_COUNT]);
    // Version 0 ignores feature 1: the two are even.
    let even = judged.credit_under(&PolicyParams::default());
    assert!((even.candidates[0].1 - 0.5).abs() < 1e-12);
}

#[test]
fn the_policy_that_played_a_position_learns_the_same_from_it_replayed() {
    use rand::SeedableRng;
    // A real decision: its candidates' probabilities and gradients come from the whole
    // softmax, the replayed ones' from the candidates alone; the expected step is the same.
    let params = PolicyParams::default();
    let pos =
        lachesis_shared::chess::rules::parse_fen(lachesis_shared::chess::rules::START_FEN).unwrap();
    let mut rng = rand::rngs::StdRng::seed_from_u64(5);
    let decision = crate::agent::choose(&params, &pos, &mut rng).unwrap();
    assert!(decision.candidates.len() >= 2);
    let returns: Vec<f64> = (0..decision.candidates.len())
        .map(|i| 0.1 * i as f64)
        .collect();
    let played = PositionCredit {
        candidates: decision
            .candidates
            .iter()
            .zip(&returns)
            .map(|(c, r)| (c.log_prob_gradient, c.probability, *r))
            .collect(),
        chosen_gradient: decision.log_prob_gradient,
        result: 1.0,
    };
    let judged = JudgedPosition {
        candidates: decision
            .candidates
            .iter()
            .zip(&returns)
            .map(|(c, r)| (c.features, *r))
            .collect(),
    };
    let settings = LearnSettings {
        learning_rate: 1.0,
        max_step: 100.0,
        ..LearnSettings::default()
    };
    let (fresh, _) = update_expected(&params, std::slice::from_ref(&played), &settings);
    let replayed = judged.credit_under(&params);
    let (again, _) = update_expected_replaying(&params, &[], &[replayed], &settings);
    assert_ne!(fresh.weights, params.weights);
    for (a, b) in fresh.weights.iter().zip(&again.weights) {
        assert!(
            (a - b).abs() < 1e-9,
            "{:?} {:?}",
            fresh.weights,
            again.weights
        );
    }
}

#[test]
fn replayed_positions_add_their_moves_but_not_their_results() {
    let settings = LearnSettings {
        learning_rate: 1.0,
        max_step: 100.0,
        ..LearnSettings::default()
    };
    let params = PolicyParams::default();
    // New games whose moves all scored alike: only their results teach, along feature 1.
    let flat = |chosen: f64, result: f64| PositionCredit {
        candidates: vec![(along(1, 1.0), 0.5, 0.3), (along(1, -1.0), 0.5, 0.3)],
        chosen_gradient: along(1, chosen),
        result,
    };
    let new = [flat(1.0, 1.0), flat(-1.0, -1.0)];
    // A replayed position whose better move has more of feature 2.
    let replayed = PositionCredit {
        candidates: vec![(along(2, 1.0), 0.5, 1.0), (along(2, -1.0), 0.5, 0.0)],
        chosen_gradient: [0.0; FEATURE_COUNT],
        result: 0.0,
    };
    let (next, report) = update_expected_replaying(&params, &new, &[replayed], &settings);
    // Results over the new games alone: (0.1·1·1 + 0.1·(−1)·(−1)) / 2.
    assert!((next.weights[1] - params.weights[1] - 0.1).abs() < 1e-12);
    // Moves over all three positions: the replayed one's 0.5, a third of it.
    assert!((next.weights[2] - 0.5 / 3.0).abs() < 1e-12);
    assert_eq!(report.moves, 3);
    // Without replay, the new games teach nothing about feature 2.
    let (alone, _) = update_expected(&params, &new, &settings);
    assert_eq!(alone.weights[2], 0.0);
}
