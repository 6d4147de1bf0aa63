//! `ringscan-lru`: the one least-recently-used map bounded in bytes that every cache of
//! ringscan is built on: the executor's plan and result caches, the daemon's footer
//! cache and its column cache.
//!
//! Each entry carries a size the caller gives (and may grow, [`ByteLru::grow`]); the
//! total stays within the capacity, the least recently used entries leaving first. An
//! entry larger than the whole capacity is never kept. Recency is a tick counter with a
//! `BTreeMap` from tick to key, so lookups, inserts and evictions are `O(log n)`.
//!
//! ```
//! use ringscan_lru::ByteLru;
//!
//! let mut cache = ByteLru::new(100);
//! cache.insert("a", 1, 60);
//! cache.insert("b", 2, 60); // "a" leaves: 120 bytes do not fit in 100
//! assert_eq!(cache.get(&"a"), None);
//! assert_eq!(cache.get(&"b"), Some(&2));
//! assert_eq!(cache.stats().evictions, 1);
//! ```
#![forbid(unsafe_code)]

use std::collections::{BTreeMap, HashMap};
use std::hash::Hash;

/// Counters and occupancy of a [`ByteLru`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LruStats {
    /// Lookups ([`ByteLru::get`]) that found an entry.
    pub hits: u64,
    /// Lookups that did not.
    pub misses: u64,
    /// Entries dropped to stay within the capacity.
    pub evictions: u64,
    /// Entries held now.
    pub entries: usize,
    /// Their sizes, summed.
    pub bytes: usize,
}

#[derive(Debug)]
struct Entry<V> {
    value: V,
    size_bytes: usize,
    tick: u64,
}

/// A map whose entries carry a size; the total stays within `capacity_bytes`, the least
/// recently used entries evicted first. See the crate documentation.
#[derive(Debug)]
pub struct ByteLru<K, V> {
    capacity_bytes: usize,
    used_bytes: usize,
    tick: u64,
    map: HashMap<K, Entry<V>>,
    order: BTreeMap<u64, K>,
    stats: LruStats,
}

/// Makes the entry of `key` (whose tick is `entry_tick`) the most recently used: the
/// next tick, and its place in `order` moved there.
fn promote<K: Clone>(tick: &mut u64, order: &mut BTreeMap<u64, K>, entry_tick: &mut u64, key: &K) {
    *tick += 1;
    order.remove(entry_tick);
    *entry_tick = *tick;
    order.insert(*tick, key.clone());
}

impl<K: Hash + Eq + Clone, V> ByteLru<K, V> {
    /// An empty map holding at most `capacity_bytes` (0: holds nothing).
    pub fn new(capacity_bytes: usize) -> Self {
        Self {
            capacity_bytes,
            used_bytes: 0,
            tick: 0,
            map: HashMap::new(),
            order: BTreeMap::new(),
            stats: LruStats::default(),
        }
    }

    /// The capacity.
    pub fn capacity_bytes(&self) -> usize {
        self.capacity_bytes
    }

    /// The value of `key`, now the most recently used; counts a hit or a miss.
    pub fn get(&mut self, key: &K) -> Option<&V> {
        // One hash of the key, not three (a point lookup gets ~20 column chunks).
        let Some(entry) = self.map.get_mut(key) else {
            self.stats.misses += 1;
            return None;
        };
        self.stats.hits += 1;
        promote(&mut self.tick, &mut self.order, &mut entry.tick, key);
        Some(&entry.value)
    }

    /// The value of `key` without counting or changing its recency.
    pub fn peek(&self, key: &K) -> Option<&V> {
        self.map.get(key).map(|e| &e.value)
    }

    /// The value of `key` to change in place, without counting or changing its recency
    /// (a change of its size goes through [`grow`](Self::grow)).
    pub fn peek_mut(&mut self, key: &K) -> Option<&mut V> {
        self.map.get_mut(key).map(|e| &mut e.value)
    }

    /// Marks `key` most recently used; false if absent.
    pub fn touch(&mut self, key: &K) -> bool {
        let Some(entry) = self.map.get_mut(key) else {
            return false;
        };
        promote(&mut self.tick, &mut self.order, &mut entry.tick, key);
        true
    }

