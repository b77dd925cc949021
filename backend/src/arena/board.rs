//! The leaderboard of an arena from its stored votes, refitted only when a vote has arrived since
//! the last fit, and the pair to deal next.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use lachesis_shared::arena::{ArenaKind, LeaderboardEntry, LeaderboardView, VoteChoice};
use rand::Rng;

use super::bootstrap::{
    BootstrapOptions, Interval, leaderboard, next_pair, pair_counts, rank_ranges,
};
use super::ratings::{FitOptions, Outcome, RatingError, Vote};
use super::store::{StoredContender, VoteRow};

/// Coverage of the leaderboard's intervals.
pub const CONFIDENCE: f64 = 0.95;

/// The served board's L2 penalty: a N(0, 1) prior on each strength in log-odds units (about ±170
/// rating points for one standard deviation). A handful of votes then moves a contender a
/// plausible distance instead of the hundreds of points a bare maximum likelihood gives an
/// unbeaten contender; with hundreds of votes per contender its pull is negligible.
pub const PRIOR_L2: f64 = 1.0;

/// Below this many counted votes a contender is provisional: listed with its rating, but its rank
/// spans the whole board and it separates no one. Bootstrap intervals of a few votes are too
/// narrow (one vote resampled is still that one vote), so they cannot support a rank.
pub const PROVISIONAL_VOTES: usize = 10;

/// A fitted leaderboard and what dealing needs from it.
#[derive(Debug, Clone)]
pub struct Fitted {
    /// The newest vote it includes.
    pub last_vote: i64,
    pub view: LeaderboardView,
    /// Contender ids on the board, in the fit's index order.
    ids: Vec<i64>,
    intervals: Vec<Interval>,
    pairs: Vec<Vec<usize>>,
}

/// Fitted leaderboards by arena and style control, and a lock per key so that a burst of readers
/// after a vote fits once.
#[derive(Debug, Default)]
pub struct BoardCache {
    fitted: Mutex<HashMap<(ArenaKind, bool), Arc<Fitted>>>,
    fitting: tokio::sync::Mutex<()>,
}

impl BoardCache {
    pub fn get(&self, arena: ArenaKind, style: bool, last_vote: i64) -> Option<Arc<Fitted>> {
        let fitted = self.fitted.lock().unwrap_or_else(|p| p.into_inner());
        fitted
            .get(&(arena, style))
            .filter(|f| f.last_vote == last_vote)
            .cloned()
    }

    /// The newest fit without style control, whatever votes it includes (for dealing).
    pub fn latest(&self, arena: ArenaKind) -> Option<Arc<Fitted>> {
        let fitted = self.fitted.lock().unwrap_or_else(|p| p.into_inner());
        fitted.get(&(arena, false)).cloned()
    }

    pub fn put(&self, arena: ArenaKind, style: bool, fit: Arc<Fitted>) {
        let mut fitted = self.fitted.lock().unwrap_or_else(|p| p.into_inner());
        fitted.insert((arena, style), fit);
    }

    /// Held while fitting, so concurrent readers wait for one fit instead of each running one.
    pub async fn fitting(&self) -> tokio::sync::MutexGuard<'_, ()> {
        self.fitting.lock().await
    }
}

fn outcome(choice: VoteChoice) -> Outcome {
    match choice {
        VoteChoice::A => Outcome::AWins,
        VoteChoice::B => Outcome::BWins,
        VoteChoice::Tie => Outcome::Tie,
        VoteChoice::BothBad => Outcome::BothBad,
    }
}

