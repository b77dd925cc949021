//! Geometry of the charts: linear scales, "nice" axis ticks, tick labels and SVG path strings.
//!
//! Kept free of Leptos so it is tested natively like any other pure code.

use std::fmt::Write;

/// Maps a data interval onto a pixel interval.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Scale {
    pub d0: f64,
    pub d1: f64,
    pub r0: f64,
    pub r1: f64,
}

impl Scale {
    pub fn new(domain: (f64, f64), range: (f64, f64)) -> Self {
        Self {
            d0: domain.0,
            d1: domain.1,
            r0: range.0,
            r1: range.1,
        }
    }

    pub fn map(&self, v: f64) -> f64 {
        let span = self.d1 - self.d0;
        if span == 0.0 {
            return (self.r0 + self.r1) / 2.0;
        }
        self.r0 + (v - self.d0) / span * (self.r1 - self.r0)
    }

    /// The inverse of [`Scale::map`], for turning a pointer position into a data value.
    pub fn invert(&self, r: f64) -> f64 {
        let span = self.r1 - self.r0;
        if span == 0.0 {
            return self.d0;
        }
        self.d0 + (r - self.r0) / span * (self.d1 - self.d0)
    }
}

/// The smallest and largest finite values, widened when they coincide so the line sits in the
/// middle of the chart instead of on an edge; `None` when there is nothing finite.
pub fn extent(values: impl IntoIterator<Item = f64>) -> Option<(f64, f64)> {
    let (lo, hi) = values
        .into_iter()
        .filter(|v| v.is_finite())
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
            (lo.min(v), hi.max(v))
        });
    if lo > hi {
        return None;
    }
    if lo == hi {
        let pad = if lo == 0.0 { 1.0 } else { lo.abs() * 0.1 };
        return Some((lo - pad, hi + pad));
    }
    Some((lo, hi))
}

/// A round step (1, 2 or 5 times a power of ten) giving about `count` intervals over `span`, as
/// its mantissa and power of ten.
fn nice_parts(span: f64, count: usize) -> (f64, i32) {
    if span <= 0.0 || !span.is_finite() {
        return (1.0, 0);
    }
    let raw = span / count.max(1) as f64;
    let exp = raw.log10().floor() as i32;
    let residual = raw / pow10(exp);
    let mantissa = if residual <= 1.0 {
        1.0
    } else if residual <= 2.0 {
        2.0
    } else if residual <= 5.0 {
        5.0
    } else {
        10.0
    };
    (mantissa, exp)
}

/// `m * 10^exp`, dividing for negative powers: `6 / 10` is exactly the double nearest 0.6,
/// where `6 * 0.1` is 0.6000000000000001 and would print as such.
fn scaled(m: f64, exp: i32) -> f64 {
    if exp < 0 {
        m / 10f64.powi(-exp)
    } else {
        m * 10f64.powi(exp)
    }
}

fn pow10(exp: i32) -> f64 {
    scaled(1.0, exp)
}

/// Tick positions covering `(lo, hi)` at a nice step: the domain is extended outward to whole
/// steps so the first and last ticks sit on the axis ends.
pub fn nice_ticks(lo: f64, hi: f64, count: usize) -> (f64, f64, Vec<f64>) {
    let (m, exp) = nice_parts(hi - lo, count);
    let step = scaled(m, exp);
    let first = (lo / step).floor() as i64;
    let last = ((hi / step).ceil() as i64).max(first + 1);
    let ticks: Vec<f64> = (first..=last).map(|k| scaled(k as f64 * m, exp)).collect();
    (ticks[0], ticks[ticks.len() - 1], ticks)
}

/// Ticks for elapsed milliseconds, on steps a person reads as round durations.
pub fn duration_ticks(lo: f64, hi: f64, count: usize) -> (f64, f64, Vec<f64>) {
    const STEPS: [f64; 16] = [
        1e3, 2e3, 5e3, 10e3, 15e3, 30e3, 60e3, 120e3, 300e3, 600e3, 900e3, 1_800e3, 3_600e3,
        7_200e3, 21_600e3, 86_400e3,
    ];
    let raw = (hi - lo) / count.max(1) as f64;
    let step = STEPS
        .iter()
        .copied()
        .find(|s| *s >= raw)
        .unwrap_or_else(|| (raw / 86_400e3).ceil() * 86_400e3);
    let start = (lo / step).floor() * step;
    let end = (hi / step).ceil() * step;
    let n = ((end - start) / step).round() as usize;
    (
        start,
        end,
        (0..=n).map(|i| start + i as f64 * step).collect(),
    )
}

