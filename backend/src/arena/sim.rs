//! Vote simulators for the tests: votes drawn from known strengths, so the tests' expected values
//! come from the generating model, not from the fitter under test.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::ratings::{Outcome, Vote};

fn logistic(z: f64) -> f64 {
    1.0 / (1.0 + (-z).exp())
}

/// A random ordered pair of distinct contenders.
fn pair(rng: &mut StdRng, n: usize) -> (usize, usize) {
    let a = rng.random_range(0..n);
    let b = (a + rng.random_range(1..n)) % n;
    (a, b)
}

/// `votes` comparisons of uniformly drawn pairs, the winner drawn from the Bradley–Terry model with
/// these strengths (natural log-odds units); no ties.
pub(super) fn bradley_terry(strengths: &[f64], votes: usize, seed: u64) -> Vec<Vote> {
    let mut rng = StdRng::seed_from_u64(seed);
    (0..votes)
        .map(|_| {
            let (a, b) = pair(&mut rng, strengths.len());
            let a_wins = rng.random::<f64>() < logistic(strengths[a] - strengths[b]);
            Vote::new(
                a,
                b,
                if a_wins {
                    Outcome::AWins
                } else {
                    Outcome::BWins
                },
            )
        })
        .collect()
}

/// Like [`bradley_terry`] but with every outcome kind and answer lengths: a vote is a tie or
/// both-bad with probability `tie_share` (split evenly), otherwise decided by the model.
pub(super) fn mixed(strengths: &[f64], votes: usize, tie_share: f64, seed: u64) -> Vec<Vote> {
    let mut rng = StdRng::seed_from_u64(seed);
    (0..votes)
        .map(|_| {
            let (a, b) = pair(&mut rng, strengths.len());
            let u = rng.random::<f64>();
            let outcome = if u < tie_share / 2.0 {
                Outcome::Tie
            } else if u < tie_share {
                Outcome::BothBad
            } else if rng.random::<f64>() < logistic(strengths[a] - strengths[b]) {
                Outcome::AWins
            } else {
                Outcome::BWins
            };
            let a_len = Some(rng.random_range(50.0..800.0));
            let b_len = Some(rng.random_range(50.0..800.0));
            Vote {
                a,
                b,
                outcome,
                a_len,
                b_len,
            }
        })
        .collect()
}

/// `n` contenders of equal strength whose voters favour the longer answer: `P(a wins) = σ(beta ·
/// (a_len - b_len)/(a_len + b_len))`. Contender `verbose` writes 600–1000 characters, the rest
/// 200–600, so length and identity are correlated but not collinear.
pub(super) fn length_biased(
    n: usize,
    verbose: usize,
    beta: f64,
    votes: usize,
    seed: u64,
) -> Vec<Vote> {
    let mut rng = StdRng::seed_from_u64(seed);
    let length = |k: usize, rng: &mut StdRng| {
        if k == verbose {
            rng.random_range(600.0..1000.0)
        } else {
            rng.random_range(200.0..600.0)
        }
    };
    (0..votes)
        .map(|_| {
            let (a, b) = pair(&mut rng, n);
            let (la, lb) = (length(a, &mut rng), length(b, &mut rng));
            let a_wins = rng.random::<f64>() < logistic(beta * (la - lb) / (la + lb));
            let outcome = if a_wins {
                Outcome::AWins
            } else {
                Outcome::BWins
            };
            Vote {
                a,
                b,
                outcome,
                a_len: Some(la),
                b_len: Some(lb),
            }
        })
        .collect()
}