/// Fits the counted votes. Every contender with a counted vote is on the board; an arena without
/// counted votes has an empty one.
pub fn fit(
    arena: ArenaKind,
    style_control: bool,
    last_vote: i64,
    votes: &[VoteRow],
    contenders: &[StoredContender],
    rounds: usize,
) -> Result<Fitted, RatingError> {
    let counted: Vec<&VoteRow> = votes.iter().filter(|v| v.counted).collect();
    let mut ids: Vec<i64> = counted.iter().flat_map(|v| v.contenders).collect();
    ids.sort_unstable();
    ids.dedup();
    let index: HashMap<i64, usize> = ids.iter().enumerate().map(|(i, &id)| (id, i)).collect();
    let names: Vec<String> = ids
        .iter()
        .map(|id| {
            contenders
                .iter()
                .find(|c| c.id == *id)
                .map_or_else(|| format!("contender {id}"), |c| c.name.clone())
        })
        .collect();
    let ratings_votes: Vec<Vote> = counted
        .iter()
        .map(|v| Vote {
            a: index[&v.contenders[0]],
            b: index[&v.contenders[1]],
            outcome: outcome(v.choice),
            a_len: Some(v.lengths[0]),
            b_len: Some(v.lengths[1]),
        })
        .collect();
    let excluded_votes = votes.len() - counted.len();
    let empty = |ids: Vec<i64>| Fitted {
        last_vote,
        view: LeaderboardView {
            arena,
            rows: Vec::new(),
            counted_votes: 0,
            excluded_votes,
            style_control,
            style_coefficient: None,
            confidence: CONFIDENCE,
            contenders: Vec::new(),
            win_rates: Vec::new(),
        },
        ids,
        intervals: Vec::new(),
        pairs: Vec::new(),
    };
    if ratings_votes.is_empty() {
        return Ok(empty(Vec::new()));
    }
    let board = leaderboard(
        ids.len(),
        &ratings_votes,
        FitOptions {
            style_control,
            l2: PRIOR_L2,
            ..FitOptions::default()
        },
        BootstrapOptions {
            rounds,
            confidence: CONFIDENCE,
            // Reproducible for a given set of votes.
            seed: last_vote as u64,
        },
    )?;
    let mut intervals = vec![
        Interval {
            lower: 0.0,
            upper: 0.0
        };
        ids.len()
    ];
    for row in &board.rows {
        intervals[row.contender] = row.interval;
    }
    let provisional: Vec<bool> = {
        let mut votes_of = vec![0; ids.len()];
        for row in &board.rows {
            votes_of[row.contender] = row.votes;
        }
        votes_of.iter().map(|&v| v < PROVISIONAL_VOTES).collect()
    };
    let for_ranks: Vec<Interval> = intervals
        .iter()
        .zip(&provisional)
        .map(|(&i, &p)| {
            if p {
                Interval {
                    lower: f64::NEG_INFINITY,
                    upper: f64::INFINITY,
                }
            } else {
                i
            }
        })
        .collect();
    let ranks = rank_ranges(&for_ranks);
    Ok(Fitted {
        last_vote,
        view: LeaderboardView {
            arena,
            rows: board
                .rows
                .iter()
                .map(|r| LeaderboardEntry {
                    rank_best: ranks[r.contender].0,
                    rank_worst: ranks[r.contender].1,
                    provisional: provisional[r.contender],
                    contender: names[r.contender].clone(),
                    rating: r.rating,
                    lower: r.interval.lower,
                    upper: r.interval.upper,
                    votes: r.votes,
                })
                .collect(),
            counted_votes: ratings_votes.len(),
            excluded_votes,
            style_control,
            style_coefficient: board.style_coefficient,
            confidence: CONFIDENCE,
            contenders: names,
            win_rates: board.win_rates,
        },
        pairs: pair_counts(ids.len(), &ratings_votes),
        ids,
        intervals,
    })
}

/// The two contenders (ids) of the next battle, in the order shown (A, B): a pair whose order the
/// board leaves uncertain is favoured, a contender not yet on the board counts as wholly
/// uncertain, and which of the two is A is a coin flip (against position bias).
pub fn deal(
    contenders: &[StoredContender],
    board: Option<&Fitted>,
    rng: &mut impl Rng,
) -> Option<[i64; 2]> {
    let ids: Vec<i64> = contenders.iter().map(|c| c.id).collect();
    let n = ids.len();
    let mut intervals = vec![
        Interval {
            lower: 0.0,
            upper: 0.0
        };
        n
    ];
    let mut pairs = vec![vec![0; n]; n];
    if let Some(board) = board {
        let position: HashMap<i64, usize> =
            ids.iter().enumerate().map(|(i, &id)| (id, i)).collect();
        for (bi, id) in board.ids.iter().enumerate() {
            let Some(&i) = position.get(id) else { continue };
            intervals[i] = board.intervals[bi];
            for (bj, other) in board.ids.iter().enumerate() {
                if let Some(&j) = position.get(other) {
                    pairs[i][j] = board.pairs[bi][bj];
                }
            }
        }
    }
    let (i, j) = next_pair(&intervals, &pairs, rng)?;
    Some(if rng.random::<bool>() {
        [ids[i], ids[j]]
    } else {
        [ids[j], ids[i]]
    })
}

#[cfg(test)]
mod tests {
    use lachesis_shared::arena::ContenderPolicy;
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    use super::*;

    fn contender(id: i64) -> StoredContender {
        StoredContender {
            id,
            name: format!("c{id}"),
            policy: ContenderPolicy::Embedded {
                temperature: 0.0,
                system: None,
                adapter: None,
            },
            reveals: Vec::new(),
            votes: 0,
        }
    }

    fn vote(id: i64, a: i64, b: i64, choice: VoteChoice, counted: bool) -> VoteRow {
        VoteRow {
            id,
            contenders: [a, b],
            choice,
            lengths: [10.0, 12.0],
            counted,
        }
    }

