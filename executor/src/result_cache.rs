//! Finished query results, cached by plan and data version.
//!
//! The key is the optimized logical plan's text (two SQL texts that plan alike share
//! it) plus the data version the caller read: `(path, size, mtime_ns, (device, inode,
//! ctime_ns))` of every file scanned. Any change to a file changes the key, so a stale result is never served;
//! old versions age out of the LRU.

use std::path::PathBuf;
use std::sync::Arc;

use crate::result::QueryResult;
use ringscan_lru::{ByteLru, LruStats as CacheStats};

/// The files a result was computed from: `(path, size in bytes, mtime in ns, (device,
/// inode, ctime in ns))`. The last part tells a same-size rewrite that kept its mtime
/// (`cp -p`, `rsync -t`) from the file it replaced.
pub type DataVersion = Vec<(PathBuf, u64, i128, (u64, u64, i128))>;

/// A result cache key; build it once per query with [`ResultKey::from_parts`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ResultKey {
    plan: String,
    version: DataVersion,
}

impl ResultKey {
    /// The key of a plan's canonical text over data at `version` (the order of files is
    /// normalised).
    pub fn from_parts(plan_text: String, mut version: DataVersion) -> Self {
        version.sort();
        Self {
            plan: plan_text,
            version,
        }
    }

    fn size_bytes(&self) -> usize {
        self.plan.len()
            + self
                .version
                .iter()
                .map(|(p, ..)| p.as_os_str().len() + 64)
                .sum::<usize>()
    }
}

/// An LRU of query results bounded by their approximate memory size.
#[derive(Debug)]
pub struct ResultCache {
    lru: ByteLru<ResultKey, Arc<QueryResult>>,
    /// Hashes of keys offered once ([`Self::seen_before`]), at most [`SEEN_MAX`].
    seen: std::collections::HashSet<u64>,
}

/// Keys remembered by the doorkeeper before it starts over.
const SEEN_MAX: usize = 8192;

impl ResultCache {
    /// A cache holding at most `capacity_bytes` of results.
    pub fn new(capacity_bytes: usize) -> Self {
        Self {
            lru: ByteLru::new(capacity_bytes),
            seen: std::collections::HashSet::new(),
        }
    }

    /// The cached result for `key`, if any.
    pub fn get(&mut self, key: &ResultKey) -> Option<Arc<QueryResult>> {
        self.lru.get(key).cloned()
    }

    /// Caches `result` under `key` (not cached when larger than the whole budget).
    pub fn insert(&mut self, key: ResultKey, result: Arc<QueryResult>) {
        let size = result.approx_size_bytes() + key.size_bytes();
        self.lru.insert(key, result, size);
    }

    /// Whether `key` was offered before (and notes it): a doorkeeper for results that
    /// are worth keeping only when asked for twice. A prepared statement run with ever
    /// new values (point lookups) would otherwise copy every answer out of its ring to
    /// keep it; with it, a repeated binding is kept at its second run.
    pub fn seen_before(&mut self, key: &ResultKey) -> bool {
        use std::hash::{BuildHasher, RandomState};
        static HASHER: std::sync::OnceLock<RandomState> = std::sync::OnceLock::new();
        let hash = HASHER.get_or_init(RandomState::new).hash_one(key);
        if self.seen.contains(&hash) {
            return true;
        }
        if self.seen.len() >= SEEN_MAX {
            self.seen.clear();
        }
        self.seen.insert(hash);
        false
    }

    /// Hit, miss and occupancy counters.
    pub fn stats(&self) -> CacheStats {
        self.lru.stats()
    }

