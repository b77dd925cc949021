//! How long a failed long-running task waits before it is started again: exponential backoff,
//! capped, and forgotten once the task has run healthily for a while.
//!
//! It lives in this crate, the lowest one that restarts anything (the engine's worker thread, which
//! cannot depend on the server), so the server's async supervisor uses the very same rule rather
//! than a copy.

use std::time::Duration;

/// The restart pacing: `initial`, doubled after each consecutive failure up to `max`; a task that
/// ran at least `healthy_after` before failing starts again from `initial`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    pub initial: Duration,
    pub max: Duration,
    pub healthy_after: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Self {
            initial: Duration::from_secs(1),
            max: Duration::from_secs(60),
            healthy_after: Duration::from_secs(60),
        }
    }
}

impl Backoff {
    /// The wait before restart number `consecutive` of a streak (1 for the first failure).
    pub fn delay(&self, consecutive: u32) -> Duration {
        let doublings = consecutive.saturating_sub(1).min(31);
        self.initial
            .checked_mul(1u32 << doublings)
            .unwrap_or(self.max)
            .min(self.max)
    }
}

/// One task's failure streak under a [`Backoff`].
#[derive(Debug, Clone, Default)]
pub struct Streak {
    consecutive: u32,
}

impl Streak {
    /// Records a failure after the task ran for `ran_for` and returns the wait before its restart.
    /// A healthy run (at least `healthy_after`) ends the previous streak first.
    pub fn failed(&mut self, backoff: &Backoff, ran_for: Duration) -> Duration {
        if ran_for >= backoff.healthy_after {
            self.consecutive = 0;
        }
        self.consecutive = self.consecutive.saturating_add(1);
        backoff.delay(self.consecutive)
    }

    /// Failures since the last healthy run.
    pub fn consecutive(&self) -> u32 {
        self.consecutive
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_double_up_to_the_cap() {
        let backoff = Backoff::default();
        let delays: Vec<u64> = (1..=9).map(|n| backoff.delay(n).as_secs()).collect();
        assert_eq!(delays, [1, 2, 4, 8, 16, 32, 60, 60, 60]);
        assert_eq!(backoff.delay(u32::MAX), Duration::from_secs(60));
    }

    #[test]
    fn a_healthy_run_starts_a_new_streak() {
        let backoff = Backoff::default();
        let mut streak = Streak::default();
        let quick = Duration::from_millis(10);
        assert_eq!(streak.failed(&backoff, quick), Duration::from_secs(1));
        assert_eq!(streak.failed(&backoff, quick), Duration::from_secs(2));
        assert_eq!(streak.failed(&backoff, quick), Duration::from_secs(4));
        assert_eq!(
            streak.failed(&backoff, Duration::from_secs(60)),
            Duration::from_secs(1)
        );
        assert_eq!(streak.consecutive(), 1);
    }
}
