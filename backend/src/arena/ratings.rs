//! Bradley–Terry ratings by maximum likelihood, with optional style control. Pure: no I/O.
//!
//! The model: contender `i` has a strength `θ_i` (natural log-odds units) and, with style control,
//! a shared coefficient `β` on the normalised length difference `s = (len_a - len_b)/(len_a +
//! len_b)`. Then `P(a beats b) = σ(θ_a - θ_b + β s)`. That is a logistic regression without an
//! intercept whose design row has `+1` in column `a`, `-1` in column `b` and `s` in the style
//! column; the fit below maximises its likelihood by Newton's method.
//!
//! Ties count as half a win each way (the score of the vote is 0.5, which is the same likelihood as
//! two rows of weight 0.5 with outcomes 1 and 0). "Both bad" is scored as a tie too: it says the
//! voter could not separate the two answers, which is all a tie says about their relative order.
//!
//! Reported ratings are on the Elo-like scale arena leaderboards use: `ELO_OFFSET + ELO_PER_UNIT ·
//! θ`, with `ELO_PER_UNIT = 400 / ln 10`, so a gap of 400 points means odds of 10:1.

use serde::{Deserialize, Serialize};

/// Rating points per natural log-odds unit: 400 points is a factor of 10 in the odds.
pub const ELO_PER_UNIT: f64 = 400.0 / std::f64::consts::LN_10;
/// The rating of an average contender (strengths are anchored to sum to zero).
pub const ELO_OFFSET: f64 = 1000.0;

/// The default L2 penalty on the coefficients, in units of the summed (not averaged) negative
/// log-likelihood: `λ/2 · |θ|²` with `λ = 1e-6`. Without it the maximum likelihood does not exist
/// when a contender is unbeaten (its strength runs to +∞) or when the comparison graph is
/// disconnected (the components' relative offsets are unidentified). At 1e-6 it moves
/// well-determined strength differences by far less than their sampling error (about λ·θ/curvature,
/// i.e. ~1e-6 of a unit for a contender with a handful of votes), while keeping an unbeaten
/// contender finite (its strength settles near ln(wins/λ), large but finite) and pinning otherwise
/// unidentified offsets at zero.
pub const DEFAULT_L2: f64 = 1e-6;

/// How one comparison ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    AWins,
    BWins,
    Tie,
    /// Both answers were bad. Scored as a tie: the voter did not prefer either.
    BothBad,
}

impl Outcome {
    /// The score of contender `a` in this vote: 1, 0, or one half for a tie or both-bad.
    pub fn score_a(self) -> f64 {
        match self {
            Outcome::AWins => 1.0,
            Outcome::BWins => 0.0,
            Outcome::Tie | Outcome::BothBad => 0.5,
        }
    }
}

/// One vote between contenders `a` and `b` (indices into the contender list), with the lengths of
/// their answers when known (needed only for style control).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Vote {
    pub a: usize,
    pub b: usize,
    pub outcome: Outcome,
    pub a_len: Option<f64>,
    pub b_len: Option<f64>,
}

