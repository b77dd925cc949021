//! Uncertainty around the ratings and what follows from it: bootstrap confidence intervals, rank
//! ranges, the leaderboard, observed win rates and vote counts, and which pair to ask about next.
//! Pure: no I/O; every random choice comes from a caller-seeded RNG, so results are reproducible.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};

use super::ratings::{FitOptions, RatingError, Ratings, Vote, fit_validated, to_elo, validate};

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct BootstrapOptions {
    /// Resampled fits. 200 puts the 2.5th/97.5th percentiles on a handful of samples each, enough
    /// for a leaderboard; more rounds narrow the Monte-Carlo noise in the bounds, not the intervals.
    pub rounds: usize,
    /// Coverage of the interval, e.g. 0.95 for the 2.5th to 97.5th percentile.
    pub confidence: f64,
    pub seed: u64,
}

impl Default for BootstrapOptions {
    fn default() -> Self {
        BootstrapOptions {
            rounds: 200,
            confidence: 0.95,
            seed: 0,
        }
    }
}

/// A closed interval on the Elo-like rating scale.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Interval {
    pub lower: f64,
    pub upper: f64,
}

impl Interval {
    pub fn width(&self) -> f64 {
        self.upper - self.lower
    }
}

/// The point fit with its percentile-bootstrap intervals.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RatedContenders {
    pub ratings: Ratings,
    /// Per contender, on the Elo-like scale.
    pub intervals: Vec<Interval>,
    /// The style coefficient's interval in log-odds units; `None` without style control.
    pub style_interval: Option<Interval>,
}

/// Fits the votes, then refits `rounds` resamples (votes drawn with replacement, as many as there
/// are) and takes percentile intervals of each contender's rating across the refits.
pub fn bootstrap(
    n_contenders: usize,
    votes: &[Vote],
    fit: FitOptions,
    options: BootstrapOptions,
) -> Result<RatedContenders, RatingError> {
    validate(n_contenders, votes, &fit)?;
    let ratings = fit_validated(n_contenders, votes, &fit)?;
    let mut rng = StdRng::seed_from_u64(options.seed);
    let mut samples: Vec<Vec<f64>> = vec![Vec::with_capacity(options.rounds); n_contenders];
    let mut style_samples = Vec::with_capacity(options.rounds);
    let mut resample = Vec::with_capacity(votes.len());
    for _ in 0..options.rounds {
        resample.clear();
        resample.extend((0..votes.len()).map(|_| votes[rng.random_range(0..votes.len())]));
        let r = fit_validated(n_contenders, &resample, &fit)?;
        for (column, elo) in samples.iter_mut().zip(r.elo()) {
            column.push(elo);
        }
        style_samples.extend(r.style_coefficient);
    }
    let alpha = (1.0 - options.confidence).clamp(0.0, 1.0);
    let interval_of = |xs: &mut Vec<f64>, point: f64| {
        if xs.is_empty() {
            // No resampling asked for: a degenerate interval at the point estimate.
            return Interval {
                lower: point,
                upper: point,
            };
        }
        xs.sort_by(f64::total_cmp);
        Interval {
            lower: percentile(xs, alpha / 2.0),
            upper: percentile(xs, 1.0 - alpha / 2.0),
        }
    };
    let intervals = samples
        .iter_mut()
        .zip(ratings.elo())
        .map(|(xs, point)| interval_of(xs, point))
        .collect();
    let style_interval = ratings
        .style_coefficient
        .map(|b| interval_of(&mut style_samples, b));
    Ok(RatedContenders {
        ratings,
        intervals,
        style_interval,
    })
}

/// The `q`-quantile of sorted values, interpolating linearly between order statistics (the usual
/// "type 7" definition).
fn percentile(sorted: &[f64], q: f64) -> f64 {
    let pos = q * (sorted.len() - 1) as f64;
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo as f64)
}

/// Each contender's plausible ranks `(best, worst)`, 1 being first. Best: one plus the contenders
/// whose lower bound is above this one's upper bound (they are surely ahead). Worst: the contenders
/// whose upper bound is not below this one's lower bound, itself included (all that may be ahead or
/// level). A single rank is claimed only when the intervals separate the contender from all others.
pub fn rank_ranges(intervals: &[Interval]) -> Vec<(usize, usize)> {
    intervals
        .iter()
        .map(|me| {
            let best = 1 + intervals.iter().filter(|o| o.lower > me.upper).count();
            let worst = intervals.iter().filter(|o| o.upper >= me.lower).count();
            (best, worst)
        })
        .collect()
}

/// Votes between each pair, symmetric, zero on the diagonal.
pub fn pair_counts(n_contenders: usize, votes: &[Vote]) -> Vec<Vec<usize>> {
    let mut counts = vec![vec![0; n_contenders]; n_contenders];
    for v in votes
        .iter()
        .filter(|v| v.a < n_contenders && v.b < n_contenders && v.a != v.b)
    {
        counts[v.a][v.b] += 1;
        counts[v.b][v.a] += 1;
    }
    counts
}

/// Votes each contender took part in.
pub fn vote_counts(n_contenders: usize, votes: &[Vote]) -> Vec<usize> {
    pair_counts(n_contenders, votes)
        .iter()
        .map(|row| row.iter().sum())
        .collect()
}