    /// Inserts (or replaces) `key` as the most recently used entry, evicting others to
    /// fit; false (and nothing kept) when `size_bytes` exceeds the whole capacity.
    pub fn insert(&mut self, key: K, value: V, size_bytes: usize) -> bool {
        self.remove(&key);
        if size_bytes > self.capacity_bytes || !self.make_room(size_bytes, None) {
            return false;
        }
        self.tick += 1;
        self.order.insert(self.tick, key.clone());
        self.used_bytes += size_bytes;
        self.map.insert(
            key,
            Entry {
                value,
                size_bytes,
                tick: self.tick,
            },
        );
        self.check();
        true
    }

    /// Adds `extra_bytes` to the size of `key` (something was added to its value),
    /// evicting other entries to fit; false, with nothing changed, when `key` is absent
    /// or would not fit even alone.
    pub fn grow(&mut self, key: &K, extra_bytes: usize) -> bool {
        let Some(size) = self.map.get(key).map(|e| e.size_bytes) else {
            return false;
        };
        if size.saturating_add(extra_bytes) > self.capacity_bytes
            || !self.make_room(extra_bytes, Some(key))
        {
            return false;
        }
        if let Some(entry) = self.map.get_mut(key) {
            entry.size_bytes += extra_bytes;
            self.used_bytes += extra_bytes;
        }
        self.check();
        true
    }

    /// Removes `key`, returning its value.
    pub fn remove(&mut self, key: &K) -> Option<V> {
        let entry = self.map.remove(key)?;
        self.order.remove(&entry.tick);
        self.used_bytes -= entry.size_bytes;
        Some(entry.value)
    }

    /// Keeps only the entries for which `keep` is true; returns how many were removed
    /// (not counted as evictions: the caller knows why they went).
    pub fn retain(&mut self, mut keep: impl FnMut(&K, &V) -> bool) -> usize {
        let gone: Vec<K> = self
            .map
            .iter()
            .filter(|(k, e)| !keep(k, &e.value))
            .map(|(k, _)| k.clone())
            .collect();
        for k in &gone {
            self.remove(k);
        }
        gone.len()
    }

    /// Drops every entry (the counters stay).
    pub fn clear(&mut self) {
        self.map.clear();
        self.order.clear();
        self.used_bytes = 0;
    }

    /// Entries held.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether none is held.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// The entries, in no particular order.
    pub fn values(&self) -> impl Iterator<Item = &V> {
        self.map.values().map(|e| &e.value)
    }

