//! Intervals, rank ranges, counts, win rates and pair selection.

use rand::SeedableRng;
use rand::rngs::StdRng;

use super::bootstrap::{
    BootstrapOptions, Interval, bootstrap, leaderboard, next_pair, pair_counts, pair_weight,
    rank_ranges, vote_counts, win_rate_matrix,
};
use super::ratings::{FitOptions, Outcome, Vote};
use super::sim;

fn iv(lower: f64, upper: f64) -> Interval {
    Interval { lower, upper }
}

#[test]
fn intervals_hold_the_estimate_and_narrow_with_more_votes() {
    let truth = [0.0, 0.5, 1.0, 1.5, 2.0];
    let options = BootstrapOptions {
        seed: 3,
        ..BootstrapOptions::default()
    };
    let many = bootstrap(
        5,
        &sim::bradley_terry(&truth, 4000, 1),
        FitOptions::default(),
        options,
    )
    .unwrap();
    let few = bootstrap(
        5,
        &sim::bradley_terry(&truth, 200, 2),
        FitOptions::default(),
        options,
    )
    .unwrap();
    for (rated, label) in [(&many, "4000"), (&few, "200")] {
        for (i, (elo, iv)) in rated.ratings.elo().iter().zip(&rated.intervals).enumerate() {
            assert!(
                iv.lower <= *elo && *elo <= iv.upper,
                "{label} votes, contender {i}: {elo} {iv:?}"
            );
        }
    }
    // Standard errors scale as 1/sqrt(votes): 20 times the votes, about 4.5 times narrower.
    for i in 0..5 {
        let (w_few, w_many) = (few.intervals[i].width(), many.intervals[i].width());
        assert!(
            w_few > 2.0 * w_many,
            "contender {i}: 200 votes {w_few}, 4000 votes {w_many}"
        );
    }
    // Reproducible from the seed.
    let again = bootstrap(
        5,
        &sim::bradley_terry(&truth, 4000, 1),
        FitOptions::default(),
        options,
    )
    .unwrap();
    assert_eq!(again, many);
}

#[test]
fn rank_ranges_follow_the_definition() {
    // Worked by hand: 3 is clear at the top, 0 and 1 overlap each other, 2 is clear at the bottom.
    let intervals = [
        iv(1100.0, 1200.0),
        iv(1050.0, 1150.0),
        iv(900.0, 1000.0),
        iv(1300.0, 1400.0),
    ];
    assert_eq!(
        rank_ranges(&intervals),
        vec![(2, 3), (2, 3), (4, 4), (1, 1)]
    );
    // Touching counts as overlapping: the rank is not claimed.
    assert_eq!(
        rank_ranges(&[iv(0.0, 1.0), iv(1.0, 2.0)]),
        vec![(1, 2), (1, 2)]
    );
}

#[test]
fn near_identical_contenders_share_a_rank_range() {
    // 1 and 2 are the same strength; 0 and 3 are far below and above them.
    let votes = sim::bradley_terry(&[0.0, 1.0, 1.0, 2.5], 3000, 5);
    let board = leaderboard(
        4,
        &votes,
        FitOptions::default(),
        BootstrapOptions::default(),
    )
    .unwrap();
    let by_contender = |c: usize| board.rows.iter().find(|r| r.contender == c).unwrap();
    let ranks = |c: usize| (by_contender(c).rank_best, by_contender(c).rank_worst);
    assert_eq!(ranks(3), (1, 1));
    assert_eq!(ranks(1), (2, 3));
    assert_eq!(ranks(2), (2, 3));
    assert_eq!(ranks(0), (4, 4));
    assert_eq!(board.rows[0].contender, 3);
    assert!(board.rows.windows(2).all(|w| w[0].rating >= w[1].rating));
    assert_eq!(
        board.rows.iter().map(|r| r.votes).sum::<usize>(),
        2 * votes.len()
    );
    assert!(board.style_coefficient.is_none() && board.style_interval.is_none());
}

#[test]
fn style_interval_is_reported_with_style_control() {
    let votes = sim::length_biased(3, 0, 2.0, 1500, 8);
    let fit = FitOptions {
        style_control: true,
        ..FitOptions::default()
    };
    let options = BootstrapOptions {
        rounds: 50,
        ..BootstrapOptions::default()
    };
    let rated = bootstrap(3, &votes, fit, options).unwrap();
    let (beta, iv) = (
        rated.ratings.style_coefficient.unwrap(),
        rated.style_interval.unwrap(),
    );
    assert!(
        iv.lower <= beta && beta <= iv.upper && iv.lower > 0.0,
        "{beta} {iv:?}"
    );
}

#[test]
fn counts_and_win_rates_by_hand() {
    let votes = [
        Vote::new(0, 1, Outcome::AWins),
        Vote::new(1, 0, Outcome::AWins),
        Vote::new(0, 1, Outcome::Tie),
        Vote::new(0, 2, Outcome::BothBad),
        Vote::new(2, 0, Outcome::AWins),
    ];
    assert_eq!(vote_counts(3, &votes), vec![5, 3, 2]);
    assert_eq!(pair_counts(3, &votes)[0], vec![0, 3, 2]);
    let m = win_rate_matrix(3, &votes);
    assert_eq!(m[0][1], Some(0.5));
    assert_eq!(m[1][0], Some(0.5));
    assert_eq!(m[0][2], Some(0.25));
    assert_eq!(m[2][0], Some(0.75));
    assert_eq!(m[1][2], None);
    assert_eq!(m[0][0], None);
}

