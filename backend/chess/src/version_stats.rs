//! How one self-play version played, with how far its rates could move by chance.
//!
//! A version plays ten games or so, and moves within a game are not independent draws: one
//! sharp game can hold half a version's sacrifices. The intervals here treat each game as one
//! sample (the ratio estimator's standard error over clusters), so a change between versions can
//! be told from the spread between runs of the same policy.

/// Two-sided 95% normal quantile.
const Z_95: f64 = 1.959_964;

/// One game's counts for the agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct GameCounts {
    pub agent_moves: usize,
    pub sacrifices: usize,
    /// Sacrifices the judge found sound.
    pub sound_sacrifices: usize,
}

/// How one policy version played.
#[derive(Debug, Clone, PartialEq)]
pub struct VersionStats {
    pub version: i64,
    pub games: usize,
    pub agent_moves: usize,
    pub sacrifices: usize,
    /// Sacrifices the judge found sound.
    pub sound_sacrifices: usize,
    /// Centipawns an agent move gave up against Stockfish's best line, on average (0 when
    /// Stockfish did not judge).
    pub mean_loss_cp: f64,
    pub mean_aggression: f64,
    pub mean_reward: f64,
    pub wins: usize,
    pub draws: usize,
    pub losses: usize,
    /// What offering material added to a move's return in the update after these games (see
    /// [`crate::sacrifice_price::SacrificeTarget`]; negative a charge, 0 without a target).
    pub sacrifice_price: f64,
    /// Each game's counts, in the order played; they sum to the totals above.
    pub per_game: Vec<GameCounts>,
}

impl VersionStats {
    /// A version about to play, with nothing counted yet.
    pub fn new(version: i64, games: usize) -> Self {
        Self {
            version,
            games,
            agent_moves: 0,
            sacrifices: 0,
            sound_sacrifices: 0,
            mean_loss_cp: 0.0,
            mean_aggression: 0.0,
            mean_reward: 0.0,
            wins: 0,
            draws: 0,
            losses: 0,
            sacrifice_price: 0.0,
            per_game: Vec::with_capacity(games),
        }
    }

    /// Adds one finished game's counts to the totals.
    pub fn add_game(&mut self, counts: GameCounts) {
        self.agent_moves += counts.agent_moves;
        self.sacrifices += counts.sacrifices;
        self.sound_sacrifices += counts.sound_sacrifices;
        self.per_game.push(counts);
    }

    pub fn sacrifice_rate(&self) -> f64 {
        self.sacrifices as f64 / self.agent_moves.max(1) as f64
    }

    /// The share of sacrifices that were sound, in [0, 1] (0 when there were none).
    pub fn sound_share(&self) -> f64 {
        self.sound_sacrifices as f64 / self.sacrifices.max(1) as f64
    }

    /// Sound sacrifices per agent move: how often the version sacrifices and is right to.
    pub fn sound_sacrifice_rate(&self) -> f64 {
        self.sound_sacrifices as f64 / self.agent_moves.max(1) as f64
    }

    /// The sacrifice rate with its margin, `0.095 ± 0.044` (`± –` without one).
    pub fn rate_with_margin(&self) -> String {
        per_move_with_margin(self.sacrifice_rate(), self.sacrifice_rate_margin())
    }

    /// The sound share with its margin, in percent: `13 ± 15%` (`± –%` without one).
    pub fn sound_share_with_margin(&self) -> String {
        let margin = self
            .sound_share_margin()
            .map_or("–".into(), |m| format!("{:.0}", 100.0 * m));
        format!("{:.0} ± {margin}%", 100.0 * self.sound_share())
    }

    /// The sound sacrifices per move with their margin, `0.019 ± 0.010` (`± –` without one).
    pub fn sound_rate_with_margin(&self) -> String {
        per_move_with_margin(
            self.sound_sacrifice_rate(),
            self.margin(|g| (g.sound_sacrifices, g.agent_moves)),
        )
    }

    /// Half the width of the sacrifice rate's 95% interval, games as samples; `None` with fewer
    /// than two games or no moves.
    pub fn sacrifice_rate_margin(&self) -> Option<f64> {
        self.margin(|g| (g.sacrifices, g.agent_moves))
    }

    /// Half the width of the sound share's 95% interval, games as samples; `None` with fewer
    /// than two games or no sacrifices.
    pub fn sound_share_margin(&self) -> Option<f64> {
        self.margin(|g| (g.sound_sacrifices, g.sacrifices))
    }

    /// The margin of Σ numerator / Σ denominator over the games.
    fn margin(&self, ratio_of: impl Fn(&GameCounts) -> (usize, usize)) -> Option<f64> {
        let clusters: Vec<(f64, f64)> = self
            .per_game
            .iter()
            .map(|g| {
                let (y, x) = ratio_of(g);
                (y as f64, x as f64)
            })
            .collect();
        ratio_margin(&clusters)
    }
}

