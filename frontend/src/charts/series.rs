//! From the run's read models to the lines on the charts: smoothing, rates and per-environment
//! series. Pure functions, tested natively.

use std::collections::BTreeMap;

use lachesis_shared::runs::{GroupSummary, RunStatusPoint, TrainerPoint};

/// One line on a chart, in data coordinates (x sorted ascending).
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    pub label: String,
    pub color: &'static str,
    /// Overlaid runs are dashed so they never pass for the run being watched.
    pub dashed: bool,
    pub points: Vec<(f64, f64)>,
    /// A shaded envelope `(x, low, high)` drawn behind the line (the reward's min and max).
    pub band: Vec<(f64, f64, f64)>,
}

/// Points of a line, `(x, y)`, sorted by x.
pub type Points = Vec<(f64, f64)>;

/// A group's reward at `x`: the mean of its scores with their minimum and maximum.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RewardPoint {
    pub x: f64,
    pub mean: f64,
    pub min: f64,
    pub max: f64,
}

/// Ten colours that stay apart from each other (Tableau 10).
pub const PALETTE: [&str; 10] = [
    "#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7",
    "#9c755f", "#bab0ac",
];

pub fn color(index: usize) -> &'static str {
    PALETTE[index % PALETTE.len()]
}

/// Exponential moving average with TensorBoard's (and W&B's) debiasing, so the first points are
/// not dragged toward zero: `smoothing` 0 returns the values, 0.99 a very slow line. Non-finite
/// values are passed through and do not disturb the average.
pub fn ema(values: &[f64], smoothing: f64) -> Vec<f64> {
    let s = smoothing.clamp(0.0, 0.999);
    let mut last = 0.0;
    let mut weight = 0.0;
    values
        .iter()
        .map(|&v| {
            if !v.is_finite() {
                return v;
            }
            last = last * s + (1.0 - s) * v;
            weight = weight * s + (1.0 - s);
            last / weight
        })
        .collect()
}

/// Smooths the y values of a series' points, keeping the x values.
pub fn smooth_points(points: &[(f64, f64)], smoothing: f64) -> Vec<(f64, f64)> {
    let ys: Vec<f64> = points.iter().map(|p| p.1).collect();
    points
        .iter()
        .zip(ema(&ys, smoothing))
        .map(|(p, y)| (p.0, y))
        .collect()
}

/// Groups per second at each arrival, over the `window_ms` before it: the number of gaps between
/// the arrivals inside the window divided by the time they span. A lone arrival counts as one
/// group over the whole window. `at_ms` must be sorted.
pub fn groups_per_second(at_ms: &[i64], window_ms: i64) -> Vec<(i64, f64)> {
    let mut start = 0;
    at_ms
        .iter()
        .enumerate()
        .map(|(i, &t)| {
            while at_ms[start] <= t - window_ms {
                start += 1;
            }
            let count = i - start + 1;
            let span_ms = t - at_ms[start];
            let rate = if count >= 2 && span_ms > 0 {
                (count - 1) as f64 / (span_ms as f64 / 1_000.0)
            } else {
                1_000.0 / window_ms as f64
            };
            (t, rate)
        })
        .collect()
}

/// Per environment (`None`: groups sent without an env id), the reward mean with its min and max
/// at each group, x being milliseconds since `origin_ms`.
pub fn reward_by_env(
    groups: &[GroupSummary],
    origin_ms: i64,
) -> BTreeMap<Option<i64>, Vec<RewardPoint>> {
    let mut out: BTreeMap<Option<i64>, Vec<_>> = BTreeMap::new();
    for g in groups {
        if let (Some(mean), Some(min), Some(max)) = (g.mean_score(), g.min_score(), g.max_score()) {
            let x = (g.at_ms - origin_ms) as f64;
            out.entry(g.env_id)
                .or_default()
                .push(RewardPoint { x, mean, min, max });
        }
    }
    out
}

/// Per environment, the tokens of each group.
pub fn tokens_by_env(
    groups: &[GroupSummary],
    origin_ms: i64,
) -> BTreeMap<Option<i64>, Vec<(f64, f64)>> {
    let mut out: BTreeMap<Option<i64>, Vec<_>> = BTreeMap::new();
    for g in groups {
        out.entry(g.env_id)
            .or_default()
            .push(((g.at_ms - origin_ms) as f64, g.tokens as f64));
    }
    out
}

/// The arrival rate of all groups of a run, in groups per second.
pub fn rate_points(groups: &[GroupSummary], origin_ms: i64, window_ms: i64) -> Vec<(f64, f64)> {
    let times: Vec<i64> = groups.iter().map(|g| g.at_ms).collect();
    groups_per_second(&times, window_ms)
        .into_iter()
        .map(|(t, r)| ((t - origin_ms) as f64, r))
        .collect()
}

/// Queue depth and step over time.
pub fn status_points(status: &[RunStatusPoint], origin_ms: i64) -> (Points, Points) {
    status
        .iter()
        .map(|p| {
            let x = (p.at_ms - origin_ms) as f64;
            ((x, p.queue_size as f64), (x, p.step as f64))
        })
        .unzip()
}

