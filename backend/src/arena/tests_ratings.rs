//! The fitter against closed forms, scikit-learn, known generating strengths and arbitrary input.

use std::process::Command;

use proptest::prelude::*;

use super::ratings::{
    ELO_PER_UNIT, FitOptions, Outcome, RatingError, Vote, fit_bradley_terry, to_elo,
};
use super::sim;

fn fit(n: usize, votes: &[Vote]) -> Vec<f64> {
    fit_bradley_terry(n, votes, FitOptions::default())
        .unwrap()
        .coefficients
}

fn repeat(v: Vote, k: usize) -> impl Iterator<Item = Vote> {
    std::iter::repeat_n(v, k)
}

#[test]
fn two_contenders_match_the_closed_form() {
    // With two contenders the MLE is the log of the observed odds: 3 wins to 1 gives ln 3.
    let votes: Vec<Vote> = repeat(Vote::new(0, 1, Outcome::AWins), 2)
        .chain([
            Vote::new(1, 0, Outcome::BWins),
            Vote::new(0, 1, Outcome::BWins),
        ])
        .collect();
    let r = fit_bradley_terry(2, &votes, FitOptions::default()).unwrap();
    let diff = r.coefficients[0] - r.coefficients[1];
    assert!((diff - 3f64.ln()).abs() < 1e-5, "{diff}");
    assert!(
        r.coefficients.iter().sum::<f64>().abs() < 1e-12,
        "anchored to sum zero"
    );
    // On the Elo-like scale: 400·log10(3) = 190.848... points, centred on 1000.
    let elo = r.elo();
    assert!(
        (elo[0] - elo[1] - 190.848_501_887_865).abs() < 1e-3,
        "{elo:?}"
    );
    assert!(((elo[0] + elo[1]) / 2.0 - 1000.0).abs() < 1e-9);
    assert!((ELO_PER_UNIT - 173.717_792_761_300_1).abs() < 1e-9);
}

#[test]
fn ties_and_both_bad_count_as_half_wins() {
    // a: 2 wins, b: 1 win, plus one tie and one both-bad: a scores 3 of 5, so odds 3:2.
    let votes = vec![
        Vote::new(0, 1, Outcome::AWins),
        Vote::new(1, 0, Outcome::BWins),
        Vote::new(0, 1, Outcome::BWins),
        Vote::new(0, 1, Outcome::Tie),
        Vote::new(1, 0, Outcome::BothBad),
    ];
    let t = fit(2, &votes);
    assert!((t[0] - t[1] - 1.5f64.ln()).abs() < 1e-5, "{t:?}");
}

#[test]
fn typed_errors() {
    let ok = Vote::new(0, 1, Outcome::AWins);
    let o = FitOptions::default();
    assert_eq!(fit_bradley_terry(2, &[], o), Err(RatingError::NoVotes));
    assert_eq!(
        fit_bradley_terry(2, &[ok, Vote::new(0, 2, Outcome::Tie)], o),
        Err(RatingError::ContenderOutOfRange {
            vote: 1,
            index: 2,
            contenders: 2
        })
    );
    assert_eq!(
        fit_bradley_terry(2, &[Vote::new(1, 1, Outcome::Tie)], o),
        Err(RatingError::SelfComparison { vote: 0, index: 1 })
    );
    for bad in [f64::NAN, f64::INFINITY, -1.0] {
        let v = Vote {
            a_len: Some(10.0),
            b_len: Some(bad),
            ..ok
        };
        assert_eq!(
            fit_bradley_terry(2, &[v], o),
            Err(RatingError::InvalidLength { vote: 0 })
        );
    }
    let styled = FitOptions {
        style_control: true,
        ..o
    };
    assert_eq!(
        fit_bradley_terry(2, &[ok], styled),
        Err(RatingError::MissingLength { vote: 0 })
    );
    let unpenalised = FitOptions { l2: 0.0, ..o };
    assert_eq!(
        fit_bradley_terry(2, &[ok], unpenalised),
        Err(RatingError::InvalidPenalty(0.0))
    );
}