/// A per-move rate and its margin to three places, `0.095 ± 0.044` (`± –` without a margin).
fn per_move_with_margin(rate: f64, margin: Option<f64>) -> String {
    let margin = margin.map_or("–".into(), |m| format!("{m:.3}"));
    format!("{rate:.3} ± {margin}")
}

/// For the ratio R = Σy / Σx over clusters (y, x): Z_95 times its standard error,
/// sqrt(n / (n − 1) · Σ(y − R·x)²) / Σx.
fn ratio_margin(clusters: &[(f64, f64)]) -> Option<f64> {
    let n = clusters.len();
    let total_x: f64 = clusters.iter().map(|c| c.1).sum();
    if n < 2 || total_x <= 0.0 {
        return None;
    }
    let ratio = clusters.iter().map(|c| c.0).sum::<f64>() / total_x;
    let squares: f64 = clusters.iter().map(|(y, x)| (y - ratio * x).powi(2)).sum();
    let n = n as f64;
    Some(Z_95 * (n / (n - 1.0) * squares).sqrt() / total_x)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn version(games: &[(usize, usize, usize)]) -> VersionStats {
        let mut v = VersionStats::new(0, games.len());
        for &(agent_moves, sacrifices, sound_sacrifices) in games {
            v.add_game(GameCounts {
                agent_moves,
                sacrifices,
                sound_sacrifices,
            });
        }
        v
    }

    #[test]
    fn games_add_up_to_the_totals() {
        let v = version(&[(30, 4, 1), (25, 2, 2)]);
        assert_eq!(
            (v.agent_moves, v.sacrifices, v.sound_sacrifices),
            (55, 6, 3)
        );
        assert_eq!(v.per_game.len(), 2);
        assert!((v.sacrifice_rate() - 6.0 / 55.0).abs() < 1e-12);
        assert!((v.sound_share() - 0.5).abs() < 1e-12);
    }

    #[test]
    fn the_margin_is_the_clustered_standard_error_worked_by_hand() {
        // Two games of 10 moves with 1 and 3 sacrifices: R = 0.2, residuals −1 and +1, so the
        // standard error is sqrt(2 / 1 · 2) / 20 = 0.1.
        let v = version(&[(10, 1, 0), (10, 3, 0)]);
        let margin = v.sacrifice_rate_margin().unwrap();
        assert!((margin - 1.959_964 * 0.1).abs() < 1e-9, "{margin}");
        // Sound shares 1/1 and 0/3: R = 0.25, residuals 0.75 and −0.75, so sqrt(2 · 1.125) / 4.
        let v = version(&[(10, 1, 1), (10, 3, 0)]);
        let margin = v.sound_share_margin().unwrap();
        assert!(
            (margin - 1.959_964 * 2.25f64.sqrt() / 4.0).abs() < 1e-9,
            "{margin}"
        );
        // Sound sacrifices per move 1/10 and 0/10: R = 0.05, residuals 0.5 and −0.5, so
        // sqrt(2 · 0.5) / 20 = 0.05, and 1.96 · 0.05 = 0.098.
        assert!((v.sound_sacrifice_rate() - 0.05).abs() < 1e-12);
        assert_eq!(v.sound_rate_with_margin(), "0.050 ± 0.098");
    }

    #[test]
    fn games_alike_leave_no_spread_and_one_game_leaves_no_interval() {
        let alike = version(&[(20, 2, 1), (20, 2, 1), (20, 2, 1)]);
        assert_eq!(alike.sacrifice_rate_margin(), Some(0.0));
        assert_eq!(alike.sound_share_margin(), Some(0.0));
        let one = version(&[(20, 2, 1)]);
        assert_eq!(one.sacrifice_rate_margin(), None);
        assert_eq!(one.rate_with_margin(), "0.100 ± –");
        assert_eq!(one.sound_share_with_margin(), "50 ± –%");
        assert_eq!(one.sound_rate_with_margin(), "0.050 ± –");
        assert_eq!(alike.rate_with_margin(), "0.100 ± 0.000");
        let no_sacrifices = version(&[(20, 0, 0), (18, 0, 0)]);
        assert_eq!(no_sacrifices.sound_share_margin(), None);
        assert_eq!(no_sacrifices.sacrifice_rate_margin(), Some(0.0));
    }

    #[test]
    fn a_version_split_over_more_games_is_known_more_narrowly() {
        // The same two games four times over: 0.1 / sqrt(7) against 0.1 (the n / (n − 1)
        // correction is 8/7 instead of 2), so the margin narrows by sqrt(7).
        let few = version(&[(10, 1, 0), (10, 3, 0)]);
        let many = version(&[(10, 1, 0), (10, 3, 0)].repeat(4));
        let ratio = few.sacrifice_rate_margin().unwrap() / many.sacrifice_rate_margin().unwrap();
        assert!((ratio - 7f64.sqrt()).abs() < 1e-9, "{ratio}");
    }
}