    /// The keys and entries, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (&K, &V)> {
        self.map.iter().map(|(k, e)| (k, &e.value))
    }

    /// Counters and occupancy.
    pub fn stats(&self) -> LruStats {
        LruStats {
            entries: self.map.len(),
            bytes: self.used_bytes,
            ..self.stats
        }
    }

    /// Evicts least recently used entries other than `keep` until `extra` more bytes
    /// fit; whether they do.
    fn make_room(&mut self, extra: usize, keep: Option<&K>) -> bool {
        while self.used_bytes + extra > self.capacity_bytes {
            let victim = self
                .order
                .iter()
                .find(|(_, k)| Some(*k) != keep)
                .map(|(t, k)| (*t, k.clone()));
            let Some((tick, victim)) = victim else {
                return false;
            };
            self.order.remove(&tick);
            if let Some(e) = self.map.remove(&victim) {
                self.used_bytes -= e.size_bytes;
                self.stats.evictions += 1;
            }
        }
        true
    }

    fn check(&self) {
        debug_assert!(self.used_bytes <= self.capacity_bytes);
        debug_assert_eq!(self.map.len(), self.order.len());
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn evicts_least_recently_used_by_bytes() {
        let mut c: ByteLru<&str, u32> = ByteLru::new(100);
        c.insert("a", 1, 40);
        c.insert("b", 2, 40);
        assert_eq!(c.get(&"a"), Some(&1)); // b is now the oldest
        c.insert("c", 3, 40);
        assert!(c.get(&"b").is_none());
        assert!(c.get(&"a").is_some() && c.get(&"c").is_some());
        let s = c.stats();
        assert_eq!(
            (s.hits, s.misses, s.evictions, s.entries, s.bytes),
            (3, 1, 1, 2, 80)
        );
        assert!(!c.insert("huge", 4, 101));
        assert!(c.get(&"huge").is_none());
        c.insert("a", 5, 10);
        assert_eq!(c.stats().bytes, 50);
        c.clear();
        assert_eq!(c.stats().entries, 0);
    }

    #[test]
    fn growing_an_entry_evicts_others_never_itself() {
        let mut c: ByteLru<u8, ()> = ByteLru::new(100);
        c.insert(1, (), 30);
        c.insert(2, (), 30);
        c.insert(3, (), 30);
        // 3 grows by 40: 1 (the oldest) leaves, 2 fits beside it.
        assert!(c.grow(&3, 40));
        assert_eq!(
            (c.peek(&1), c.peek(&2), c.stats().bytes),
            (None, Some(&()), 100)
        );
        // 3 grows by 30 more: 2 leaves, never 3 itself though it is the newest.
        assert!(c.grow(&3, 30));
        assert_eq!((c.peek(&2), c.stats().bytes), (None, 100));
        assert!(!c.grow(&3, 1), "grew past the capacity");
        assert_eq!(c.stats().bytes, 100);
        assert!(!c.grow(&9, 1));
        assert_eq!(c.retain(|k, _| *k != 3), 1);
        assert!(c.is_empty());
    }

    /// Operations of the model test.
    #[derive(Debug, Clone)]
    enum Op {
        Insert(u8, usize),
        Get(u8),
        Grow(u8, usize),
        Remove(u8),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (0u8..8, 0usize..60).prop_map(|(k, s)| Op::Insert(k, s)),
            (0u8..8).prop_map(Op::Get),
            (0u8..8, 0usize..40).prop_map(|(k, s)| Op::Grow(k, s)),
            (0u8..8).prop_map(Op::Remove),
        ]
    }

    proptest! {
        /// Against a naive model (a vector in recency order, evicting from the front):
        /// same entries, same sizes, after every operation.
        #[test]
        fn agrees_with_a_naive_model(ops in proptest::collection::vec(op(), 1..80)) {
            const CAP: usize = 100;
            let mut lru: ByteLru<u8, ()> = ByteLru::new(CAP);
            let mut model: Vec<(u8, usize)> = Vec::new(); // oldest first
            let evict = |model: &mut Vec<(u8, usize)>, extra: usize, keep: Option<u8>| {
                while model.iter().map(|e| e.1).sum::<usize>() + extra > CAP {
                    let Some(i) = model.iter().position(|e| Some(e.0) != keep) else {
                        return false;
                    };
                    model.remove(i);
                }
                true
            };
            for op in ops {
                match op {
                    Op::Insert(k, s) => {
                        lru.insert(k, (), s);
                        model.retain(|e| e.0 != k);
                        if s <= CAP && evict(&mut model, s, None) {
                            model.push((k, s));
                        }
                    }
                    Op::Get(k) => {
                        lru.get(&k);
                        if let Some(i) = model.iter().position(|e| e.0 == k) {
                            let e = model.remove(i);
                            model.push(e);
                        }
                    }
                    Op::Grow(k, s) => {
                        lru.grow(&k, s);
                        if let Some(i) = model.iter().position(|e| e.0 == k) {
                            if model[i].1 + s <= CAP && evict(&mut model, s, Some(k)) {
                                let i = model.iter().position(|e| e.0 == k).unwrap();
                                model[i].1 += s;
                            }
                        }
                    }
                    Op::Remove(k) => {
                        lru.remove(&k);
                        model.retain(|e| e.0 != k);
                    }
                }
                let mut got: Vec<(u8, usize)> = lru
                    .order
                    .values()
                    .map(|k| (*k, lru.map[k].size_bytes))
                    .collect();
                got.sort_by_key(|e| lru.map[&e.0].tick);
                prop_assert_eq!(&got, &model);
                prop_assert!(lru.stats().bytes <= CAP);
            }
        }
    }
}
