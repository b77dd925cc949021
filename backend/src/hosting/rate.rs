//! Token buckets per key, in a table of bounded size: what one caller may do per minute (model
//! tokens, arena votes, arena battles). A key seen for the first time starts with a full bucket;
//! when the table is full, the least recently charged key is forgotten (it would start full again,
//! which only favours callers idle long enough to be forgotten).

use std::collections::{BTreeMap, HashMap};
use std::hash::Hash;
use std::sync::Mutex;
use std::time::Instant;

/// How fast a bucket refills, how much it holds, and how many keys the table remembers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rate {
    pub per_minute: u64,
    pub burst: u64,
    pub remember: usize,
}

/// A charge the bucket cannot cover yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limited {
    /// What the bucket holds now, rounded down.
    pub available: u64,
    /// Seconds until it holds the charge (at least 1).
    pub retry_after_secs: u64,
}

pub struct RateTable<K> {
    table: Mutex<Table<K>>,
}

impl<K> Default for RateTable<K> {
    fn default() -> Self {
        Self {
            table: Mutex::new(Table {
                buckets: HashMap::new(),
                by_last_use: BTreeMap::new(),
                uses: 0,
            }),
        }
    }
}

/// A count, not the keys: the configuration holding it may be logged.
impl<K> std::fmt::Debug for RateTable<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let keys = self.table.lock().map_or(0, |table| table.buckets.len());
        f.debug_struct("RateTable").field("keys", &keys).finish()
    }
}

struct Table<K> {
    buckets: HashMap<K, Bucket>,
    /// Keys by their last charge, oldest first: the ones forgotten when the table is full.
    by_last_use: BTreeMap<u64, K>,
    uses: u64,
}

struct Bucket {
    tokens: f64,
    refilled: Instant,
    last_use: u64,
}

impl Bucket {
    fn refill(&mut self, rate: &Rate, now: Instant) {
        let elapsed = now.saturating_duration_since(self.refilled).as_secs_f64();
        let per_second = rate.per_minute as f64 / 60.0;
        self.tokens = (self.tokens + elapsed * per_second).min(rate.burst as f64);
        self.refilled = now;
    }
}

impl<K: Hash + Eq + Clone> RateTable<K> {
    /// Takes `cost` from `key`'s bucket, or says when it will be there. A cost above the burst is
    /// never covered: callers check that first and say so in their own terms.
    pub fn charge(&self, key: &K, cost: u64, rate: &Rate, now: Instant) -> Result<(), Limited> {
        // The lock guards plain arithmetic; a panic under it cannot leave a bucket half-updated.
        let mut table = self.table.lock().unwrap_or_else(|p| p.into_inner());
        let table = &mut *table;
        table.uses += 1;
        let use_number = table.uses;
        if !table.buckets.contains_key(key) {
            while table.buckets.len() >= rate.remember.max(1) {
                let Some((_, oldest)) = table.by_last_use.pop_first() else {
                    break;
                };
                table.buckets.remove(&oldest);
            }
            table.buckets.insert(
                key.clone(),
                Bucket {
                    tokens: rate.burst as f64,
                    refilled: now,
                    last_use: use_number,
                },
            );
        }
        let Some(bucket) = table.buckets.get_mut(key) else {
            unreachable!("the key's bucket was just ensured")
        };
        table.by_last_use.remove(&bucket.last_use);
        bucket.last_use = use_number;
        table.by_last_use.insert(use_number, key.clone());
        bucket.refill(rate, now);
        let wanted = cost as f64;
        if bucket.tokens >= wanted {
            bucket.tokens -= wanted;
            return Ok(());
        }
        let per_second = (rate.per_minute as f64 / 60.0).max(f64::MIN_POSITIVE);
        let wait = ((wanted - bucket.tokens) / per_second)
            .ceil()
            .clamp(1.0, 1e9);
        Err(Limited {
            available: bucket.tokens.floor() as u64,
            retry_after_secs: wait as u64,
        })
    }

    /// Gives back what a charged request did not use, up to the burst.
    pub fn refund(&self, key: &K, tokens: u64, rate: &Rate, now: Instant) {
        let mut table = self.table.lock().unwrap_or_else(|p| p.into_inner());
        // A key forgotten meanwhile starts full anyway.
        if let Some(bucket) = table.buckets.get_mut(key) {
            bucket.refill(rate, now);
            bucket.tokens = (bucket.tokens + tokens as f64).min(rate.burst as f64);
        }
    }

    /// Keys remembered now.
    pub fn remembered(&self) -> usize {
        self.table
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .buckets
            .len()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    const RATE: Rate = Rate {
        per_minute: 60,
        burst: 3,
        remember: 2,
    };

    #[test]
    fn a_burst_passes_then_the_rate_holds() {
        let table = RateTable::default();
        let now = Instant::now();
        for _ in 0..3 {
            table.charge(&"a", 1, &RATE, now).unwrap();
        }
        assert_eq!(
            table.charge(&"a", 1, &RATE, now),
            Err(Limited {
                available: 0,
                retry_after_secs: 1
            })
        );
        assert!(table.charge(&"b", 1, &RATE, now).is_ok());
        assert!(
            table
                .charge(&"a", 1, &RATE, now + Duration::from_secs(1))
                .is_ok()
        );
    }

    #[test]
    fn a_zero_rate_never_refills_and_never_overflows_the_wait() {
        let rate = Rate {
            per_minute: 0,
            ..RATE
        };
        let table = RateTable::default();
        let now = Instant::now();
        table.charge(&1, 3, &rate, now).unwrap();
        let limited = table.charge(&1, 1, &rate, now).unwrap_err();
        assert!(limited.retry_after_secs >= 1);
    }

    #[test]
    fn the_least_recently_charged_key_is_forgotten() {
        let table = RateTable::default();
        let now = Instant::now();
        table.charge(&"a", 3, &RATE, now).unwrap();
        table.charge(&"b", 3, &RATE, now).unwrap();
        table.charge(&"c", 3, &RATE, now).unwrap();
        assert_eq!(table.remembered(), 2);
        // "a" was forgotten, so it starts full again; "c" is still empty.
        assert!(table.charge(&"a", 3, &RATE, now).is_ok());
        assert!(table.charge(&"c", 1, &RATE, now).is_err());
    }
}
