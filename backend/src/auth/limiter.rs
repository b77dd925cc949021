//! Sign-in rate limiting: a sliding window of failures per username and per client address, kept
//! in memory (a restart forgets it; several instances each keep their own). Bounded: the oldest
//! keys are evicted when too many are tracked, so a flood of made-up usernames cannot grow it.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Failures allowed per key within [`WINDOW`].
const MAX_FAILURES: usize = 5;
const WINDOW: Duration = Duration::from_secs(60);
const MAX_KEYS: usize = 10_000;

#[derive(Default)]
pub struct LoginLimiter {
    failures: Mutex<HashMap<String, VecDeque<Instant>>>,
}

impl LoginLimiter {
    /// `Err(seconds to wait)` while any of `keys` has used up its failures.
    pub fn check(&self, keys: &[String]) -> Result<(), u64> {
        let now = Instant::now();
        let mut failures = self.failures.lock().unwrap_or_else(|p| p.into_inner());
        let mut wait = Duration::ZERO;
        for key in keys {
            if let Some(times) = failures.get_mut(key) {
                while times
                    .front()
                    .is_some_and(|t| now.duration_since(*t) > WINDOW)
                {
                    times.pop_front();
                }
                if times.len() >= MAX_FAILURES
                    && let Some(oldest) = times.front()
                {
                    wait = wait.max(WINDOW.saturating_sub(now.duration_since(*oldest)));
                }
            }
        }
        if wait.is_zero() {
            Ok(())
        } else {
            Err(wait.as_secs().max(1))
        }
    }

    pub fn record_failure(&self, keys: &[String]) {
        let now = Instant::now();
        let mut failures = self.failures.lock().unwrap_or_else(|p| p.into_inner());
        if failures.len() >= MAX_KEYS {
            failures.retain(|_, times| {
                times
                    .back()
                    .is_some_and(|t| now.duration_since(*t) <= WINDOW)
            });
        }
        if failures.len() >= MAX_KEYS {
            return;
        }
        for key in keys {
            let times = failures.entry(key.clone()).or_default();
            times.push_back(now);
            if times.len() > MAX_FAILURES {
                times.pop_front();
            }
        }
    }

    pub fn record_success(&self, keys: &[String]) {
        let mut failures = self.failures.lock().unwrap_or_else(|p| p.into_inner());
        for key in keys {
            failures.remove(key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn five_failures_lock_a_key_and_success_clears_it() {
        let limiter = LoginLimiter::default();
        let keys = vec!["user:alice".to_string()];
        for _ in 0..MAX_FAILURES {
            assert!(limiter.check(&keys).is_ok());
            limiter.record_failure(&keys);
        }
        let wait = limiter.check(&keys).unwrap_err();
        assert!((1..=60).contains(&wait));
        assert!(limiter.check(&["user:bob".to_string()]).is_ok());
        limiter.record_success(&keys);
        assert!(limiter.check(&keys).is_ok());
    }
}
