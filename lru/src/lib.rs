//! `ringscan-lru`: the one least-recently-used map bounded in bytes that every cache of
//! ringscan is built on: the executor's plan and result caches, the daemon's footer
//! cache and its column cache.
//!
//! Each entry carries a size the caller gives (and may grow, [`ByteLru::grow`]); the
//! total stays within the capacity, the least recently used entries leaving first. An
//! entry larger than the whole capacity is never kept. Recency is a doubly linked list
//! through the entries' slots, so lookups, inserts and evictions are `O(1)` and a hit
//! allocates nothing (it was a `BTreeMap` from tick to key: a clone of the key and two
//! tree operations per hit, 3% of the daemon's CPU in a point lookup).
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

use std::borrow::Borrow;
use std::collections::HashMap;
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

/// No slot: the end of the recency list.
const NIL: usize = usize::MAX;

#[derive(Debug)]
struct Node<K, V> {
    key: K,
    value: V,
    size_bytes: usize,
    /// The next older entry's slot (`NIL`: this is the least recently used).
    older: usize,
    /// The next newer entry's slot (`NIL`: this is the most recently used).
    newer: usize,
}

/// A map whose entries carry a size; the total stays within `capacity_bytes`, the least
/// recently used entries evicted first. See the crate documentation.
#[derive(Debug)]
pub struct ByteLru<K, V> {
    capacity_bytes: usize,
    used_bytes: usize,
    /// Each key's slot in `slots`. Hashed with foldhash, not SipHash: a point lookup
    /// hashes ~50 keys in the daemon's caches, SipHash was 5% of its instructions.
    map: HashMap<K, usize, foldhash::fast::RandomState>,
    /// The entries, linked from the least to the most recently used; a `None` slot is
    /// free (listed in `free`) for the next insert.
    slots: Vec<Option<Node<K, V>>>,
    free: Vec<usize>,
    /// The least recently used entry's slot, and the most recently used one's.
    oldest: usize,
    newest: usize,
    stats: LruStats,
}

impl<K: Hash + Eq + Clone, V> ByteLru<K, V> {
    /// An empty map holding at most `capacity_bytes` (0: holds nothing).
    pub fn new(capacity_bytes: usize) -> Self {
        Self {
            capacity_bytes,
            used_bytes: 0,
            map: HashMap::default(),
            slots: Vec::new(),
            free: Vec::new(),
            oldest: NIL,
            newest: NIL,
            stats: LruStats::default(),
        }
    }

    /// The capacity.
    pub fn capacity_bytes(&self) -> usize {
        self.capacity_bytes
    }