#[test]
fn pair_weights_by_hand() {
    let intervals = [iv(1000.0, 1100.0), iv(1050.0, 1250.0), iv(1300.0, 1400.0)];
    let counts = vec![vec![0, 4, 1], vec![4, 0, 0], vec![1, 0, 0]];
    // Half the narrower interval shared, 4 votes: (0.5 + 0.05) / 5.
    assert!((pair_weight(&intervals, &counts, 0, 1) - 0.11).abs() < 1e-12);
    // Disjoint, 1 vote: only the exploration floor, 0.05 / 2.
    assert!((pair_weight(&intervals, &counts, 0, 2) - 0.025).abs() < 1e-12);
    // A contender nobody has voted on is wholly uncertain.
    let counts = vec![vec![0, 4, 0], vec![4, 0, 0], vec![0, 0, 0]];
    assert!((pair_weight(&intervals, &counts, 0, 2) - 1.05).abs() < 1e-12);
}

#[test]
fn next_pair_prefers_the_unsettled_pair() {
    // 0 and 1 overlap entirely; 2 is far from both. Equal votes everywhere.
    let intervals = [iv(1000.0, 1100.0), iv(1010.0, 1090.0), iv(1300.0, 1400.0)];
    let counts = vec![vec![0, 10, 10], vec![10, 0, 10], vec![10, 10, 0]];
    let mut rng = StdRng::seed_from_u64(9);
    let picks: Vec<_> = (0..2000)
        .map(|_| next_pair(&intervals, &counts, &mut rng).unwrap())
        .collect();
    let unsettled = picks.iter().filter(|&&p| p == (0, 1)).count();
    // Weights 1.05 : 0.05 : 0.05, so about 91% of draws.
    assert!(unsettled > 1700, "{unsettled} of 2000");
    assert!(picks.iter().all(|&(i, j)| i < j && j < 3));
    // Settled pairs are still drawn sometimes.
    assert!(picks.contains(&(0, 2)) && picks.contains(&(1, 2)));
    // Deterministic for a seed.
    let mut rng = StdRng::seed_from_u64(9);
    let again: Vec<_> = (0..2000)
        .map(|_| next_pair(&intervals, &counts, &mut rng).unwrap())
        .collect();
    assert_eq!(picks, again);
    // Once the unsettled pair has had many votes, the others catch up.
    let counts = vec![vec![0, 400, 0], vec![400, 0, 1], vec![0, 1, 0]];
    let mut rng = StdRng::seed_from_u64(9);
    let picks: Vec<_> = (0..500)
        .map(|_| next_pair(&intervals, &counts, &mut rng).unwrap())
        .collect();
    assert!(picks.iter().filter(|&&p| p == (0, 1)).count() < 100);
    assert_eq!(next_pair(&intervals[..1], &[vec![0]], &mut rng), None);
}

#[test]
fn kendall_tau_by_hand() {
    use super::bootstrap::kendall_tau;
    assert_eq!(kendall_tau(&[1.0, 2.0, 3.0], &[10.0, 20.0, 30.0]), 1.0);
    assert_eq!(kendall_tau(&[1.0, 2.0, 3.0], &[3.0, 2.0, 1.0]), -1.0);
    // Pairs (0,1) agree, (0,2) agree, (1,2) disagree: (2 - 1) / 3.
    assert!((kendall_tau(&[1.0, 2.0, 3.0], &[1.0, 3.0, 2.0]) - 1.0 / 3.0).abs() < 1e-12);
    assert_eq!(kendall_tau(&[1.0], &[1.0]), 0.0);
}

/// The served board's configuration (its prior, 95% percentile intervals) on votes simulated from
/// known strengths: the fitted order matches the truth, and the intervals hold the true ratings
/// about as often as they claim to.
#[test]
fn fitted_order_recovers_the_truth_and_intervals_cover_it_at_their_nominal_rate() {
    use super::board::PRIOR_L2;
    use super::bootstrap::kendall_tau;
    use super::ratings::to_elo;
    let fit = FitOptions {
        l2: PRIOR_L2,
        ..FitOptions::default()
    };
    // Twelve contenders a quarter of a log-odds unit apart (about 43 rating points), summing to 0.
    let truth: Vec<f64> = (0..12).map(|i| 0.25 * i as f64 - 1.375).collect();
    let votes = sim::bradley_terry(&truth, 3000, 11);
    let options = BootstrapOptions {
        rounds: 100,
        confidence: 0.95,
        seed: 3,
    };
    let rated = bootstrap(12, &votes, fit, options).unwrap();
    let tau = kendall_tau(&rated.ratings.coefficients, &truth);
    println!(
        "Kendall tau of the fitted order against the truth (12 contenders, 3000 votes): {tau:.3}"
    );
    assert!(tau >= 0.85, "tau {tau}");

    // Coverage over 200 independent arenas of five contenders and 400 votes each.
    let truth = [-0.75, -0.25, 0.0, 0.25, 0.75];
    let (mut covered, mut total) = (0, 0);
    for replicate in 0..200_u64 {
        let votes = sim::bradley_terry(&truth, 400, 1000 + replicate);
        let options = BootstrapOptions {
            rounds: 200,
            confidence: 0.95,
            seed: replicate,
        };
        let rated = bootstrap(5, &votes, fit, options).unwrap();
        for (interval, &theta) in rated.intervals.iter().zip(&truth) {
            let elo = to_elo(theta);
            total += 1;
            covered += usize::from(interval.lower <= elo && elo <= interval.upper);
        }
    }
    let rate = covered as f64 / total as f64;
    println!("95% intervals held the true rating in {covered} of {total} cases ({rate:.3})");
    assert!((0.90..=0.99).contains(&rate), "coverage {rate}");
}
