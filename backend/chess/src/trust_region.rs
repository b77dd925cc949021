//! Natural-gradient steps of a set size. The direction solves the full Fisher information matrix
//! of the likely moves, so features that rise and fall together (a verified sacrifice is also a
//! sacrifice, and often backed by the search) do not each take a whole step: with only the
//! matrix's diagonal, steps meant to move the policy 0.05 nats moved it 0.08-0.11. The step is
//! then scaled until the policy over the likely moves has moved the set amount, measured rather
//! than estimated to second order.

use std::borrow::Borrow;

use crate::features::FEATURE_COUNT;
use crate::learn::PositionCredit;

type Matrix = [[f64; FEATURE_COUNT]; FEATURE_COUNT];

/// E[∇ log π ∇ log πᵀ] over each position's likely moves, weighted by their probabilities.
pub fn fisher_matrix(positions: &[impl Borrow<PositionCredit>]) -> Matrix {
    let mut fisher = [[0.0; FEATURE_COUNT]; FEATURE_COUNT];
    let n = positions.len().max(1) as f64;
    for position in positions {
        let position = position.borrow();
        let mass: f64 = position.candidates.iter().map(|c| c.1).sum();
        if mass <= 0.0 {
            continue;
        }
        for (g, probability, _) in &position.candidates {
            let w = probability / mass / n;
            for i in 0..FEATURE_COUNT {
                for j in 0..FEATURE_COUNT {
                    fisher[i][j] += w * g[i] * g[j];
                }
            }
        }
    }
    fisher
}

/// Solves (F + damping·I) x = b by Cholesky; `None` when the damped matrix is not positive
/// definite (a damping of zero with a feature no move varies in).
pub fn solve_damped(
    fisher: &Matrix,
    damping: f64,
    b: &[f64; FEATURE_COUNT],
) -> Option<[f64; FEATURE_COUNT]> {
    let mut l = [[0.0; FEATURE_COUNT]; FEATURE_COUNT];
    for i in 0..FEATURE_COUNT {
        for j in 0..=i {
            let dot: f64 = l[i][..j].iter().zip(&l[j][..j]).map(|(a, b)| a * b).sum();
            let sum = fisher[i][j] + if i == j { damping } else { 0.0 } - dot;
            if i == j {
                // Not positive (or not a number): the matrix is singular or indefinite.
                if sum.is_nan() || sum <= 0.0 {
                    return None;
                }
                l[i][i] = sum.sqrt();
            } else {
                l[i][j] = sum / l[j][j];
            }
        }
    }
    let mut y = [0.0; FEATURE_COUNT];
    for i in 0..FEATURE_COUNT {
        let s: f64 = (0..i).map(|k| l[i][k] * y[k]).sum();
        y[i] = (b[i] - s) / l[i][i];
    }
    let mut x = [0.0; FEATURE_COUNT];
    for i in (0..FEATURE_COUNT).rev() {
        let s: f64 = (i + 1..FEATURE_COUNT).map(|k| l[k][i] * x[k]).sum();
        x[i] = (y[i] - s) / l[i][i];
    }
    Some(x)
}

/// The mean over positions of KL(π_old ‖ π_new) over each position's likely moves, renormalised,
/// for the weights moved by `step`: a move's logit moves by `step · ∇ log π`, up to a constant
/// per position that the softmax cancels.
pub fn candidate_kl(positions: &[impl Borrow<PositionCredit>], step: &[f64; FEATURE_COUNT]) -> f64 {
    let mut total = 0.0;
    let mut counted = 0usize;
    for position in positions {
        let position = position.borrow();
        let mass: f64 = position.candidates.iter().map(|c| c.1).sum();
        if mass <= 0.0 {
            continue;
        }
        let shifts: Vec<(f64, f64)> = position
            .candidates
            .iter()
            .map(|(g, p, _)| {
                (
                    p / mass,
                    g.iter().zip(step).map(|(g, s)| g * s).sum::<f64>(),
                )
            })
            .collect();
        let top = shifts.iter().map(|s| s.1).fold(f64::NEG_INFINITY, f64::max);
        let log_norm = top
            + shifts
                .iter()
                .map(|(p, x)| p * (x - top).exp())
                .sum::<f64>()
                .ln();
        total += shifts.iter().map(|(p, x)| p * (log_norm - x)).sum::<f64>();
        counted += 1;
    }
    total / counted.max(1) as f64
}