    /// The value of `key`, now the most recently used; counts a hit or a miss.
    pub fn get<Q>(&mut self, key: &Q) -> Option<&V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        // One hash of the key, and no allocation: a point lookup gets ~20 column chunks.
        let Some(&slot) = self.map.get(key) else {
            self.stats.misses += 1;
            return None;
        };
        self.stats.hits += 1;
        self.promote(slot);
        self.node(slot).map(|n| &n.value)
    }

    /// The value of `key` without counting or changing its recency.
    pub fn peek<Q>(&self, key: &Q) -> Option<&V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let slot = *self.map.get(key)?;
        self.node(slot).map(|n| &n.value)
    }

    /// The value of `key` to change in place, without counting or changing its recency
    /// (a change of its size goes through [`grow`](Self::grow)).
    pub fn peek_mut<Q>(&mut self, key: &Q) -> Option<&mut V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let slot = *self.map.get(key)?;
        self.node_mut(slot).map(|n| &mut n.value)
    }

    /// Marks `key` most recently used; false if absent.
    pub fn touch<Q>(&mut self, key: &Q) -> bool
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let Some(&slot) = self.map.get(key) else {
            return false;
        };
        self.promote(slot);
        true
    }

    /// Inserts (or replaces) `key` as the most recently used entry, evicting others to
    /// fit; false (and nothing kept) when `size_bytes` exceeds the whole capacity.
    pub fn insert(&mut self, key: K, value: V, size_bytes: usize) -> bool {
        self.remove(&key);
        if size_bytes > self.capacity_bytes || !self.make_room(size_bytes, None) {
            return false;
        }
        let node = Node {
            key: key.clone(),
            value,
            size_bytes,
            older: NIL,
            newer: NIL,
        };
        let slot = match self.free.pop() {
            Some(slot) => {
                self.slots[slot] = Some(node);
                slot
            }
            None => {
                self.slots.push(Some(node));
                self.slots.len() - 1
            }
        };
        self.link_newest(slot);
        self.used_bytes += size_bytes;
        self.map.insert(key, slot);
        self.check();
        true
    }

    /// Adds `extra_bytes` to the size of `key` (something was added to its value),
    /// evicting other entries to fit; false, with nothing changed, when `key` is absent
    /// or would not fit even alone.
    pub fn grow<Q>(&mut self, key: &Q, extra_bytes: usize) -> bool
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let Some(&slot) = self.map.get(key) else {
            return false;
        };
        let size = self.node(slot).map_or(0, |n| n.size_bytes);
        if size.saturating_add(extra_bytes) > self.capacity_bytes
            || !self.make_room(extra_bytes, Some(slot))
        {
            return false;
        }
        if let Some(node) = self.node_mut(slot) {
            node.size_bytes += extra_bytes;
            self.used_bytes += extra_bytes;
        }
        self.check();
        true
    }

    /// Removes `key`, returning its value.
    pub fn remove<Q>(&mut self, key: &Q) -> Option<V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let slot = self.map.remove(key)?;
        self.take(slot).map(|n| n.value)
    }

    /// Keeps only the entries for which `keep` is true; returns how many were removed
    /// (not counted as evictions: the caller knows why they went).
    pub fn retain(&mut self, mut keep: impl FnMut(&K, &V) -> bool) -> usize {
        let gone: Vec<usize> = (self.slots.iter().enumerate())
            .filter_map(|(slot, n)| n.as_ref().map(|n| (slot, n)))
            .filter(|(_, n)| !keep(&n.key, &n.value))
            .map(|(slot, _)| slot)
            .collect();
        for &slot in &gone {
            if let Some(node) = self.take(slot) {
                self.map.remove(&node.key);
            }
        }
        gone.len()
    }

    /// Drops every entry (the counters stay).
    pub fn clear(&mut self) {
        self.map.clear();
        self.slots.clear();
        self.free.clear();
        self.oldest = NIL;
        self.newest = NIL;
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
        self.slots.iter().flatten().map(|n| &n.value)
    }

    /// The keys and entries, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (&K, &V)> {
        self.slots.iter().flatten().map(|n| (&n.key, &n.value))
    }

    /// Counters and occupancy.
    pub fn stats(&self) -> LruStats {
        LruStats {
            entries: self.map.len(),
            bytes: self.used_bytes,
            ..self.stats
        }
    }

    fn node(&self, slot: usize) -> Option<&Node<K, V>> {
        self.slots.get(slot).and_then(Option::as_ref)
    }

    fn node_mut(&mut self, slot: usize) -> Option<&mut Node<K, V>> {
        self.slots.get_mut(slot).and_then(Option::as_mut)
    }

    /// Takes `slot` out of the recency list.
    fn unlink(&mut self, slot: usize) {
        let Some((older, newer)) = self.node(slot).map(|n| (n.older, n.newer)) else {
            return;
        };
        match self.node_mut(older) {
            Some(n) => n.newer = newer,
            None => self.oldest = newer,
        }
        match self.node_mut(newer) {
            Some(n) => n.older = older,
            None => self.newest = older,
        }
    }

    /// Puts `slot` (unlinked) at the most recently used end.
    fn link_newest(&mut self, slot: usize) {
        let previous = self.newest;
        if let Some(n) = self.node_mut(slot) {
            n.older = previous;
            n.newer = NIL;
        }
        match self.node_mut(previous) {
            Some(n) => n.newer = slot,
            None => self.oldest = slot,
        }
        self.newest = slot;
    }

    /// Makes `slot` the most recently used entry.
    fn promote(&mut self, slot: usize) {
        if self.newest != slot {
            self.unlink(slot);
            self.link_newest(slot);
        }
    }

    /// Unlinks and frees `slot` (its key is the caller's to drop from `map`).
    fn take(&mut self, slot: usize) -> Option<Node<K, V>> {
        self.unlink(slot);
        let node = self.slots.get_mut(slot)?.take()?;
        self.free.push(slot);
        self.used_bytes -= node.size_bytes;
        Some(node)
    }

    /// Evicts least recently used entries other than the one in `keep` until `extra`
    /// more bytes fit; whether they do.
    fn make_room(&mut self, extra: usize, keep: Option<usize>) -> bool {
        while self.used_bytes + extra > self.capacity_bytes {
            let mut victim = self.oldest;
            if Some(victim) == keep {
                victim = self.node(victim).map_or(NIL, |n| n.newer);
            }
            let Some(node) = self.take(victim) else {
                return false;
            };
            self.map.remove(&node.key);
            self.stats.evictions += 1;
        }
        true
    }

    fn check(&self) {
        debug_assert!(self.used_bytes <= self.capacity_bytes);
        debug_assert_eq!(self.map.len() + self.free.len(), self.slots.len());
    }

    /// The keys and sizes from the least to the most recently used, walking the list
    /// both ways and checking that the walks, `map` and the byte count agree.
    #[cfg(test)]
    fn oldest_first(&self) -> Vec<(&K, usize)> {
        let walk = |start: usize, step: fn(&Node<K, V>) -> usize| {
            let mut slots = Vec::new();
            let mut at = start;
            while let Some(n) = self.node(at) {
                slots.push(at);
                assert!(slots.len() <= self.map.len(), "a cycle in the list");
                at = step(n);
            }
            slots
        };
        let forward = walk(self.oldest, |n| n.newer);
        let mut backward = walk(self.newest, |n| n.older);
        backward.reverse();
        assert_eq!(forward, backward);
        assert_eq!(forward.len(), self.map.len());
        let out: Vec<(&K, usize)> = forward
            .iter()
            .filter_map(|&slot| self.node(slot))
            .map(|n| (&n.key, n.size_bytes))
            .collect();
        for (k, _) in &out {
            let found = self.map.get(*k).and_then(|&slot| self.node(slot));
            assert!(found.is_some_and(|n| n.key == **k), "map and list disagree");
        }
        assert_eq!(out.iter().map(|e| e.1).sum::<usize>(), self.used_bytes);
        out
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
                let got: Vec<(u8, usize)> =
                    lru.oldest_first().into_iter().map(|(k, s)| (*k, s)).collect();
                prop_assert_eq!(&got, &model);
                prop_assert!(lru.stats().bytes <= CAP);
            }
        }
    }
}
