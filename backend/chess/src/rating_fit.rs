//! Ratings of a pool of players from all their games at once: Bradley–Terry (the logistic Elo
//! model) by maximum likelihood, some ratings fixed, with each free rating's 95% interval from
//! its profile likelihood. The yardstick's ladder ([`crate::rating`]) is rated with it.

use crate::rating::{EloEstimate, bisect};

/// Games between players `a` and `b` of a pool, and what `a` scored in them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Pairing {
    pub a: usize,
    pub b: usize,
    pub games: usize,
    /// `a`'s wins plus half the draws.
    pub points: f64,
}

impl Pairing {
    pub fn new(a: usize, b: usize, games: usize, points: f64) -> Self {
        Self {
            a,
            b,
            games,
            points,
        }
    }
}

/// Input [`fit`] refuses.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum FitError {
    #[error("no player's rating is fixed, so no rating means anything")]
    NoAnchor,
    #[error("player {0} is not one of the {1} players")]
    UnknownPlayer(usize, usize),
    #[error("player {0} is paired with itself")]
    SelfPairing(usize),
    #[error("{points} points in {games} games")]
    ImpossibleScore { points: f64, games: usize },
    #[error("a fixed rating of {0}")]
    BadAnchor(f64),
}

/// Elo points per natural unit of the logistic: E(d) = 1 / (1 + e^(−d·SCALE)).
const SCALE: f64 = std::f64::consts::LN_10 / 400.0;
/// Pseudo-points each way per pairing: the maximum then always exists (a player who lost every
/// game sits thousands of points down instead of at −∞), while shifting any likelihood by under
/// 10⁻⁴, so intervals move by hundredths of a point. Which sides are really open is decided
/// from the results themselves ([`reaches`]).
const PSEUDO: f64 = 1e-6;
/// Half the 95% point of χ² with one degree of freedom.
const HALF_CHI2_95: f64 = 1.92;

/// Bradley–Terry (Elo) maximum likelihood over a pool of `players`: `fixed` pins some ratings
/// (the anchors), the rest are fitted jointly from all `pairings`. Each free player's 95%
/// interval is its profile likelihood's (every other free rating re-fitted at each trial value),
/// so the uncertainty of the players linking it to an anchor widens it. A side is open (`None`)
/// when the results cannot bound it: no chain of games with points leads from the player to an
/// anchor (it may be arbitrarily weak) or from an anchor to it (arbitrarily strong); the point
/// is then `None` too. Fixed players get their rating as point and both ends.
pub fn fit(
    players: usize,
    fixed: &[(usize, f64)],
    pairings: &[Pairing],
) -> Result<Vec<EloEstimate>, FitError> {
    if fixed.is_empty() {
        return Err(FitError::NoAnchor);
    }
    let mut pinned = vec![None; players];
    for &(i, r) in fixed {
        *pinned
            .get_mut(i)
            .ok_or(FitError::UnknownPlayer(i, players))? = Some(r);
        if !r.is_finite() {
            return Err(FitError::BadAnchor(r));
        }
    }
    let mut pairs = Vec::new();
    for p in pairings {
        for i in [p.a, p.b] {
            if i >= players {
                return Err(FitError::UnknownPlayer(i, players));
            }
        }
        if p.a == p.b {
            return Err(FitError::SelfPairing(p.a));
        }
        if !(0.0..=p.games as f64).contains(&p.points) {
            return Err(FitError::ImpossibleScore {
                points: p.points,
                games: p.games,
            });
        }
        if p.games > 0 {
            pairs.push(*p);
        }
    }
    let anchors: Vec<usize> = fixed.iter().map(|f| f.0).collect();
    // Players linked to no anchor by any games have no rating to find.
    let linked = |i: usize| reaches(players, &pairs, &[i], &anchors, |_, _| true);
    let problem = Problem {
        pairs: pairs.clone(),
        pinned,
    };
    let mut best = problem.start(players);
    for (i, r) in best.iter_mut().enumerate() {
        if problem.pinned[i].is_none() && !linked(i) {
            *r = f64::NAN;
        }
    }
    let top = problem.maximise(&mut best, None);
    let mut estimates = Vec::with_capacity(players);
    for i in 0..players {
        let estimate = match problem.pinned[i] {
            Some(r) => EloEstimate {
                point: Some(r),
                low: Some(r),
                high: Some(r),
            },
            None if best[i].is_nan() => EloEstimate::UNKNOWN,
            None => {
                // Down an edge a → b when a scored against b: a reaches an anchor below it.
                let scored = |a: usize, p: &Pairing| {
                    if a == p.a {
                        p.points > 0.0
                    } else {
                        p.points < p.games as f64
                    }
                };
                let bounded_below = reaches(players, &pairs, &[i], &anchors, scored);
                let bounded_above = reaches(players, &pairs, &anchors, &[i], scored);
                let end = |outward: f64| problem.interval_end(&best, i, top, outward);
                let (low, high) = (
                    bounded_below.then(|| end(-1.0)).flatten(),
                    bounded_above.then(|| end(1.0)).flatten(),
                );
                EloEstimate {
                    point: (low.is_some() && high.is_some()).then_some(best[i]),
                    low,
                    high,
                }
            }
        };
        estimates.push(estimate);
    }
    Ok(estimates)
}

