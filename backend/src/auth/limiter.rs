//! Sliding-window rate limits kept in memory (a restart forgets them; several instances each keep
//! their own): failed sign-ins per username and per client address, and sign-ups per client
//! address. Bounded: when too many keys are tracked, expired ones go first and then the least
//! recently active, so a flood of made-up keys can neither grow the map nor stop new events from
//! being counted.

use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Failed sign-ins allowed per key within a minute.
const SIGN_IN_FAILURES: usize = 5;
const SIGN_IN_WINDOW: Duration = Duration::from_secs(60);
/// Keys tracked at most by each limiter.
pub const MAX_KEYS: usize = 10_000;

#[derive(Debug)]
pub struct WindowLimiter {
    /// Events allowed per key within `window`.
    max_events: usize,
    window: Duration,
    max_keys: usize,
    events: Mutex<HashMap<String, VecDeque<Instant>>>,
}

impl WindowLimiter {
    pub fn new(max_events: usize, window: Duration, max_keys: usize) -> Self {
        Self {
            max_events: max_events.max(1),
            window,
            max_keys: max_keys.max(1),
            events: Mutex::new(HashMap::new()),
        }
    }

    /// Five failed sign-ins a minute per key.
    pub fn sign_in() -> Self {
        Self::new(SIGN_IN_FAILURES, SIGN_IN_WINDOW, MAX_KEYS)
    }

    /// `Err(seconds to wait)` while any of `keys` has used up its events.
    pub fn check(&self, keys: &[String]) -> Result<(), u64> {
        let now = Instant::now();
        let mut events = self.events.lock().unwrap_or_else(|p| p.into_inner());
        let mut wait = Duration::ZERO;
        for key in keys {
            if let Some(times) = events.get_mut(key) {
                wait = wait.max(self.wait_for(times, now));
            }
        }
        if wait.is_zero() {
            Ok(())
        } else {
            Err(wait.as_secs().max(1))
        }
    }

    /// Counts one event against each of `keys`.
    pub fn record(&self, keys: &[String]) {
        let now = Instant::now();
        let mut events = self.events.lock().unwrap_or_else(|p| p.into_inner());
        for key in keys {
            self.push(&mut events, key, now);
        }
    }

    /// Counts one event against `key` if it has one left (checked and counted under one lock, so
    /// concurrent callers cannot overshoot); `Err(seconds to wait)` otherwise.
    pub fn acquire(&self, key: &str) -> Result<(), u64> {
        let now = Instant::now();
        let mut events = self.events.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(times) = events.get_mut(key) {
            let wait = self.wait_for(times, now);
            if !wait.is_zero() {
                return Err(wait.as_secs().max(1));
            }
        }
        self.push(&mut events, key, now);
        Ok(())
    }

    /// Clears `keys` (a successful sign-in).
    pub fn forget(&self, keys: &[String]) {
        let mut events = self.events.lock().unwrap_or_else(|p| p.into_inner());
        for key in keys {
            events.remove(key);
        }
    }