/// The factor that makes `direction` move the policy `max_kl` nats per position (by bisection:
/// the divergence grows with the factor); 0, no step, when no factor up to 2^60 moves it that far:
/// a direction that changes no likely move, or a divergence the likely moves cannot reach.
pub fn scale_to_kl(
    positions: &[impl Borrow<PositionCredit>],
    direction: &[f64; FEATURE_COUNT],
    max_kl: f64,
) -> f64 {
    let kl_at = |scale: f64| {
        let step = direction.map(|d| d * scale);
        candidate_kl(positions, &step)
    };
    let mut high = 1.0;
    let mut doublings = 0;
    while kl_at(high) < max_kl {
        high *= 2.0;
        doublings += 1;
        if doublings > 60 {
            return 0.0;
        }
    }
    let mut low = 0.0;
    for _ in 0..60 {
        let mid = 0.5 * (low + high);
        if kl_at(mid) < max_kl {
            low = mid;
        } else {
            high = mid;
        }
    }
    low
}

#[cfg(test)]
mod tests {
    use super::*;

    fn along(pairs: &[(usize, f64)]) -> [f64; FEATURE_COUNT] {
        let mut g = [0.0; FEATURE_COUNT];
        for (i, x) in pairs {
            g[*i] = *x;
        }
        g
    }

    /// Two equally likely moves whose gradients are `g` and `-g`.
    fn pair(g: [f64; FEATURE_COUNT]) -> PositionCredit {
        PositionCredit {
            candidates: vec![(g, 0.5, 1.0), (g.map(|x| -x), 0.5, 0.0)],
            chosen_gradient: [0.0; FEATURE_COUNT],
            result: 0.0,
        }
    }

    #[test]
    fn the_divergence_of_two_even_moves_is_log_cosh_of_the_logit_shift() {
        // Logits move by ±y, so the new probabilities are e^{±y} / (2 cosh y) and
        // KL = −½ ln(e^y / 2cosh y) − ½ ln(e^{−y} / 2cosh y) − ln 2 = ln cosh y.
        let positions = [pair(along(&[(3, 1.0)])), pair(along(&[(5, 0.5)]))];
        let step = along(&[(3, 0.8), (5, 2.0)]);
        let expected = 0.5 * (0.8f64.cosh().ln() + 1.0f64.cosh().ln());
        assert!((candidate_kl(&positions, &step) - expected).abs() < 1e-12);
        assert_eq!(candidate_kl(&positions, &[0.0; FEATURE_COUNT]), 0.0);
    }

    #[test]
    fn the_damped_system_is_solved() {
        // F = [[2, 1], [1, 2]] on features 0 and 1, identity (damping 1) elsewhere:
        // (F + I) x = (4, 5) has x = (7/8, 11/8).
        let mut fisher = [[0.0; FEATURE_COUNT]; FEATURE_COUNT];
        fisher[0][0] = 2.0;
        fisher[1][1] = 2.0;
        fisher[0][1] = 1.0;
        fisher[1][0] = 1.0;
        let x = solve_damped(&fisher, 1.0, &along(&[(0, 4.0), (1, 5.0), (7, 3.0)])).unwrap();
        assert!((x[0] - 7.0 / 8.0).abs() < 1e-12 && (x[1] - 11.0 / 8.0).abs() < 1e-12);
        assert!((x[7] - 3.0).abs() < 1e-12);
        // Without damping, a feature no move varies in leaves the matrix singular.
        assert!(solve_damped(&fisher, 0.0, &along(&[(0, 1.0)])).is_none());
    }

    #[test]
    fn features_that_move_together_share_one_step() {
        // Features 2 and 12 are equal in every likely move, as a verified sacrifice's are.
        let positions = [pair(along(&[(2, 1.0), (12, 1.0)]))];
        let fisher = fisher_matrix(&positions);
        assert_eq!(fisher[2][12], 1.0);
        let gradient = along(&[(2, 0.25), (12, 0.25)]);
        let direction = solve_damped(&fisher, 0.01, &gradient).unwrap();
        let scale = scale_to_kl(&positions, &direction, 0.02);
        let (a, b) = (direction[2] * scale, direction[12] * scale);
        assert!((a - b).abs() < 1e-12);
        // The logits move by a + b: the pair, not each weight, is sized to 0.02 nats.
        assert!(((a + b).cosh().ln() - 0.02).abs() < 1e-9, "{a} {b}");
        // A direction that changes no likely move cannot be sized.
        assert_eq!(scale_to_kl(&positions, &along(&[(4, 1.0)]), 0.02), 0.0);
    }
}