/// The trainer's metrics by name, against the step. `loss`, `kl` and `clip_fraction` come first
/// (the order people look for them), then any other name alphabetically.
pub fn trainer_by_key(points: &[TrainerPoint]) -> Vec<(String, Vec<(f64, f64)>)> {
    let mut by_key: BTreeMap<&str, Vec<(f64, f64)>> = BTreeMap::new();
    for p in points {
        for (key, value) in &p.values {
            by_key
                .entry(key.as_str())
                .or_default()
                .push((p.step as f64, *value));
        }
    }
    let rank = |k: &str| match k {
        "loss" => 0,
        "kl" => 1,
        "clip_fraction" => 2,
        _ => 3,
    };
    let mut keyed: Vec<(String, Vec<(f64, f64)>)> = by_key
        .into_iter()
        .map(|(k, mut v)| {
            v.sort_by(|a, b| a.0.total_cmp(&b.0));
            (k.to_owned(), v)
        })
        .collect();
    keyed.sort_by(|a, b| rank(&a.0).cmp(&rank(&b.0)).then_with(|| a.0.cmp(&b.0)));
    keyed
}

#[cfg(test)]
mod tests {
    use super::*;

    fn group(id: i64, env: Option<i64>, at_ms: i64, scores: &[f64]) -> GroupSummary {
        GroupSummary {
            id,
            run: "r".into(),
            env_id: env,
            at_ms,
            weight_version: None,
            scores: scores.to_vec(),
            advantages: None,
            tokens: 10 * id,
        }
    }

    #[test]
    fn ema_is_debiased_and_zero_smoothing_is_identity() {
        let values = [1.0, 2.0, 3.0];
        assert_eq!(ema(&values, 0.0), values.to_vec());
        // Debiased: the first smoothed value equals the first value, not (1 - s) times it.
        let smoothed = ema(&[4.0, 4.0, 4.0], 0.9);
        assert!(smoothed.iter().all(|v| (v - 4.0).abs() < 1e-12));
        let s = ema(&[0.0, 10.0], 0.5);
        // last = 0.5 * 0 + 0.5 * 10 = 5; weight = 0.75 → 6.67
        assert!((s[1] - 20.0 / 3.0).abs() < 1e-12);
        // A gap passes through without poisoning what follows.
        let s = ema(&[1.0, f64::NAN, 1.0], 0.5);
        assert!(s[1].is_nan());
        assert!((s[2] - 1.0).abs() < 1e-12);
    }

    #[test]
    fn rate_counts_gaps_inside_the_window() {
        // One group per second for five seconds, then a pause of a minute.
        let times = [0, 1_000, 2_000, 3_000, 4_000, 64_000];
        let rates = groups_per_second(&times, 30_000);
        assert_eq!(rates[0], (0, 1.0 / 30.0));
        assert_eq!(rates[1], (1_000, 1.0));
        assert_eq!(rates[4], (4_000, 1.0));
        // After the pause, only itself in the window.
        assert_eq!(rates[5], (64_000, 1.0 / 30.0));
        // Ten groups in the same millisecond: counted once as a lone burst.
        assert_eq!(groups_per_second(&[5; 3], 10_000)[2], (5, 0.1));
    }

    #[test]
    fn rewards_split_by_environment_with_their_envelope() {
        let groups = [
            group(1, Some(0), 1_000, &[0.0, 1.0]),
            group(2, Some(1), 2_000, &[0.5]),
            group(3, Some(0), 3_000, &[]),
            group(4, Some(0), 4_000, &[1.0, 0.0, 0.5]),
        ];
        let by_env = reward_by_env(&groups, 1_000);
        let point = |x, mean, min, max| RewardPoint { x, mean, min, max };
        assert_eq!(
            by_env[&Some(0)],
            vec![point(0.0, 0.5, 0.0, 1.0), point(3_000.0, 0.5, 0.0, 1.0)]
        );
        assert_eq!(by_env[&Some(1)], vec![point(1_000.0, 0.5, 0.5, 0.5)]);
        let tokens = tokens_by_env(&groups, 0);
        assert_eq!(tokens[&Some(0)].len(), 3);
    }

    #[test]
    fn trainer_metrics_put_the_usual_ones_first() {
        let point = |step, pairs: &[(&str, f64)]| TrainerPoint {
            at_ms: 0,
            step,
            values: pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
        };
        let keyed = trainer_by_key(&[
            point(2, &[("loss", 0.5), ("lr", 1e-5), ("kl", 0.1)]),
            point(1, &[("loss", 0.7), ("clip_fraction", 0.2)]),
        ]);
        let keys: Vec<&str> = keyed.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["loss", "kl", "clip_fraction", "lr"]);
        assert_eq!(keyed[0].1, vec![(1.0, 0.7), (2.0, 0.5)]);
    }

    #[test]
    fn status_splits_into_queue_and_step() {
        let (queue, step) = status_points(
            &[RunStatusPoint {
                at_ms: 1_500,
                step: 3,
                queue_size: 7,
            }],
            500,
        );
        assert_eq!(queue, vec![(1_000.0, 7.0)]);
        assert_eq!(step, vec![(1_000.0, 3.0)]);
    }
}