/// A tick label with as many decimals as the step needs (0.25 → "0.25", 2000 → "2k"); tiny
/// steps such as learning rates in scientific notation (1.2e-5), which stays narrow.
pub fn format_tick(v: f64, step: f64) -> String {
    let v = if v.abs() < step * 1e-9 { 0.0 } else { v };
    if step < 1e-3 {
        if v == 0.0 {
            return "0".to_owned();
        }
        let digits = (v.abs().log10().floor() - step.log10().floor()).max(0.0) as usize;
        return format!("{v:.digits$e}");
    }
    if v.abs() >= 10_000.0 && step >= 1_000.0 {
        let k = v / 1_000.0;
        let decimals = if (step / 1_000.0).fract() == 0.0 {
            0
        } else {
            1
        };
        return format!("{k:.decimals$}k");
    }
    let decimals = if step >= 1.0 {
        0
    } else {
        (-step.log10().floor()) as usize
    };
    format!("{v:.decimals$}")
}

/// Elapsed milliseconds as "45s", "3m", "1h20m", "2d3h".
pub fn format_duration(ms: f64) -> String {
    let total = (ms / 1_000.0).round().max(0.0) as u64;
    let (d, h, m, s) = (
        total / 86_400,
        total % 86_400 / 3_600,
        total % 3_600 / 60,
        total % 60,
    );
    match (d, h, m) {
        (0, 0, 0) => format!("{s}s"),
        (0, 0, _) if s == 0 => format!("{m}m"),
        (0, 0, _) => format!("{m}m{s}s"),
        (0, _, 0) => format!("{h}h"),
        (0, _, _) => format!("{h}h{m}m"),
        (_, 0, _) => format!("{d}d"),
        _ => format!("{d}d{h}h"),
    }
}

/// An SVG path through `points`, already in pixels; a non-finite value breaks the line.
pub fn line_path(points: impl IntoIterator<Item = (f64, f64)>) -> String {
    let mut d = String::new();
    let mut pen_down = false;
    for (x, y) in points {
        if !(x.is_finite() && y.is_finite()) {
            pen_down = false;
            continue;
        }
        let cmd = if pen_down { 'L' } else { 'M' };
        let _ = write!(d, "{cmd}{x:.1},{y:.1}");
        pen_down = true;
    }
    d
}

/// A closed SVG area between `lo` and `hi` over `x` (pixels): along the top edge left to right,
/// back along the bottom edge. Used for the min/max envelope behind a reward line.
pub fn band_path(points: &[(f64, f64, f64)]) -> String {
    let finite: Vec<_> = points
        .iter()
        .copied()
        .filter(|(x, lo, hi)| x.is_finite() && lo.is_finite() && hi.is_finite())
        .collect();
    if finite.len() < 2 {
        return String::new();
    }
    let top = finite.iter().map(|&(x, _, hi)| (x, hi));
    let bottom = finite.iter().rev().map(|&(x, lo, _)| (x, lo));
    let mut d = line_path(top.chain(bottom));
    d.push('Z');
    d
}

