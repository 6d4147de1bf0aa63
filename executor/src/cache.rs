//! A least-recently-used cache bounded in bytes: the engine's plan cache (keyed by SQL
//! text) and result cache.

use std::collections::{BTreeMap, HashMap};
use std::hash::Hash;
use std::sync::Arc;

/// Hit and miss counters of a cache.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Lookups that found an entry.
    pub hits: u64,
    /// Lookups that did not.
    pub misses: u64,
    /// Entries dropped to stay under the byte budget.
    pub evictions: u64,
    /// Entries held now.
    pub entries: usize,
    /// Approximate bytes held now.
    pub bytes: usize,
}

#[derive(Debug)]
struct Entry<V> {
    value: Arc<V>,
    size_bytes: usize,
    last_used: u64,
}

/// An LRU map whose entries carry a caller-given size; the total stays under
/// `capacity_bytes` (an entry larger than the whole budget is not cached).
///
/// Recency is a tick counter; `order` maps ticks to keys, so both lookup and eviction
/// are `O(log n)`.
#[derive(Debug)]
pub struct ByteLru<K, V> {
    capacity_bytes: usize,
    used_bytes: usize,
    tick: u64,
    map: HashMap<K, Entry<V>>,
    order: BTreeMap<u64, K>,
    stats: CacheStats,
}

impl<K: Hash + Eq + Clone, V> ByteLru<K, V> {
    /// An empty cache holding at most `capacity_bytes`.
    pub fn new(capacity_bytes: usize) -> Self {
        Self {
            capacity_bytes,
            used_bytes: 0,
            tick: 0,
            map: HashMap::new(),
            order: BTreeMap::new(),
            stats: CacheStats::default(),
        }
    }

    /// The value for `key`, marking it most recently used; counts a hit or a miss.
    pub fn get(&mut self, key: &K) -> Option<Arc<V>> {
        self.tick += 1;
        let Some(entry) = self.map.get_mut(key) else {
            self.stats.misses += 1;
            return None;
        };
        self.stats.hits += 1;
        self.order.remove(&entry.last_used);
        entry.last_used = self.tick;
        self.order.insert(self.tick, key.clone());
        Some(entry.value.clone())
    }

    /// Inserts (or replaces) `key`, evicting least recently used entries to fit.
    pub fn insert(&mut self, key: K, value: Arc<V>, size_bytes: usize) {
        self.remove(&key);
        if size_bytes > self.capacity_bytes {
            return;
        }
        while self.used_bytes + size_bytes > self.capacity_bytes {
            let Some((_, oldest)) = self.order.pop_first() else {
                break;
            };
            if let Some(e) = self.map.remove(&oldest) {
                self.used_bytes -= e.size_bytes;
                self.stats.evictions += 1;
            }
        }
        self.tick += 1;
        self.order.insert(self.tick, key.clone());
        self.used_bytes += size_bytes;
        let entry = Entry {
            value,
            size_bytes,
            last_used: self.tick,
        };
        self.map.insert(key, entry);
        debug_assert!(self.used_bytes <= self.capacity_bytes);
        debug_assert_eq!(self.map.len(), self.order.len());
    }

    /// Removes `key`; true if it was present.
    pub fn remove(&mut self, key: &K) -> bool {
        match self.map.remove(key) {
            Some(e) => {
                self.order.remove(&e.last_used);
                self.used_bytes -= e.size_bytes;
                true
            }
            None => false,
        }
    }

    /// Drops every entry (counters are kept).
    pub fn clear(&mut self) {
        self.map.clear();
        self.order.clear();
        self.used_bytes = 0;
    }

    /// Counters and occupancy.
    pub fn stats(&self) -> CacheStats {
        CacheStats {
            entries: self.map.len(),
            bytes: self.used_bytes,
            ..self.stats
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evicts_least_recently_used_by_bytes() {
        let mut c: ByteLru<&str, u32> = ByteLru::new(100);
        c.insert("a", Arc::new(1), 40);
        c.insert("b", Arc::new(2), 40);
        assert_eq!(c.get(&"a").as_deref(), Some(&1)); // b is now the oldest
        c.insert("c", Arc::new(3), 40);
        assert!(c.get(&"b").is_none());
        assert!(c.get(&"a").is_some() && c.get(&"c").is_some());
        let s = c.stats();
        assert_eq!(
            (s.hits, s.misses, s.evictions, s.entries, s.bytes),
            (3, 1, 1, 2, 80)
        );
        c.insert("huge", Arc::new(4), 101);
        assert!(c.get(&"huge").is_none());
        c.insert("a", Arc::new(5), 10);
        assert_eq!(c.stats().bytes, 50);
        c.clear();
        assert_eq!(c.stats().entries, 0);
    }
}