/// Whether a walk from `from` reaches any of `to`, stepping from a player to an opponent of a
/// pairing when `step(player, pairing)` allows.
fn reaches(
    players: usize,
    pairs: &[Pairing],
    from: &[usize],
    to: &[usize],
    step: impl Fn(usize, &Pairing) -> bool,
) -> bool {
    let mut seen = vec![false; players];
    let mut stack = from.to_vec();
    while let Some(x) = stack.pop() {
        if to.contains(&x) {
            return true;
        }
        if std::mem::replace(&mut seen[x], true) {
            continue;
        }
        for p in pairs {
            let other = if p.a == x {
                p.b
            } else if p.b == x {
                p.a
            } else {
                continue;
            };
            if step(x, p) && !seen[other] {
                stack.push(other);
            }
        }
    }
    false
}

struct Problem {
    pairs: Vec<Pairing>,
    pinned: Vec<Option<f64>>,
}

impl Problem {
    /// Anchors at their ratings, everyone else at the anchors' mean.
    fn start(&self, players: usize) -> Vec<f64> {
        let anchored: Vec<f64> = self.pinned.iter().flatten().copied().collect();
        let mean = anchored.iter().sum::<f64>() / anchored.len().max(1) as f64;
        (0..players)
            .map(|i| self.pinned[i].unwrap_or(mean))
            .collect()
    }

    /// The regularised log-likelihood; players at NaN (unlinked) and their games are left out.
    fn log_likelihood(&self, r: &[f64]) -> f64 {
        self.terms(r)
            .map(|(n, p, e)| p * e.ln() + (n - p) * (1.0 - e).ln())
            .sum()
    }

    /// Per pairing with both ratings known: games and points with the pseudo-points, and a's
    /// expected score.
    fn terms<'a>(&'a self, r: &'a [f64]) -> impl Iterator<Item = (f64, f64, f64)> + 'a {
        self.pairs
            .iter()
            .filter(move |p| !r[p.a].is_nan() && !r[p.b].is_nan())
            .map(move |p| {
                let e = logistic(r[p.a] - r[p.b]);
                (p.games as f64 + 2.0 * PSEUDO, p.points + PSEUDO, e)
            })
    }

    /// Maximises over the free players (all but anchors, `held`, and the unlinked) from `r` by
    /// damped Newton steps (the log-likelihood is concave); returns the maximum.
    fn maximise(&self, r: &mut [f64], held: Option<usize>) -> f64 {
        let free: Vec<usize> = (0..r.len())
            .filter(|&i| self.pinned[i].is_none() && Some(i) != held && !r[i].is_nan())
            .collect();
        let slot = |i: usize| free.iter().position(|&f| f == i);
        let mut value = self.log_likelihood(r);
        for _ in 0..500 {
            let k = free.len();
            let (mut gradient, mut hessian) = (vec![0.0; k], vec![vec![0.0; k]; k]);
            for p in self
                .pairs
                .iter()
                .filter(|p| !r[p.a].is_nan() && !r[p.b].is_nan())
            {
                let (n, pts) = (p.games as f64 + 2.0 * PSEUDO, p.points + PSEUDO);
                let e = logistic(r[p.a] - r[p.b]);
                let (g, w) = (SCALE * (pts - n * e), SCALE * SCALE * n * e * (1.0 - e));
                let (sa, sb) = (slot(p.a), slot(p.b));
                for (s, sign) in [(sa, 1.0), (sb, -1.0)] {
                    if let Some(s) = s {
                        gradient[s] += sign * g;
                        hessian[s][s] += w;
                    }
                }
                if let (Some(x), Some(y)) = (sa, sb) {
                    hessian[x][y] -= w;
                    hessian[y][x] -= w;
                }
            }
            // The Newton step solves (−∇²ℓ)·δ = ∇ℓ; stop when it promises almost nothing.
            let Some(step) = solve_positive(hessian, &gradient) else {
                break;
            };
            let promised: f64 = step.iter().zip(&gradient).map(|(s, g)| s * g).sum();
            if promised < 1e-12 {
                break;
            }
            let mut t = 1.0;
            let mut trial = r.to_vec();
            loop {
                for (s, &i) in free.iter().enumerate() {
                    trial[i] = r[i] + t * step[s];
                }
                let v = self.log_likelihood(&trial);
                if v >= value + 1e-4 * t * promised || t < 1e-9 {
                    break;
                }
                t /= 2.0;
            }
            r.copy_from_slice(&trial);
            value = self.log_likelihood(r);
        }
        value
    }

