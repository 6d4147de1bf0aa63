//! Where a table's rows in memory are, by primary key, in 16 bytes a key.
//!
//! The index holds a 64-bit fingerprint of each encoded key and the id of its row, in one
//! open-addressing table with linear probing; not the key itself. A fingerprint says
//! only that a key *may* be the one sought: the caller checks each row whose fingerprint
//! matches against the key itself (its row in the memtable, or in a commit on its way),
//! so the answer stays exact. With 64-bit fingerprints two different keys of a table
//! share one about once in 2^64 / n² draws: the check is all but only paid on a real
//! duplicate.
//!
//! A map of the encoded keys themselves (`HashMap<Box<[u8]>, u64>`) took about 50 bytes
//! a key (100 MB for 2M keys: a 24-byte bucket doubled past its load, and a heap
//! allocation per key); this takes 16 bytes a slot at most 80% full, and frees its
//! memory when a flush empties it.

/// A slot: the fingerprint of a key and its row's id (`EMPTY`: a free slot).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Slot {
    fingerprint: u64,
    row: u64,
}

/// The row id of a free slot (no row gets it: ids count rows from 0).
const EMPTY: u64 = u64::MAX;

const FREE: Slot = Slot {
    fingerprint: 0,
    row: EMPTY,
};

/// At most this share of the slots is used (four in five): linear probing's searches
/// stay a few slots long.
const LOAD_NUM: usize = 4;
const LOAD_DEN: usize = 5;

/// How many keys ahead [`KeyIndex::insert_new_all`] loads the slot a key's search starts
/// at. In a table of millions each key's slot is a cache miss; loaded early, it is no
/// longer one when the key's turn comes, and the search's branches (which depend on
/// the slot) resolve at once. 2M keys into a fresh index, this VM: 340 ms one by one,
/// 150 ms so (a standalone copy of this module, rustc -O; 4 to 32 ahead all within 15%).
const LOOKAHEAD: usize = 8;

/// Fingerprints and row ids of a table's keys in memory (see the module's doc).
#[derive(Debug, Default)]
pub(crate) struct KeyIndex {
    slots: Vec<Slot>,
    len: usize,
}