    /// Drops every result.
    pub fn clear(&mut self) {
        self.lru.clear();
        self.seen.clear();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::{Int64Array, RecordBatch};
    use arrow_schema::{DataType, Field, Schema};

    use super::*;

    const PLAN: &str = "Aggregate: groupBy=[[]], aggr=[[count(Int64(1))]]\n  TableScan: t";

    fn result() -> Arc<QueryResult> {
        let schema = Arc::new(Schema::new(vec![Field::new("n", DataType::Int64, false)]));
        let batch = RecordBatch::try_new(
            Arc::clone(&schema),
            vec![Arc::new(Int64Array::from(vec![42]))],
        )
        .unwrap();
        Arc::new(QueryResult {
            schema,
            batches: vec![batch],
            rows: 1,
        })
    }

    fn key(plan: &str, version: DataVersion) -> ResultKey {
        ResultKey::from_parts(plan.to_owned(), version)
    }

    #[test]
    fn the_doorkeeper_admits_a_key_at_its_second_offer() {
        let mut cache = ResultCache::new(1 << 20);
        let a = key("plan a", vec![]);
        let b = key("plan b", vec![]);
        assert!(!cache.seen_before(&a));
        assert!(!cache.seen_before(&b));
        assert!(cache.seen_before(&a));
        assert!(cache.seen_before(&b));
        // It forgets everything once full, then learns again.
        for i in 0..SEEN_MAX {
            cache.seen_before(&key(&format!("other {i}"), vec![]));
        }
        assert!(!cache.seen_before(&a));
        assert!(cache.seen_before(&a));
        cache.clear();
        assert!(!cache.seen_before(&a));
    }

    #[test]
    fn changed_version_never_serves_a_stale_result() {
        let v1 = vec![
            (PathBuf::from("/d/a.parquet"), 100, 1_000, (1, 2, 3)),
            (PathBuf::from("/d/b.parquet"), 7, 2_000, (1, 2, 3)),
        ];
        let mut cache = ResultCache::new(1 << 20);
        cache.insert(key(PLAN, v1.clone()), result());
        assert!(cache.get(&key(PLAN, v1.clone())).is_some());
        // The files in another order: the same version.
        let reordered: DataVersion = v1.iter().rev().cloned().collect();
        assert!(cache.get(&key(PLAN, reordered)).is_some());
        for changed in [
            vec![(PathBuf::from("/d/a.parquet"), 101, 1_000, (1, 2, 3))],
            vec![(PathBuf::from("/d/a.parquet"), 100, 1_001, (1, 2, 3))],
            vec![(PathBuf::from("/d/c.parquet"), 100, 1_000, (1, 2, 3))],
            // Rewritten in place, size and mtime kept (`cp -p`): its ctime moved.
            vec![
                (PathBuf::from("/d/a.parquet"), 100, 1_000, (1, 2, 4)),
                (PathBuf::from("/d/b.parquet"), 7, 2_000, (1, 2, 3)),
            ],
            // Replaced by another file of the same size and mtime.
            vec![
                (PathBuf::from("/d/a.parquet"), 100, 1_000, (1, 9, 3)),
                (PathBuf::from("/d/b.parquet"), 7, 2_000, (1, 2, 3)),
            ],
            vec![
                (PathBuf::from("/d/a.parquet"), 100, 1_000, (1, 2, 3)),
                (PathBuf::from("/d/b.parquet"), 7, 2_000, (1, 2, 3)),
                (PathBuf::from("/d/new.parquet"), 1, 1, (1, 2, 3)),
            ],
            vec![],
        ] {
            assert!(cache.get(&key(PLAN, changed)).is_none());
        }
        assert!(cache.get(&key("Aggregate: other", v1)).is_none());
        let s = cache.stats();
        assert_eq!((s.hits, s.entries), (2, 1));
    }

    #[test]
    fn bounded_by_bytes() {
        let r = result();
        let one = key(PLAN, vec![(PathBuf::from("/d/a.parquet"), 0, 0, (1, 2, 3))]);
        let entry = r.approx_size_bytes() + one.size_bytes();
        let mut cache = ResultCache::new(entry * 3);
        for i in 0..10 {
            let v = vec![(PathBuf::from("/d/a.parquet"), i, 0, (1, 2, 3))];
            cache.insert(key(PLAN, v), Arc::clone(&r));
        }
        let s = cache.stats();
        assert_eq!((s.entries, s.evictions), (3, 7));
        assert!(s.bytes <= entry * 3);
    }
}