    /// The profile likelihood of player `i` at `rating`: the others re-fitted from `best`.
    fn profile(&self, best: &[f64], i: usize, rating: f64) -> f64 {
        let mut r = best.to_vec();
        r[i] = rating;
        self.maximise(&mut r, Some(i))
    }

    /// Where the profile of `i` falls [`HALF_CHI2_95`] below the maximum `top`, walking away
    /// from the best rating downward (`outward` −1) or upward (+1); `None` if it never does
    /// within reach.
    fn interval_end(&self, best: &[f64], i: usize, top: f64, outward: f64) -> Option<f64> {
        let inside = |rating: f64| self.profile(best, i, rating) - (top - HALF_CHI2_95);
        let mut reach = 50.0;
        while inside(best[i] + outward * reach) >= 0.0 {
            reach *= 2.0;
            if reach > 1e5 {
                return None;
            }
        }
        let far = best[i] + outward * reach;
        let (lo, hi) = if outward < 0.0 {
            (far, best[i])
        } else {
            (best[i], far)
        };
        Some(if outward < 0.0 {
            bisect(lo, hi, inside)
        } else {
            bisect(lo, hi, |r| -inside(r))
        })
    }
}

/// The expected score at a rating difference `d`.
fn logistic(d: f64) -> f64 {
    1.0 / (1.0 + (-SCALE * d).exp())
}