impl KeyIndex {
    /// Keys held.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.len
    }

    /// Bytes of memory its slots take.
    #[cfg(test)]
    fn bytes(&self) -> usize {
        self.slots.capacity() * size_of::<Slot>()
    }

    /// The slot a fingerprint starts its search at: multiply-shift onto the slots (no
    /// modulo, any number of slots).
    fn home(&self, fingerprint: u64) -> usize {
        ((u128::from(fingerprint) * self.slots.len() as u128) >> 64) as usize
    }

    fn next(&self, i: usize) -> usize {
        if i + 1 == self.slots.len() {
            0
        } else {
            i + 1
        }
    }

    /// Makes room for `additional` more keys without another growth.
    pub(crate) fn reserve(&mut self, additional: usize) {
        let needed = self.len + additional;
        if needed * LOAD_DEN <= self.slots.len() * LOAD_NUM {
            return;
        }
        // One and a half times at least, so that single inserts grow it rarely; no
        // more than a large reserve needs (a COPY's keys are counted before).
        let slots = (needed * LOAD_DEN / LOAD_NUM + 1).max(self.slots.len() * 3 / 2);
        self.rebuild(slots, |_| true);
    }

    /// Moves the kept entries into a table of `slots` slots.
    fn rebuild(&mut self, slots: usize, keep: impl Fn(u64) -> bool) {
        let old = std::mem::take(&mut self.slots);
        self.slots = vec![FREE; slots];
        self.len = 0;
        for slot in old.into_iter().filter(|s| s.row != EMPTY && keep(s.row)) {
            self.put(slot);
        }
    }

    /// Puts `slot` in the first free slot of its search (room is known to be there).
    fn put(&mut self, slot: Slot) {
        // Matching nothing, the probe ends at the run's free slot.
        let (Ok(i) | Err(i)) = self.probe(slot.fingerprint, |_| false);
        self.slots[i] = slot;
        self.len += 1;
    }

    /// Walks `fingerprint`'s run from its home slot (the slots must not be empty):
    /// `Ok` with the first slot `matches` accepts, else `Err` with the free slot that
    /// ends the run (there is one: the load factor keeps slots free).
    fn probe(
        &self,
        fingerprint: u64,
        mut matches: impl FnMut(Slot) -> bool,
    ) -> Result<usize, usize> {
        let mut i = self.home(fingerprint);
        loop {
            let slot = self.slots[i];
            if slot.row == EMPTY {
                return Err(i);
            }
            if matches(slot) {
                return Ok(i);
            }
            i = self.next(i);
        }
    }

    /// Adds row `row` with a key of `fingerprint`, not checked against the others (the
    /// log's replay: its keys were checked when written).
    pub(crate) fn insert(&mut self, fingerprint: u64, row: u64) {
        assert_ne!(row, EMPTY, "row id {row} is the free slot's mark");
        self.reserve(1);
        self.put(Slot { fingerprint, row });
    }

    /// The row with a key of `fingerprint` for which `is_key` holds (it compares the
    /// row's key with the one sought), if there is one.
    pub(crate) fn find(
        &self,
        fingerprint: u64,
        mut is_key: impl FnMut(u64) -> bool,
    ) -> Option<u64> {
        if self.slots.is_empty() {
            return None;
        }
        let found = self.probe(fingerprint, |s| {
            s.fingerprint == fingerprint && is_key(s.row)
        });
        found.ok().map(|i| self.slots[i].row)
    }

    /// Adds row `row` unless a row for which `is_key` holds has the same fingerprint:
    /// then that row's id is the error (a duplicate key), and nothing changed.
    pub(crate) fn insert_new(
        &mut self,
        fingerprint: u64,
        row: u64,
        mut is_key: impl FnMut(u64) -> bool,
    ) -> Result<(), u64> {
        assert_ne!(row, EMPTY, "row id {row} is the free slot's mark");
        self.reserve(1);
        match self.probe(fingerprint, |s| {
            s.fingerprint == fingerprint && is_key(s.row)
        }) {
            Ok(found) => Err(self.slots[found].row),
            Err(free) => {
                self.slots[free] = Slot { fingerprint, row };
                self.len += 1;
                Ok(())
            }
        }
    }

    /// Adds rows `first_row`, `first_row + 1`, … with keys of `fingerprints`, in order,
    /// each as [`Self::insert_new`] (`is_key` gets the key's index too). At the first
    /// duplicate it stops with the key's index and the row that has it; the keys added
    /// before it stay (the caller takes them out).
    pub(crate) fn insert_new_all(
        &mut self,
        fingerprints: &[u64],
        first_row: u64,
        mut is_key: impl FnMut(usize, u64) -> bool,
    ) -> Result<(), (usize, u64)> {
        self.reserve(fingerprints.len());
        for (i, &fingerprint) in fingerprints.iter().enumerate() {
            if let Some(&ahead) = fingerprints.get(i + LOOKAHEAD) {
                // Only the load matters (see `LOOKAHEAD`): black_box keeps it.
                std::hint::black_box(self.slots[self.home(ahead)].row);
            }
            self.insert_new(fingerprint, first_row + i as u64, |row| is_key(i, row))
                .map_err(|row| (i, row))?;
        }
        Ok(())
    }

    /// Removes the entry of row `row` with `fingerprint`; whether there was one.
    pub(crate) fn remove(&mut self, fingerprint: u64, row: u64) -> bool {
        if self.slots.is_empty() {
            return false;
        }
        let Ok(i) = self.probe(fingerprint, |s| s == Slot { fingerprint, row }) else {
            return false;
        };
        // Backward shift: each later entry of the run that may live at the hole (its
        // search passes the hole before reaching it) moves there, so that no search
        // stops at a hole before its key.
        let n = self.slots.len();
        let mut hole = i;
        let mut j = self.next(i);
        while self.slots[j].row != EMPTY {
            let home = self.home(self.slots[j].fingerprint);
            if (hole + n - home) % n < (j + n - home) % n {
                self.slots[hole] = self.slots[j];
                hole = j;
            }
            j = self.next(j);
        }
        self.slots[hole] = FREE;
        self.len -= 1;
        true
    }

    /// Keeps the rows for which `keep` holds, in a table sized for them (a flush moves
    /// most rows out: their slots' memory goes back).
    pub(crate) fn retain(&mut self, keep: impl Fn(u64) -> bool) {
        let kept = self
            .slots
            .iter()
            .filter(|s| s.row != EMPTY && keep(s.row))
            .count();
        if kept == 0 {
            self.clear();
            return;
        }
        self.rebuild(kept * LOAD_DEN / LOAD_NUM + 1, keep);
    }

    /// Drops every entry and the slots' memory.
    pub(crate) fn clear(&mut self) {
        self.slots = Vec::new();
        self.len = 0;
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use proptest::prelude::*;

    use super::*;

    /// One step against the index and a naive map of the full keys.
    #[derive(Debug, Clone)]
    enum Op {
        /// Insert a key (checked), as a statement does.
        InsertNew(u16),
        /// Insert keys (checked) as one statement, stopping at the first duplicate.
        InsertNewAll(Vec<u16>),
        /// Insert a key unchecked (replay), only when it is new.
        Insert(u16),
        Remove(u16),
        /// Keep the rows with an id at least this far into the ids given so far.
        RetainFrom(u8),
        Clear,
        Reserve(u16),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            8 => any::<u16>().prop_map(|k| Op::InsertNew(k % 600)),
            2 => proptest::collection::vec(any::<u16>().prop_map(|k| k % 600), 0..30)
                .prop_map(Op::InsertNewAll),
            2 => any::<u16>().prop_map(|k| Op::Insert(k % 600)),
            4 => any::<u16>().prop_map(|k| Op::Remove(k % 600)),
            1 => any::<u8>().prop_map(Op::RetainFrom),
            1 => Just(Op::Clear),
            1 => any::<u16>().prop_map(|n| Op::Reserve(n % 300)),
        ]
    }

    /// Fingerprints from a few bits of the key, so that different keys share one often
    /// and the exact check is what tells them apart.
    fn fingerprint(key: u16, bits: u32) -> u64 {
        (u64::from(key) % (1u64 << bits)).wrapping_mul(0x9e37_79b9_7f4a_7c15)
    }

    fn run(ops: &[Op], bits: u32) -> Result<(), TestCaseError> {
        let mut index = KeyIndex::default();
        // The naive reference: key -> row, and row -> key (what "the row's key" is).
        let mut naive: HashMap<u16, u64> = HashMap::new();
        let mut key_of: HashMap<u64, u16> = HashMap::new();
        let mut next_row = 0u64;
        for op in ops {
            match *op {
                Op::InsertNew(k) => {
                    let row = next_row;
                    next_row += 1;
                    let got = index.insert_new(fingerprint(k, bits), row, |r| key_of[&r] == k);
                    match naive.get(&k) {
                        Some(&old) => prop_assert_eq!(got, Err(old)),
                        None => {
                            prop_assert_eq!(got, Ok(()));
                            naive.insert(k, row);
                            key_of.insert(row, k);
                        }
                    }
                }
                Op::InsertNewAll(ref keys) => {
                    let first = next_row;
                    next_row += keys.len() as u64;
                    let fingerprints: Vec<u64> =
                        keys.iter().map(|&k| fingerprint(k, bits)).collect();
                    for (i, &k) in keys.iter().enumerate() {
                        key_of.insert(first + i as u64, k);
                    }
                    let got =
                        index.insert_new_all(&fingerprints, first, |i, r| key_of[&r] == keys[i]);
                    // The naive answer: the first key already held, by the map or by an
                    // earlier key of the statement.
                    let mut expected = Ok(());
                    for (i, &k) in keys.iter().enumerate() {
                        let row = first + i as u64;
                        if let Some(&old) = naive.get(&k) {
                            expected = Err((i, old));
                            break;
                        }
                        naive.insert(k, row);
                    }
                    prop_assert_eq!(got, expected);
                    if let Err((i, _)) = got {
                        // As a refused statement is undone.
                        for (j, &k) in keys[..i].iter().enumerate() {
                            prop_assert!(index.remove(fingerprints[j], first + j as u64));
                            naive.remove(&k);
                        }
                    }
                }
                Op::Insert(k) if !naive.contains_key(&k) => {
                    let row = next_row;
                    next_row += 1;
                    index.insert(fingerprint(k, bits), row);
                    naive.insert(k, row);
                    key_of.insert(row, k);
                }
                Op::Insert(_) => {}
                Op::Remove(k) => {
                    // Either the row that has it, or one that does not (nothing to do).
                    let row = naive.get(&k).copied().unwrap_or(next_row + 7);
                    let removed = index.remove(fingerprint(k, bits), row);
                    prop_assert_eq!(removed, naive.remove(&k).is_some());
                }
                Op::RetainFrom(share) => {
                    let from = next_row * u64::from(share) / 255;
                    index.retain(|r| r >= from);
                    naive.retain(|_, r| *r >= from);
                }
                Op::Clear => {
                    index.clear();
                    naive.clear();
                }
                Op::Reserve(n) => index.reserve(usize::from(n)),
            }
            prop_assert_eq!(index.len(), naive.len());
            prop_assert!(
                index.len() * LOAD_DEN <= index.slots.len() * LOAD_NUM || index.len() == 0
            );
        }
        for k in 0..600u16 {
            let found = index.find(fingerprint(k, bits), |r| key_of[&r] == k);
            prop_assert_eq!(found, naive.get(&k).copied(), "key {}", k);
        }
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]

        /// Every answer equals a naive map's, with fingerprints shared by many keys
        /// (3 bits), by a few (8) and by none (16 bits cover the keys).
        #[test]
        fn answers_as_a_map_of_the_full_keys(ops in proptest::collection::vec(op(), 1..400)) {
            for bits in [3, 8, 16] {
                run(&ops, bits)?;
            }
        }
    }

    #[test]
    fn a_million_distinct_keys_take_at_most_20_bytes_each_and_a_retain_frees_them() {
        let mut index = KeyIndex::default();
        let n = 1_000_000u64;
        index.reserve(n as usize);
        let hash = |k: u64| k.wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(29) ^ k;
        for k in 0..n {
            assert_eq!(index.insert_new(hash(k), k, |r| r == k), Ok(()));
        }
        assert!(
            index.bytes() <= 20 * n as usize + 64,
            "{} bytes",
            index.bytes()
        );
        assert_eq!(index.insert_new(hash(5), n, |r| r == 5), Err(5));
        index.retain(|r| r >= n - 10);
        assert_eq!(index.len(), 10);
        assert!(index.bytes() < 1024, "{} bytes", index.bytes());
        assert_eq!(index.find(hash(n - 1), |r| r == n - 1), Some(n - 1));
        assert_eq!(index.find(hash(3), |r| r == 3), None);
    }
}