#[test]
fn unbeaten_and_disconnected_contenders_stay_finite() {
    // 0 beats 1 every time (no MLE without the penalty); 2 and 3 only ever meet each other; 4 has
    // no votes at all.
    let votes: Vec<Vote> = repeat(Vote::new(0, 1, Outcome::AWins), 20)
        .chain(repeat(Vote::new(2, 3, Outcome::AWins), 3))
        .chain(repeat(Vote::new(3, 2, Outcome::AWins), 1))
        .collect();
    let t = fit(5, &votes);
    assert!(t.iter().all(|x| x.is_finite()), "{t:?}");
    assert!(t[0] > t[2] && t[2] > t[3] && t[3] > t[1], "{t:?}");
    // The connected pair is still estimated as its closed form, ln 3, penalty notwithstanding.
    assert!((t[2] - t[3] - 3f64.ln()).abs() < 1e-4, "{t:?}");
    assert!(
        t[4].abs() < 1e-6,
        "an unvoted contender sits at the mean: {t:?}"
    );
}

/// scikit-learn's unpenalised logistic regression on the same votes, design built by the Python
/// side from the raw vote JSON, so our design construction is checked too.
const SKLEARN_DRIVER: &str = r#"
import json, sys
import numpy as np
from sklearn.linear_model import LogisticRegression
d = json.load(open(sys.argv[1]))
n, style = d["n"], d["style"]
X, y, w = [], [], []
for v in d["votes"]:
    x = [0.0] * (n + (1 if style else 0))
    x[v["a"]] = 1.0
    x[v["b"]] = -1.0
    if style:
        la, lb = v["a_len"], v["b_len"]
        x[n] = (la - lb) / (la + lb)
    if v["outcome"] == "a_wins":
        X.append(x); y.append(1); w.append(1.0)
    elif v["outcome"] == "b_wins":
        X.append(x); y.append(0); w.append(1.0)
    else:
        X += [x, x]; y += [1, 0]; w += [0.5, 0.5]
m = LogisticRegression(fit_intercept=False, C=np.inf, tol=1e-12, max_iter=100000)
m.fit(np.array(X), np.array(y), sample_weight=np.array(w))
print(json.dumps(m.coef_[0].tolist()))
"#;