    #[test]
    fn excluded_votes_are_published_counts_but_not_fitted() {
        let contenders: Vec<_> = [3, 7, 9].into_iter().map(contender).collect();
        let mut votes: Vec<VoteRow> = (0..12)
            .map(|k| vote(k, 3, 7, VoteChoice::A, true))
            .collect();
        votes.push(vote(12, 7, 3, VoteChoice::A, true));
        // Contender 9 only has an excluded vote: it is not rated on that.
        votes.push(vote(13, 9, 3, VoteChoice::A, false));
        let fitted = fit(ArenaKind::Catbot, false, 13, &votes, &contenders, 50).unwrap();
        let view = &fitted.view;
        assert_eq!((view.counted_votes, view.excluded_votes), (13, 1));
        assert_eq!(view.contenders, vec!["c3", "c7"]);
        assert_eq!(view.rows[0].contender, "c3");
        assert!(view.rows[0].rating > view.rows[1].rating);
        assert_eq!(view.win_rates[0][1], Some(12.0 / 13.0));
        let none = fit(ArenaKind::Catbot, true, 0, &[], &contenders, 50).unwrap();
        assert!(none.view.rows.is_empty());
    }

    #[test]
    fn one_vote_moves_a_plausible_distance_and_claims_no_rank() {
        let contenders: Vec<_> = [1, 2].into_iter().map(contender).collect();
        let one = fit(
            ArenaKind::Catbot,
            false,
            1,
            &[vote(1, 1, 2, VoteChoice::A, true)],
            &contenders,
            50,
        )
        .unwrap();
        let rows = &one.view.rows;
        let gap = rows[0].rating - rows[1].rating;
        // The prior's mode for one win: θ solves 1 - σ(2θ) = θ, θ ≈ 0.34: a gap of about 0.68
        // log-odds, 118 points.
        assert!(
            gap > 50.0 && gap < 150.0,
            "one vote moved them {gap} points"
        );
        for row in rows {
            assert!(row.provisional);
            assert_eq!((row.rank_best, row.rank_worst), (1, 2), "{row:?}");
        }
        // Many lopsided votes: ranked, and separated.
        let votes: Vec<VoteRow> = (0..40)
            .map(|k| {
                vote(
                    k,
                    1,
                    2,
                    if k % 10 == 0 {
                        VoteChoice::B
                    } else {
                        VoteChoice::A
                    },
                    true,
                )
            })
            .collect();
        let many = fit(ArenaKind::Catbot, false, 40, &votes, &contenders, 200).unwrap();
        let ranks: Vec<(usize, usize, bool)> = many
            .view
            .rows
            .iter()
            .map(|r| (r.rank_best, r.rank_worst, r.provisional))
            .collect();
        assert_eq!(
            ranks,
            [(1, 1, false), (2, 2, false)],
            "{:?}",
            many.view.rows
        );
    }

    #[test]
    fn dealing_pairs_two_distinct_contenders_on_both_sides() {
        let contenders: Vec<_> = [1, 2, 3].into_iter().map(contender).collect();
        let mut rng = StdRng::seed_from_u64(4);
        let mut first_seen = std::collections::HashSet::new();
        for _ in 0..200 {
            let [a, b] = deal(&contenders, None, &mut rng).unwrap();
            assert_ne!(a, b);
            first_seen.insert(a);
        }
        assert_eq!(first_seen.len(), 3, "every contender is dealt as A");
        assert!(deal(&contenders[..1], None, &mut rng).is_none());
    }

    #[test]
    fn dealing_favours_the_pair_the_board_cannot_order() {
        let contenders: Vec<_> = [1, 2, 3].into_iter().map(contender).collect();
        // 1 and 2 are close; 3 is far below both and well measured.
        let mut votes = Vec::new();
        let mut id = 0;
        for (a, b, choice, n) in [
            (1, 2, VoteChoice::A, 20),
            (2, 1, VoteChoice::A, 20),
            (1, 3, VoteChoice::A, 60),
            (2, 3, VoteChoice::A, 60),
        ] {
            for _ in 0..n {
                id += 1;
                votes.push(vote(id, a, b, choice, true));
            }
        }
        let board = fit(ArenaKind::Catbot, false, id, &votes, &contenders, 100).unwrap();
        let mut rng = StdRng::seed_from_u64(9);
        let close = (0..400)
            .filter(|_| {
                let mut pair = deal(&contenders, Some(&board), &mut rng).unwrap();
                pair.sort();
                pair == [1, 2]
            })
            .count();
        assert!(
            close > 200,
            "the uncertain pair was dealt {close} times of 400"
        );
    }
}
