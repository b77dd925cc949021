//! A few seconds of memory for the two lookups every token-authenticated Atropos call makes (the
//! token, the run's owner), which otherwise cost about a fifth of ingest throughput. Changes made
//! through this instance (revoking a token, publishing a run) clear the entry at once; other
//! instances see them within [`TTL`].

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Mutex;
use std::time::{Duration, Instant};

pub const TTL: Duration = Duration::from_secs(5);
/// Entries kept at most; a full cache is emptied rather than grown.
const CAPACITY: usize = 10_000;

pub struct TtlCache<K, V> {
    entries: Mutex<HashMap<K, (Instant, V)>>,
}

impl<K: Eq + Hash, V: Clone> Default for TtlCache<K, V> {
    fn default() -> Self {
        Self {
            entries: Mutex::new(HashMap::new()),
        }
    }
}

impl<K: Eq + Hash, V: Clone> TtlCache<K, V> {
    pub fn get(&self, key: &K) -> Option<V> {
        let entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        entries
            .get(key)
            .filter(|(at, _)| at.elapsed() < TTL)
            .map(|(_, value)| value.clone())
    }

    pub fn put(&self, key: K, value: V) {
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        if entries.len() >= CAPACITY {
            entries.clear();
        }
        entries.insert(key, (Instant::now(), value));
    }

    pub fn clear(&self) {
        self.entries
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_are_kept_until_cleared() {
        let cache: TtlCache<&str, i32> = TtlCache::default();
        assert_eq!(cache.get(&"a"), None);
        cache.put("a", 1);
        assert_eq!(cache.get(&"a"), Some(1));
        cache.clear();
        assert_eq!(cache.get(&"a"), None);
    }
}