fn sklearn_coefficients(n: usize, votes: &[Vote], style: bool, tag: &str) -> Vec<f64> {
    let python = std::env::var("LACHESIS_ARENA_PYTHON").unwrap_or_else(|_| {
        panic!(
            "LACHESIS_ARENA_PYTHON is not set: it must name a python with scikit-learn 1.9.1; \
             run `export LACHESIS_ARENA_PYTHON=$(scripts/ensure-arena-ref.sh)` first"
        )
    });
    let path =
        std::env::temp_dir().join(format!("lachesis-arena-{}-{tag}.json", std::process::id()));
    let body = serde_json::json!({ "n": n, "style": style, "votes": votes });
    std::fs::write(&path, body.to_string()).unwrap();
    let out = Command::new(&python)
        .arg("-c")
        .arg(SKLEARN_DRIVER)
        .arg(&path)
        .output();
    let _ = std::fs::remove_file(&path);
    let out = out.unwrap_or_else(|e| {
        panic!("cannot run {python} (LACHESIS_ARENA_PYTHON; see scripts/ensure-arena-ref.sh): {e}")
    });
    assert!(
        out.status.success(),
        "sklearn driver failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn matches_scikit_learn_without_style() {
    let votes = sim::mixed(&[0.3, -0.4, 1.1, 0.0, -0.9], 600, 0.2, 11);
    let ours = fit(5, &votes);
    let theirs = sklearn_coefficients(5, &votes, false, "plain");
    // Only differences are identified (sklearn's split of the common offset is its own).
    for i in 1..5 {
        let (a, b) = (ours[i] - ours[0], theirs[i] - theirs[0]);
        assert!((a - b).abs() < 1e-3, "contender {i}: ours {a}, sklearn {b}");
    }
}

#[test]
fn matches_scikit_learn_with_style() {
    let votes = sim::mixed(&[0.5, 0.0, -0.5, 0.2], 500, 0.3, 12);
    let options = FitOptions {
        style_control: true,
        ..FitOptions::default()
    };
    let r = fit_bradley_terry(4, &votes, options).unwrap();
    let theirs = sklearn_coefficients(4, &votes, true, "style");
    for i in 1..4 {
        let (a, b) = (r.coefficients[i] - r.coefficients[0], theirs[i] - theirs[0]);
        assert!((a - b).abs() < 1e-3, "contender {i}: ours {a}, sklearn {b}");
    }
    let style = r.style_coefficient.unwrap();
    assert!(
        (style - theirs[4]).abs() < 1e-3,
        "style: ours {style}, sklearn {}",
        theirs[4]
    );
}

#[test]
fn recovers_known_strengths() {
    let truth = [0.0, 0.5, 1.0, 1.5, 2.0];
    let votes = sim::bradley_terry(&truth, 4000, 7);
    let t = fit(5, &votes);
    // 4000 votes over 10 pairs: each difference's standard error is about 0.07, so 0.2 is about
    // three of them; a fitter off by a sign, a factor or an offset fails this.
    for i in 1..5 {
        let (fitted, true_diff) = (t[i] - t[0], truth[i] - truth[0]);
        assert!(
            (fitted - true_diff).abs() < 0.2,
            "contender {i}: {fitted} vs {true_diff}"
        );
    }
    assert!(
        t.windows(2).all(|w| w[0] < w[1]),
        "true order recovered: {t:?}"
    );
}

#[test]
fn style_control_separates_length_from_strength() {
    // Equal strengths; voters favour the longer answer, and contender 0 writes the longest.
    let votes = sim::length_biased(4, 0, 2.0, 4000, 21);
    let plain = fit(4, &votes);
    let others = (plain[1] + plain[2] + plain[3]) / 3.0;
    assert!(
        plain[0] - others > 0.3,
        "without style control verbosity pays: {plain:?}"
    );
    assert!(to_elo(plain[0]) - to_elo(others) > 50.0);

    let options = FitOptions {
        style_control: true,
        ..FitOptions::default()
    };
    let styled = fit_bradley_terry(4, &votes, options).unwrap();
    assert!(
        styled.coefficients.iter().all(|t| t.abs() < 0.15),
        "{styled:?}"
    );
    let beta = styled.style_coefficient.unwrap();
    assert!(
        beta > 0.0 && (beta - 2.0).abs() < 0.5,
        "style coefficient {beta}, generated with 2"
    );
}

fn arbitrary_vote() -> impl Strategy<Value = Vote> {
    let outcome = prop_oneof![
        Just(Outcome::AWins),
        Just(Outcome::BWins),
        Just(Outcome::Tie),
        Just(Outcome::BothBad)
    ];
    let len = prop_oneof![
        4 => (0.0..2000.0f64).prop_map(Some),
        1 => Just(None),
        1 => prop_oneof![Just(f64::NAN), Just(f64::INFINITY), Just(-3.0), Just(0.0)].prop_map(Some),
    ];
    (0..6usize, 0..6usize, outcome, len.clone(), len).prop_map(|(a, b, outcome, a_len, b_len)| {
        Vote {
            a,
            b,
            outcome,
            a_len,
            b_len,
        }
    })
}

proptest! {
    #[test]
    fn never_panics_and_is_finite_or_a_validation_error(
        n in 0..6usize,
        votes in prop::collection::vec(arbitrary_vote(), 0..25),
        style_control in any::<bool>(),
    ) {
        let options = FitOptions { style_control, ..FitOptions::default() };
        match fit_bradley_terry(n, &votes, options) {
            Ok(r) => {
                prop_assert_eq!(r.coefficients.len(), n);
                prop_assert!(r.coefficients.iter().all(|t| t.is_finite()), "{:?}", r);
                prop_assert!(r.style_coefficient.is_none_or(f64::is_finite));
                prop_assert!(r.coefficients.iter().sum::<f64>().abs() < 1e-6);
            }
            // Convergence failure is not acceptable on any input: the objective is strictly convex.
            Err(RatingError::NotConverged(k)) => prop_assert!(false, "not converged in {}", k),
            Err(_) => {}
        }
    }
}
