//! How far annotators agree: Krippendorff's alpha over a whole queue, Cohen's kappa for pairs of
//! annotators, and pairwise agreement per item and per annotator. Pure: no I/O.

use std::collections::{BTreeMap, HashMap};

use lachesis_shared::feedback::{Judgement, PairChoice};

/// How two values differ, for alpha.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Metric {
    /// Equal or not (categories).
    Nominal,
    /// The squared difference (scores, ranks).
    Interval,
}

impl Metric {
    fn delta(self, a: i64, b: i64) -> f64 {
        match self {
            Metric::Nominal => f64::from(u8::from(a != b)),
            Metric::Interval => ((a - b) as f64).powi(2),
        }
    }
}

/// Krippendorff's alpha for `units`, each the values its annotators gave (missing values simply
/// absent). Units with fewer than two values carry no pair and are left out, as the coefficient
/// defines. `None` when nothing is pairable or every value is the same (no expected
/// disagreement to compare with).
pub fn krippendorff_alpha(units: &[Vec<i64>], metric: Metric) -> Option<f64> {
    let pairable: Vec<&Vec<i64>> = units.iter().filter(|u| u.len() >= 2).collect();
    let n: usize = pairable.iter().map(|u| u.len()).sum();
    if n < 2 {
        return None;
    }
    // Observed: within each unit, every ordered pair of its values, weighted 1/(m - 1).
    let mut observed = 0.0;
    for unit in &pairable {
        let m = unit.len() as f64;
        let mut within = 0.0;
        for (i, &a) in unit.iter().enumerate() {
            for (j, &b) in unit.iter().enumerate() {
                if i != j {
                    within += metric.delta(a, b);
                }
            }
        }
        observed += within / (m - 1.0);
    }
    observed /= n as f64;
    // Expected: every ordered pair of pairable values anywhere, from the values' frequencies.
    let mut counts: BTreeMap<i64, f64> = BTreeMap::new();
    for &value in pairable.iter().flat_map(|u| u.iter()) {
        *counts.entry(value).or_default() += 1.0;
    }
    let mut expected = 0.0;
    for (&a, &na) in &counts {
        for (&b, &nb) in &counts {
            if a != b {
                expected += na * nb * metric.delta(a, b);
            }
        }
    }
    expected /= (n * (n - 1)) as f64;
    (expected > 0.0).then(|| 1.0 - observed / expected)
}

/// Cohen's kappa of two annotators' categories on the items both judged (`pairs`). `None` when
/// there are none, or chance agreement is already total (both always chose one same category).
pub fn cohen_kappa<T: Eq + std::hash::Hash + Copy>(pairs: &[(T, T)]) -> Option<f64> {
    if pairs.is_empty() {
        return None;
    }
    let n = pairs.len() as f64;
    let observed = pairs.iter().filter(|(a, b)| a == b).count() as f64 / n;
    let mut first: HashMap<T, f64> = HashMap::new();
    let mut second: HashMap<T, f64> = HashMap::new();
    for &(a, b) in pairs {
        *first.entry(a).or_default() += 1.0 / n;
        *second.entry(b).or_default() += 1.0 / n;
    }
    let chance: f64 = first
        .iter()
        .map(|(k, p)| p * second.get(k).copied().unwrap_or(0.0))
        .sum();
    (chance < 1.0 - 1e-12).then(|| (observed - chance) / (1.0 - chance))
}

/// How far two judgements of one item agree, from 0 to 1: ratings by their distance on the 1–5
/// scale, comparisons by equality, rankings by Kendall's tau rescaled to 0–1.
pub fn pair_agreement(a: &Judgement, b: &Judgement) -> Option<f64> {
    match (a, b) {
        (Judgement::Rate { score: x }, Judgement::Rate { score: y }) => {
            Some(1.0 - f64::from(x.abs_diff(*y)) / 4.0)
        }
        (Judgement::Compare { choice: x }, Judgement::Compare { choice: y }) => {
            Some(f64::from(u8::from(x == y)))
        }
        (Judgement::Rank { order: x }, Judgement::Rank { order: y }) if x.len() == y.len() => {
            let (px, py) = (positions(x), positions(y));
            Some((crate::arena::bootstrap::kendall_tau(&px, &py) + 1.0) / 2.0)
        }
        _ => None,
    }
}

/// Each answer's place in a best-first order (0 for the best).
fn positions(order: &[usize]) -> Vec<f64> {
    let mut place = vec![0.0; order.len()];
    for (rank, &answer) in order.iter().enumerate() {
        if let Some(slot) = place.get_mut(answer) {
            *slot = rank as f64;
        }
    }
    place
}