/// `m[i][j]`: the share of i's votes against j that i won, a tie or both-bad counting half; `None`
/// where the two never met. Observed, not modelled: it is what the raw votes say.
pub fn win_rate_matrix(n_contenders: usize, votes: &[Vote]) -> Vec<Vec<Option<f64>>> {
    let counts = pair_counts(n_contenders, votes);
    let mut score = vec![vec![0.0; n_contenders]; n_contenders];
    for v in votes
        .iter()
        .filter(|v| v.a < n_contenders && v.b < n_contenders && v.a != v.b)
    {
        let s = v.outcome.score_a();
        score[v.a][v.b] += s;
        score[v.b][v.a] += 1.0 - s;
    }
    (0..n_contenders)
        .map(|i| {
            (0..n_contenders)
                .map(|j| (counts[i][j] > 0).then(|| score[i][j] / counts[i][j] as f64))
                .collect()
        })
        .collect()
}

/// One leaderboard line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LeaderboardRow {
    pub contender: usize,
    pub rating: f64,
    pub interval: Interval,
    /// Plausible ranks, best first; equal when the rank is settled.
    pub rank_best: usize,
    pub rank_worst: usize,
    pub votes: usize,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Leaderboard {
    /// Highest rating first.
    pub rows: Vec<LeaderboardRow>,
    pub style_coefficient: Option<f64>,
    pub style_interval: Option<Interval>,
    /// Indexed by contender (not by leaderboard position).
    pub win_rates: Vec<Vec<Option<f64>>>,
}

/// The whole leaderboard from the votes: ratings, intervals, rank ranges, counts and win rates.
pub fn leaderboard(
    n_contenders: usize,
    votes: &[Vote],
    fit: FitOptions,
    options: BootstrapOptions,
) -> Result<Leaderboard, RatingError> {
    let rated = bootstrap(n_contenders, votes, fit, options)?;
    let ranks = rank_ranges(&rated.intervals);
    let counts = vote_counts(n_contenders, votes);
    let mut rows: Vec<LeaderboardRow> = (0..n_contenders)
        .map(|i| LeaderboardRow {
            contender: i,
            rating: to_elo(rated.ratings.coefficients[i]),
            interval: rated.intervals[i],
            rank_best: ranks[i].0,
            rank_worst: ranks[i].1,
            votes: counts[i],
        })
        .collect();
    rows.sort_by(|x, y| {
        y.rating
            .total_cmp(&x.rating)
            .then(x.contender.cmp(&y.contender))
    });
    Ok(Leaderboard {
        rows,
        style_coefficient: rated.ratings.style_coefficient,
        style_interval: rated.style_interval,
        win_rates: win_rate_matrix(n_contenders, votes),
    })
}

/// A floor on every pair's weight so settled pairs are still asked about now and then: the
/// intervals are themselves estimates, and a pair they call settled may not be.
const EXPLORATION: f64 = 0.05;

/// How much [`next_pair`] wants a vote on `(i, j)`: `(overlap + EXPLORATION) / (1 + votes_ij)`.
/// `overlap` is the length of the two intervals' intersection over the narrower one's width: 1 when
/// one interval lies inside the other (order wholly uncertain), 0 when they are disjoint (settled).
/// A contender with no votes at all counts as fully overlapping anything: nothing is known of it.
/// Dividing by one plus the pair's votes spreads the votes instead of spending them all on the
/// single most uncertain pair.
pub fn pair_weight(intervals: &[Interval], pair_counts: &[Vec<usize>], i: usize, j: usize) -> f64 {
    let unrated = |k: usize| pair_counts[k].iter().all(|&c| c == 0);
    let (a, b) = (intervals[i], intervals[j]);
    let overlap = if unrated(i) || unrated(j) {
        1.0
    } else {
        let shared = a.upper.min(b.upper) - a.lower.max(b.lower);
        let narrower = a.width().min(b.width());
        if shared < 0.0 {
            0.0
        } else if narrower > 0.0 {
            (shared / narrower).min(1.0)
        } else {
            // A point interval inside (or touching) the other: its order is not settled.
            1.0
        }
    };
    (overlap + EXPLORATION) / (1 + pair_counts[i][j]) as f64
}

/// The pair to ask the next voter about, drawn with probability proportional to [`pair_weight`]:
/// pairs whose order is uncertain and which have few votes are favoured, every pair keeps a small
/// chance. Deterministic for a given RNG state. `None` with fewer than two contenders. Returns
/// `(i, j)` with `i < j`; which side is shown as "A" is the caller's choice (randomise it, to
/// cancel position bias).
pub fn next_pair(
    intervals: &[Interval],
    pair_counts: &[Vec<usize>],
    rng: &mut impl Rng,
) -> Option<(usize, usize)> {
    let n = intervals.len();
    let pairs: Vec<((usize, usize), f64)> = (0..n)
        .flat_map(|i| (i + 1..n).map(move |j| (i, j)))
        .map(|(i, j)| ((i, j), pair_weight(intervals, pair_counts, i, j)))
        .collect();
    let total: f64 = pairs.iter().map(|(_, w)| w).sum();
    let mut target = rng.random::<f64>() * total;
    for &(pair, w) in &pairs {
        if target < w {
            return Some(pair);
        }
        target -= w;
    }
    // Rounding left the target past the end: the last pair is the one it fell in.
    pairs.last().map(|&(pair, _)| pair)
}

/// Kendall's rank correlation (tau-a) between two scorings of the same items: +1 when every pair
/// is ordered alike, -1 when every pair is reversed; a pair tied in either counts as neither.
pub fn kendall_tau(x: &[f64], y: &[f64]) -> f64 {
    let n = x.len().min(y.len());
    if n < 2 {
        return 0.0;
    }
    let mut score = 0.0;
    for i in 0..n {
        for j in i + 1..n {
            let product = (x[i] - x[j]) * (y[i] - y[j]);
            score += if product > 0.0 {
                1.0
            } else if product < 0.0 {
                -1.0
            } else {
                0.0
            };
        }
    }
    score / (n * (n - 1) / 2) as f64
}