impl Vote {
    /// A vote without answer lengths.
    pub fn new(a: usize, b: usize, outcome: Outcome) -> Self {
        Vote {
            a,
            b,
            outcome,
            a_len: None,
            b_len: None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct FitOptions {
    /// Add the normalised length difference as a covariate; every vote then needs both lengths.
    pub style_control: bool,
    /// L2 penalty (see [`DEFAULT_L2`]); must be positive and finite.
    pub l2: f64,
    /// Newton iterations before giving up. A separated data set needs about ln(votes/λ) of them.
    pub max_iterations: usize,
}

impl Default for FitOptions {
    fn default() -> Self {
        FitOptions {
            style_control: false,
            l2: DEFAULT_L2,
            max_iterations: 200,
        }
    }
}

/// A fitted model. `coefficients` are the contenders' strengths in natural log-odds units, anchored
/// to sum to zero; with style control they are the strengths with answer length held fixed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Ratings {
    pub coefficients: Vec<f64>,
    /// Log-odds per unit of normalised length difference; `None` without style control. Positive
    /// means voters favour the longer answer.
    pub style_coefficient: Option<f64>,
    /// Newton iterations the fit took.
    pub iterations: usize,
}

impl Ratings {
    /// The ratings on the Elo-like scale: `1000 + 400/ln10 · θ`.
    pub fn elo(&self) -> Vec<f64> {
        self.coefficients.iter().map(|&t| to_elo(t)).collect()
    }

    /// The modelled probability that `i` beats `j` (answers of equal length).
    pub fn win_probability(&self, i: usize, j: usize) -> f64 {
        sigmoid(self.coefficients[i] - self.coefficients[j])
    }
}

/// A strength in log-odds units on the Elo-like scale.
pub fn to_elo(theta: f64) -> f64 {
    ELO_OFFSET + ELO_PER_UNIT * theta
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RatingError {
    #[error("no votes to rate")]
    NoVotes,
    #[error("vote {vote} names contender {index}, but there are only {contenders}")]
    ContenderOutOfRange {
        vote: usize,
        index: usize,
        contenders: usize,
    },
    #[error("vote {vote} compares contender {index} with itself")]
    SelfComparison { vote: usize, index: usize },
    #[error("vote {vote} has an answer length that is not a finite non-negative number")]
    InvalidLength { vote: usize },
    #[error("vote {vote} lacks an answer length, which style control needs")]
    MissingLength { vote: usize },
    #[error("the L2 penalty must be positive and finite, not {0}")]
    InvalidPenalty(f64),
    #[error("the fit did not converge in {0} Newton iterations")]
    NotConverged(usize),
}

/// Checks the votes against the contender count and the options; every fit does this first.
pub fn validate(
    n_contenders: usize,
    votes: &[Vote],
    options: &FitOptions,
) -> Result<(), RatingError> {
    if !(options.l2 > 0.0 && options.l2.is_finite()) {
        return Err(RatingError::InvalidPenalty(options.l2));
    }
    if votes.is_empty() {
        return Err(RatingError::NoVotes);
    }
    for (k, v) in votes.iter().enumerate() {
        for index in [v.a, v.b] {
            if index >= n_contenders {
                return Err(RatingError::ContenderOutOfRange {
                    vote: k,
                    index,
                    contenders: n_contenders,
                });
            }
        }
        if v.a == v.b {
            return Err(RatingError::SelfComparison {
                vote: k,
                index: v.a,
            });
        }
        // Lengths are checked whenever given, so bad data surfaces even with style control off.
        for len in [v.a_len, v.b_len].into_iter().flatten() {
            if !(len.is_finite() && len >= 0.0) {
                return Err(RatingError::InvalidLength { vote: k });
            }
        }
        if options.style_control && (v.a_len.is_none() || v.b_len.is_none()) {
            return Err(RatingError::MissingLength { vote: k });
        }
    }
    Ok(())
}

/// The style covariate of a vote: `(a_len - b_len)/(a_len + b_len)`, in [-1, 1]; zero when both
/// answers are empty (no length difference to explain anything).
pub fn style_covariate(vote: &Vote) -> f64 {
    let (a, b) = (vote.a_len.unwrap_or(0.0), vote.b_len.unwrap_or(0.0));
    if a + b > 0.0 { (a - b) / (a + b) } else { 0.0 }
}

/// Fits Bradley–Terry strengths to the votes by penalised maximum likelihood (see the module docs).
pub fn fit_bradley_terry(
    n_contenders: usize,
    votes: &[Vote],
    options: FitOptions,
) -> Result<Ratings, RatingError> {
    validate(n_contenders, votes, &options)?;
    fit_validated(n_contenders, votes, &options)
}

/// One row of the regression: `+1` at `i`, `-1` at `j`, `s` in the style column; target `y` (a's
/// score) with weight `w`.
#[derive(Debug, Clone, Copy)]
struct Row {
    i: usize,
    j: usize,
    s: f64,
    y: f64,
    w: f64,
}

/// The fit without validation, for callers (the bootstrap) that validated the full vote list once.
pub(crate) fn fit_validated(
    n_contenders: usize,
    votes: &[Vote],
    options: &FitOptions,
) -> Result<Ratings, RatingError> {
    let rows = if options.style_control {
        votes
            .iter()
            .map(|v| Row {
                i: v.a,
                j: v.b,
                s: style_covariate(v),
                y: v.outcome.score_a(),
                w: 1.0,
            })
            .collect()
    } else {
        aggregate(n_contenders, votes)
    };
    let dim = n_contenders + usize::from(options.style_control);
    let (mut theta, iterations) = newton(
        dim,
        n_contenders,
        &rows,
        options.style_control,
        options.l2,
        options.max_iterations,
    )?;
    let style_coefficient = options.style_control.then(|| theta[n_contenders]);
    theta.truncate(n_contenders);
    // The penalised optimum already sums to zero (every design row's contender part does); this
    // removes the last rounding so the anchor is exact.
    let mean = theta.iter().sum::<f64>() / n_contenders.max(1) as f64;
    theta.iter_mut().for_each(|t| *t -= mean);
    Ok(Ratings {
        coefficients: theta,
        style_coefficient,
        iterations,
    })
}

/// Without a style covariate, votes between the same ordered pair share a design row, so they are
/// summed into one row whose target is a's mean score: the likelihood is the same and the fit's cost
/// no longer grows with the number of votes.
fn aggregate(n: usize, votes: &[Vote]) -> Vec<Row> {
    let mut score = vec![0.0; n * n];
    let mut count = vec![0.0; n * n];
    for v in votes {
        // Orient every pair as (low, high) so both directions land in one row.
        let (i, j, s) = if v.a < v.b {
            (v.a, v.b, v.outcome.score_a())
        } else {
            (v.b, v.a, 1.0 - v.outcome.score_a())
        };
        score[i * n + j] += s;
        count[i * n + j] += 1.0;
    }
    let mut rows = Vec::new();
    for i in 0..n {
        for j in i + 1..n {
            let c = count[i * n + j];
            if c > 0.0 {
                rows.push(Row {
                    i,
                    j,
                    s: 0.0,
                    y: score[i * n + j] / c,
                    w: c,
                });
            }
        }
    }
    rows
}

fn sigmoid(z: f64) -> f64 {
    if z >= 0.0 {
        1.0 / (1.0 + (-z).exp())
    } else {
        z.exp() / (1.0 + z.exp())
    }
}

/// `ln(1 + e^z)` without overflow.
fn softplus(z: f64) -> f64 {
    if z > 0.0 {
        z + (-z).exp().ln_1p()
    } else {
        z.exp().ln_1p()
    }
}

fn linear_predictor(theta: &[f64], n: usize, style: bool, r: &Row) -> f64 {
    let z = theta[r.i] - theta[r.j];
    if style { z + theta[n] * r.s } else { z }
}

/// The penalised negative log-likelihood.
fn objective(theta: &[f64], n: usize, rows: &[Row], style: bool, l2: f64) -> f64 {
    let nll: f64 = rows
        .iter()
        .map(|r| {
            let z = linear_predictor(theta, n, style, r);
            r.w * (softplus(z) - r.y * z)
        })
        .sum();
    nll + 0.5 * l2 * theta.iter().map(|t| t * t).sum::<f64>()
}

/// Newton's method with a backtracking line search on the penalised negative log-likelihood, which
/// is strictly convex (the penalty makes the Hessian positive definite), so this converges from zero.
fn newton(
    dim: usize,
    n: usize,
    rows: &[Row],
    style: bool,
    l2: f64,
    max_iterations: usize,
) -> Result<(Vec<f64>, usize), RatingError> {
    let mut theta = vec![0.0; dim];
    let mut current = objective(&theta, n, rows, style, l2);
    for iteration in 1..=max_iterations {
        let mut grad: Vec<f64> = theta.iter().map(|t| l2 * t).collect();
        let mut hess = vec![0.0; dim * dim];
        for k in 0..dim {
            hess[k * dim + k] = l2;
        }
        for r in rows {
            let p = sigmoid(linear_predictor(&theta, n, style, r));
            let g = r.w * (p - r.y);
            let h = r.w * p * (1.0 - p);
            // The row's non-zero entries: (column, value).
            let entries = [(r.i, 1.0), (r.j, -1.0), (n, r.s)];
            let used = if style { 3 } else { 2 };
            for &(c, x) in &entries[..used] {
                grad[c] += g * x;
                for &(c2, x2) in &entries[..used] {
                    hess[c * dim + c2] += h * x * x2;
                }
            }
        }
        let step = cholesky_solve(&mut hess, &grad, dim);
        let slope: f64 = grad.iter().zip(&step).map(|(g, d)| g * d).sum();
        // Converged when the Newton step is negligible, or when half the Newton decrement (the
        // predicted gain, about the gap to the optimum) is down at the objective's own rounding
        // level (a sum over every vote). Past that point the line search cannot tell progress from
        // noise, and the strengths are already within ~1e-6 of the optimum.
        let resolution = 1e-12 * (1.0 + current.abs());
        if slope / 2.0 <= resolution || step.iter().all(|d| d.abs() < 1e-10) {
            return Ok((theta, iteration));
        }
        let mut t = 1.0;
        loop {
            let trial: Vec<f64> = theta.iter().zip(&step).map(|(th, d)| th - t * d).collect();
            let value = objective(&trial, n, rows, style, l2);
            if value <= current - 1e-4 * t * slope {
                theta = trial;
                current = value;
                break;
            }
            t *= 0.5;
            if t < 1e-12 {
                // No decrease is representable any more: the optimum is reached to rounding.
                return Ok((theta, iteration));
            }
        }
    }
    Err(RatingError::NotConverged(max_iterations))
}

/// Solves `H x = g` for a symmetric positive definite `H` (row-major, overwritten by its Cholesky
/// factor). The penalty guarantees definiteness; a non-positive pivot from rounding is clamped to
/// the penalty's order rather than producing NaN.
fn cholesky_solve(h: &mut [f64], g: &[f64], dim: usize) -> Vec<f64> {
    for j in 0..dim {
        let mut d = h[j * dim + j];
        for k in 0..j {
            d -= h[j * dim + k] * h[j * dim + k];
        }
        let d = d.max(1e-300).sqrt();
        h[j * dim + j] = d;
        for i in j + 1..dim {
            let mut s = h[i * dim + j];
            for k in 0..j {
                s -= h[i * dim + k] * h[j * dim + k];
            }
            h[i * dim + j] = s / d;
        }
    }
    let mut y = vec![0.0; dim];
    for i in 0..dim {
        let mut s = g[i];
        for k in 0..i {
            s -= h[i * dim + k] * y[k];
        }
        y[i] = s / h[i * dim + i];
    }
    let mut x = vec![0.0; dim];
    for i in (0..dim).rev() {
        let mut s = y[i];
        for k in i + 1..dim {
            s -= h[k * dim + i] * x[k];
        }
        x[i] = s / h[i * dim + i];
    }
    x
}