/// The units alpha is computed over, from judgements grouped by item: an item's scores or
/// choices; for rankings, each (item, answer)'s rank positions.
pub fn units(items: &[Vec<&Judgement>]) -> (Vec<Vec<i64>>, Metric) {
    let mut units = Vec::new();
    let mut metric = Metric::Interval;
    for judgements in items {
        let mut by_answer: BTreeMap<usize, Vec<i64>> = BTreeMap::new();
        let mut values = Vec::new();
        for judgement in judgements {
            match judgement {
                Judgement::Rate { score } => values.push(i64::from(*score)),
                Judgement::Compare { choice } => {
                    metric = Metric::Nominal;
                    values.push(match choice {
                        PairChoice::A => 0,
                        PairChoice::B => 1,
                        PairChoice::Tie => 2,
                    });
                }
                Judgement::Rank { order } => {
                    for (rank, &answer) in order.iter().enumerate() {
                        by_answer.entry(answer).or_default().push(rank as i64);
                    }
                }
            }
        }
        if !values.is_empty() {
            units.push(values);
        }
        units.extend(by_answer.into_values());
    }
    (units, metric)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// Krippendorff's worked example (four coders, twelve units, values 1 to 5, some missing), for
    /// which his computation gives alpha 0.743 (nominal) and 0.849 (interval).
    fn reliability_data() -> Vec<Vec<i64>> {
        // One row per coder, one column per unit; 0 marks a unit the coder left out.
        let coders: [[i64; 12]; 4] = [
            [1, 2, 3, 3, 2, 1, 4, 1, 2, 0, 0, 0],
            [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, 0, 3],
            [0, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, 0],
            [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, 0],
        ];
        (0..12)
            .map(|u| coders.iter().map(|c| c[u]).filter(|&v| v != 0).collect())
            .collect()
    }

    #[test]
    fn alpha_matches_krippendorffs_worked_example() {
        let data = reliability_data();
        let nominal = krippendorff_alpha(&data, Metric::Nominal).unwrap();
        let interval = krippendorff_alpha(&data, Metric::Interval).unwrap();
        assert!((nominal - 0.743).abs() < 5e-4, "nominal {nominal}");
        assert!((interval - 0.849).abs() < 5e-4, "interval {interval}");
    }

    #[test]
    fn alpha_is_one_for_perfect_agreement_and_undefined_without_variation() {
        let perfect = vec![vec![1, 1], vec![3, 3, 3], vec![5, 5]];
        assert_eq!(krippendorff_alpha(&perfect, Metric::Interval), Some(1.0));
        assert_eq!(
            krippendorff_alpha(&[vec![2, 2], vec![2, 2]], Metric::Nominal),
            None
        );
        assert_eq!(
            krippendorff_alpha(&[vec![1], vec![2]], Metric::Nominal),
            None
        );
    }

    #[test]
    fn kappa_by_hand() {
        use PairChoice::{A, B};
        // 10 items: both A 4 times, both B 3 times, disagree 3 times (A/B twice, B/A once).
        let mut pairs = vec![(A, A); 4];
        pairs.extend([(B, B); 3]);
        pairs.extend([(A, B), (A, B), (B, A)]);
        // p_o = 0.7; first A 0.6 B 0.4, second A 0.5 B 0.5: p_e = 0.5; kappa = 0.2 / 0.5 = 0.4.
        let kappa = cohen_kappa(&pairs).unwrap();
        assert!((kappa - 0.4).abs() < 1e-12, "{kappa}");
        assert_eq!(cohen_kappa(&[(A, A), (A, A)]), None);
        assert_eq!(cohen_kappa::<PairChoice>(&[]), None);
    }

    #[test]
    fn pairwise_agreement_by_kind() {
        let rate = |score| Judgement::Rate { score };
        assert_eq!(pair_agreement(&rate(5), &rate(1)), Some(0.0));
        assert_eq!(pair_agreement(&rate(4), &rate(3)), Some(0.75));
        let rank = |order: &[usize]| Judgement::Rank {
            order: order.to_vec(),
        };
        assert_eq!(
            pair_agreement(&rank(&[0, 1, 2]), &rank(&[0, 1, 2])),
            Some(1.0)
        );
        assert_eq!(
            pair_agreement(&rank(&[0, 1, 2]), &rank(&[2, 1, 0])),
            Some(0.0)
        );
        assert_eq!(pair_agreement(&rate(3), &rank(&[0])), None);
        let (units, metric) = units(&[vec![&rank(&[1, 0]), &rank(&[1, 0])]]);
        assert_eq!(metric, Metric::Interval);
        assert_eq!(units, vec![vec![1, 1], vec![0, 0]]);
    }

    proptest! {
        #[test]
        fn alpha_is_at_most_one_and_never_panics(
            units in prop::collection::vec(prop::collection::vec(1_i64..=5, 0..5), 0..20)
        ) {
            for metric in [Metric::Nominal, Metric::Interval] {
                if let Some(alpha) = krippendorff_alpha(&units, metric) {
                    prop_assert!(alpha <= 1.0 + 1e-12 && alpha.is_finite());
                }
            }
        }
    }
}