    /// How many keys are tracked.
    pub fn tracked_keys(&self) -> usize {
        self.events.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    /// Drops the key's events older than the window; the time until one frees up when it has
    /// none left.
    fn wait_for(&self, times: &mut VecDeque<Instant>, now: Instant) -> Duration {
        while times
            .front()
            .is_some_and(|t| now.duration_since(*t) >= self.window)
        {
            times.pop_front();
        }
        match times.front() {
            Some(oldest) if times.len() >= self.max_events => {
                self.window.saturating_sub(now.duration_since(*oldest))
            }
            _ => Duration::ZERO,
        }
    }

    fn push(&self, events: &mut HashMap<String, VecDeque<Instant>>, key: &str, now: Instant) {
        if !events.contains_key(key) {
            self.make_room(events, now);
        }
        let times = events.entry(key.to_string()).or_default();
        times.push_back(now);
        if times.len() > self.max_events {
            times.pop_front();
        }
    }

    /// Frees a slot for a new key: expired keys first; when all are live, the least recently
    /// active tenth (a batch, so a flood pays the sort once per many insertions).
    fn make_room(&self, events: &mut HashMap<String, VecDeque<Instant>>, now: Instant) {
        if events.len() < self.max_keys {
            return;
        }
        events.retain(|_, times| {
            times
                .back()
                .is_some_and(|t| now.duration_since(*t) < self.window)
        });
        if events.len() < self.max_keys {
            return;
        }
        let evict = (self.max_keys / 10).max(events.len() + 1 - self.max_keys);
        let mut by_last_event: Vec<(Instant, String)> = events
            .iter()
            .filter_map(|(key, times)| times.back().map(|t| (*t, key.clone())))
            .collect();
        if evict < by_last_event.len() {
            by_last_event.select_nth_unstable_by_key(evict, |(t, _)| *t);
        }
        for (_, key) in by_last_event.into_iter().take(evict) {
            events.remove(&key);
        }
    }
}

/// The key a client address is limited under: an IPv4 address itself, an IPv6 address by its
/// /64 (one subscriber commonly holds a whole /64, so single addresses would cost nothing).
pub fn client_key(ip: IpAddr) -> String {
    match ip {
        IpAddr::V4(v4) => v4.to_string(),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => v4.to_string(),
            None => {
                let s = v6.segments();
                format!("{:x}:{:x}:{:x}:{:x}::/64", s[0], s[1], s[2], s[3])
            }
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(names: &[&str]) -> Vec<String> {
        names.iter().map(|k| k.to_string()).collect()
    }

    #[test]
    fn five_failures_lock_a_key_and_success_clears_it() {
        let limiter = WindowLimiter::sign_in();
        let alice = keys(&["user:alice"]);
        for _ in 0..SIGN_IN_FAILURES {
            assert!(limiter.check(&alice).is_ok());
            limiter.record(&alice);
        }
        let wait = limiter.check(&alice).unwrap_err();
        assert!((1..=60).contains(&wait));
        assert!(limiter.check(&keys(&["user:bob"])).is_ok());
        limiter.forget(&alice);
        assert!(limiter.check(&alice).is_ok());
    }

    #[test]
    fn a_full_limiter_evicts_its_oldest_keys_and_keeps_counting() {
        let limiter = WindowLimiter::new(SIGN_IN_FAILURES, SIGN_IN_WINDOW, 100);
        // The attacker fills the limiter with live keys of its own...
        let early = keys(&["user:early"]);
        for _ in 0..SIGN_IN_FAILURES {
            limiter.record(&early);
        }
        for i in 0..150 {
            limiter.record(&[format!("user:filler{i}")]);
        }
        assert!(limiter.tracked_keys() <= 100);
        // ...the least recently active went to make room (the early key among them)...
        assert!(limiter.check(&early).is_ok());
        // ...and failures against a new key are still counted.
        let target = keys(&["user:target"]);
        for _ in 0..SIGN_IN_FAILURES {
            assert!(limiter.check(&target).is_ok());
            limiter.record(&target);
        }
        assert!(limiter.check(&target).is_err());
        assert!(limiter.tracked_keys() <= 100);
    }

    #[test]
    fn acquire_allows_the_limit_then_says_how_long_to_wait() {
        let limiter = WindowLimiter::new(3, Duration::from_secs(3600), MAX_KEYS);
        for _ in 0..3 {
            assert_eq!(limiter.acquire("203.0.113.7"), Ok(()));
        }
        let wait = limiter.acquire("203.0.113.7").unwrap_err();
        assert!((1..=3600).contains(&wait));
        assert_eq!(limiter.acquire("203.0.113.8"), Ok(()));
    }

    #[test]
    fn ipv6_clients_are_keyed_by_their_64_and_mapped_ipv4_as_ipv4() {
        let a: IpAddr = "2001:db8:1:2:aaaa::1".parse().unwrap();
        let b: IpAddr = "2001:db8:1:2:ffff:1:2:3".parse().unwrap();
        let other: IpAddr = "2001:db8:1:3::1".parse().unwrap();
        assert_eq!(client_key(a), client_key(b));
        assert_eq!(client_key(a), "2001:db8:1:2::/64");
        assert_ne!(client_key(a), client_key(other));
        let mapped: IpAddr = "::ffff:198.51.100.4".parse().unwrap();
        assert_eq!(client_key(mapped), "198.51.100.4");
    }
}