/// Solves `m·x = b` for a symmetric positive definite `m` by Cholesky; `None` when it is not.
fn solve_positive(mut m: Vec<Vec<f64>>, b: &[f64]) -> Option<Vec<f64>> {
    let k = b.len();
    for j in 0..k {
        for i in j..k {
            let s = m[i][j] - (0..j).map(|l| m[i][l] * m[j][l]).sum::<f64>();
            if i == j {
                if s <= 0.0 || !s.is_finite() {
                    return None;
                }
                m[j][j] = s.sqrt();
            } else {
                m[i][j] = s / m[j][j];
            }
        }
    }
    let mut y = vec![0.0; k];
    for i in 0..k {
        y[i] = (b[i] - (0..i).map(|l| m[i][l] * y[l]).sum::<f64>()) / m[i][i];
    }
    for i in (0..k).rev() {
        y[i] = (y[i] - (i + 1..k).map(|l| m[l][i] * y[l]).sum::<f64>()) / m[i][i];
    }
    Some(y)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rating::{MatchResult, estimate};

    fn close(got: Option<f64>, want: f64, within: f64) {
        let got = got.expect("a value");
        assert!(
            (got - want).abs() < within,
            "{got} is not {want} ± {within}"
        );
    }

    #[test]
    fn one_free_player_against_anchors_is_the_single_pool_estimate() {
        // 30 of 40 against a fixed 1400: 1400 + 400·log10(3) = 1590.85, as `estimate` says.
        let fitted = fit(2, &[(0, 1400.0)], &[Pairing::new(1, 0, 40, 30.0)]).unwrap();
        let single = estimate(&[MatchResult {
            opponent: 1400.0,
            games: 40,
            points: 30.0,
        }]);
        close(fitted[1].point, 1590.85, 0.01);
        close(fitted[1].low, single.low.unwrap(), 0.01);
        close(fitted[1].high, single.high.unwrap(), 0.01);
        assert_eq!(fitted[0].shown(), "1400 (95% 1400–1400)");
        // Two anchors, 6.4 of 10 against 1400 and 3.6 of 10 against 1600: 1500 by symmetry.
        let two = fit(
            3,
            &[(0, 1400.0), (1, 1600.0)],
            &[Pairing::new(2, 0, 10, 6.4), Pairing::new(1, 2, 10, 6.4)],
        )
        .unwrap();
        close(two[2].point, 1500.0, 1e-3);
    }

    #[test]
    fn a_chain_adds_up_and_its_links_widen_the_interval() {
        // A (fixed 1350) scores 30 of 40 against B, and B 30 of 40 against C. In a chain each
        // link's difference is fitted from its own games: 400·log10(3) = 190.85 each, so
        // B = 1159.15 and C = 968.30.
        let chain = fit(
            3,
            &[(0, 1350.0)],
            &[Pairing::new(0, 1, 40, 30.0), Pairing::new(1, 2, 40, 30.0)],
        )
        .unwrap();
        close(chain[1].point, 1159.15, 0.01);
        close(chain[2].point, 968.30, 0.01);
        // Even scores, 10 of 20 on each link: C = A. One link alone bounds B at ±h₁ where
        // 10·ln(4E(1−E)) = −1.92: E(1−E) = 0.25·e^−0.192 = 0.206327, E = 0.708981,
        // h₁ = 400·log10(E/(1−E)) = 154.69. C's profile at A + t is best with the two links
        // equal, twice one link's at t/2, so its ends solve 10·ln(4E(1−E)) = −0.96:
        // E(1−E) = 0.25·e^−0.096 = 0.227116, E = 0.651274, t/2 = 108.51, t = 217.02.
        let even = fit(
            3,
            &[(0, 1350.0)],
            &[Pairing::new(0, 1, 20, 10.0), Pairing::new(1, 2, 20, 10.0)],
        )
        .unwrap();
        close(even[1].point, 1350.0, 1e-3);
        close(even[1].high, 1350.0 + 154.69, 0.05);
        close(even[1].low, 1350.0 - 154.69, 0.05);
        close(even[2].point, 1350.0, 1e-3);
        close(even[2].high, 1350.0 + 217.02, 0.05);
        close(even[2].low, 1350.0 - 217.02, 0.05);
    }

    #[test]
    fn a_player_who_lost_everything_is_bounded_above_only() {
        // D lost 10 of 10 to B; B scored 10 of 20 against A (fixed 1350). Were B fixed at
        // 1350, D's bound would be `estimate`'s: E(h) = 1 − e^−0.192 = 0.174693, so h = 1350 −
        // 400·log10(0.825307/0.174693) = 1350 − 269.74 = 1080.26. With B fitted, the bound
        // solves max over B of [ℓ_AB(B) + 10·ln(1 − E(h − B))] = ℓ_AB(1350) − 1.92; a
        // golden-section search over B inside a bisection over h gives 1108.85: higher, as B
        // may be stronger, and less than B's own upper end (+154.69) higher.
        let fitted = fit(
            3,
            &[(0, 1350.0)],
            &[Pairing::new(1, 0, 20, 10.0), Pairing::new(2, 1, 10, 0.0)],
        )
        .unwrap();
        assert_eq!((fitted[2].point, fitted[2].low), (None, None));
        close(fitted[2].high, 1108.85, 0.05);
        assert!(
            fitted[2].shown().starts_with("below 1109"),
            "{:?}",
            fitted[2]
        );
        close(fitted[1].point, 1350.0, 1e-3);
    }

    #[test]
    fn open_sides_follow_who_scored_against_whom() {
        // B won every game against the anchor, C drew B: both may be arbitrarily strong, and
        // both are bounded below (B by `estimate`'s all-won bound, 1350 + 269.74).
        let fitted = fit(
            3,
            &[(0, 1350.0)],
            &[Pairing::new(1, 0, 10, 10.0), Pairing::new(2, 1, 4, 2.0)],
        )
        .unwrap();
        for player in &fitted[1..] {
            assert_eq!((player.point, player.high), (None, None), "{player:?}");
        }
        close(fitted[1].low, 1619.74, 0.05);
        assert!(fitted[2].low.unwrap() < fitted[1].low.unwrap());
        // A and C both beat B every time: C's games say nothing of where it stands.
        let unbounded = fit(
            3,
            &[(0, 1350.0)],
            &[Pairing::new(0, 1, 3, 3.0), Pairing::new(2, 1, 3, 3.0)],
        )
        .unwrap();
        assert_eq!(unbounded[2], EloEstimate::UNKNOWN);
        assert_eq!(unbounded[1].point, None);
        assert!(unbounded[1].high.is_some());
        // No games at all link D to the anchor.
        let apart = fit(4, &[(0, 1350.0)], &[Pairing::new(0, 1, 2, 1.0)]).unwrap();
        assert_eq!(apart[3], EloEstimate::UNKNOWN);
    }

    #[test]
    fn impossible_input_is_refused() {
        let one = [Pairing::new(0, 1, 2, 1.0)];
        assert_eq!(fit(2, &[], &one), Err(FitError::NoAnchor));
        assert_eq!(
            fit(2, &[(5, 1350.0)], &one),
            Err(FitError::UnknownPlayer(5, 2))
        );
        assert_eq!(
            fit(2, &[(0, f64::NAN)], &one).map_err(|e| e.to_string()),
            Err("a fixed rating of NaN".into())
        );
        assert_eq!(
            fit(2, &[(0, 1350.0)], &[Pairing::new(0, 2, 2, 1.0)]),
            Err(FitError::UnknownPlayer(2, 2))
        );
        assert_eq!(
            fit(2, &[(0, 1350.0)], &[Pairing::new(1, 1, 2, 1.0)]),
            Err(FitError::SelfPairing(1))
        );
        assert_eq!(
            fit(2, &[(0, 1350.0)], &[Pairing::new(0, 1, 2, 2.5)]),
            Err(FitError::ImpossibleScore {
                points: 2.5,
                games: 2
            })
        );
    }
}