/// The point whose x is closest to `x` in a list sorted by x.
pub fn nearest(points: &[(f64, f64)], x: f64) -> Option<(f64, f64)> {
    let at = points.partition_point(|p| p.0 < x);
    let after = points.get(at);
    let before = at.checked_sub(1).and_then(|i| points.get(i));
    match (before, after) {
        (Some(b), Some(a)) => Some(if x - b.0 <= a.0 - x { *b } else { *a }),
        (Some(p), None) | (None, Some(p)) => Some(*p),
        (None, None) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scales_map_and_invert() {
        let s = Scale::new((0.0, 10.0), (100.0, 0.0));
        assert_eq!(s.map(0.0), 100.0);
        assert_eq!(s.map(10.0), 0.0);
        assert_eq!(s.map(2.5), 75.0);
        assert_eq!(s.invert(75.0), 2.5);
        assert_eq!(Scale::new((3.0, 3.0), (0.0, 10.0)).map(3.0), 5.0);
    }

    #[test]
    fn extent_ignores_non_finite_values_and_widens_a_flat_line() {
        assert_eq!(extent([1.0, f64::NAN, 3.0, -2.0]), Some((-2.0, 3.0)));
        assert_eq!(extent([f64::NAN]), None);
        assert_eq!(extent([0.0, 0.0]), Some((-1.0, 1.0)));
        assert_eq!(extent([10.0]), Some((9.0, 11.0)));
    }

    #[test]
    fn ticks_land_on_round_numbers_and_cover_the_data() {
        let (lo, hi, ticks) = nice_ticks(0.13, 0.92, 5);
        assert_eq!((lo, hi), (0.0, 1.0));
        assert_eq!(ticks, vec![0.0, 0.2, 0.4, 0.6, 0.8, 1.0]);
        let (lo, hi, ticks) = nice_ticks(-3.0, 47.0, 5);
        assert_eq!((lo, hi), (-10.0, 50.0));
        assert_eq!(ticks.len(), 7);
        assert_eq!(nice_parts(1234.0, 4), (5.0, 2));
    }

    #[test]
    fn duration_ticks_use_clock_steps() {
        let (lo, hi, ticks) = duration_ticks(0.0, 170_000.0, 5);
        assert_eq!((lo, hi), (0.0, 180_000.0));
        assert_eq!(ticks, vec![0.0, 60_000.0, 120_000.0, 180_000.0]);
    }

    #[test]
    fn tick_labels_show_the_digits_the_step_needs() {
        assert_eq!(format_tick(0.2, 0.2), "0.2");
        assert_eq!(format_tick(0.25, 0.05), "0.25");
        assert_eq!(format_tick(40.0, 10.0), "40");
        assert_eq!(format_tick(20_000.0, 5_000.0), "20k");
        assert_eq!(format_tick(1e-17, 0.1), "0.0");
        assert_eq!(format_tick(1.2e-5, 1e-6), "1.2e-5");
        assert_eq!(format_tick(0.0, 1e-6), "0");
    }

    #[test]
    fn durations_read_like_a_clock() {
        assert_eq!(format_duration(45_000.0), "45s");
        assert_eq!(format_duration(180_000.0), "3m");
        assert_eq!(format_duration(190_000.0), "3m10s");
        assert_eq!(format_duration(4_800_000.0), "1h20m");
        assert_eq!(format_duration(7_200_000.0), "2h");
        assert_eq!(format_duration(183_600_000.0), "2d3h");
    }

    #[test]
    fn paths_break_at_missing_values() {
        assert_eq!(line_path([(0.0, 1.0), (2.0, 3.0)]), "M0.0,1.0L2.0,3.0");
        assert_eq!(
            line_path([(0.0, 1.0), (1.0, f64::NAN), (2.0, 3.0)]),
            "M0.0,1.0M2.0,3.0"
        );
        assert_eq!(line_path([]), "");
    }

    #[test]
    fn a_band_goes_out_along_the_top_and_back_along_the_bottom() {
        assert_eq!(
            band_path(&[(0.0, 1.0, 2.0), (10.0, 3.0, 4.0)]),
            "M0.0,2.0L10.0,4.0L10.0,3.0L0.0,1.0Z"
        );
        assert_eq!(band_path(&[(0.0, 1.0, 2.0)]), "");
    }

    #[test]
    fn nearest_picks_the_closest_x() {
        let points = [(0.0, 1.0), (10.0, 2.0), (20.0, 3.0)];
        assert_eq!(nearest(&points, 4.0), Some((0.0, 1.0)));
        assert_eq!(nearest(&points, 6.0), Some((10.0, 2.0)));
        assert_eq!(nearest(&points, 99.0), Some((20.0, 3.0)));
        assert_eq!(nearest(&points, -5.0), Some((0.0, 1.0)));
        assert_eq!(nearest(&[], 1.0), None);
    }
}
