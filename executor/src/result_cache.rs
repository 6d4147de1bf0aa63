//! Finished query results, cached by plan and data version.
//!
//! The key is the physical plan's canonical text (its `Debug` rendering: the bound
//! expressions, types, pushed scan and operators; two SQL texts that plan alike share
//! it) plus the data version the caller read: `(path, size, mtime_ns)` of every file
//! scanned. Any change to a file changes the key, so a stale result is never served;
//! old versions age out of the LRU.

use std::path::PathBuf;
use std::sync::Arc;

use crate::cache::{ByteLru, CacheStats};
use crate::exec::QueryResult;
use crate::pushdown::PhysicalPlan;

/// The files a result was computed from: `(path, size in bytes, mtime in ns)`.
pub type DataVersion = Vec<(PathBuf, u64, i128)>;

/// A result cache key; build it once per query with [`ResultKey::new`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ResultKey {
    plan: String,
    version: DataVersion,
}

impl ResultKey {
    /// The key of `plan` over data at `version` (the order of files is normalised).
    pub fn new(plan: &PhysicalPlan, version: DataVersion) -> Self {
        Self::from_parts(format!("{plan:?}"), version)
    }

    /// A key from a plan's canonical text (e.g. a cached rendering) and a version.
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
                .map(|(p, _, _)| p.as_os_str().len() + 32)
                .sum::<usize>()
    }
}

/// An LRU of query results bounded by their approximate memory size.
#[derive(Debug)]
pub struct ResultCache {
    lru: ByteLru<ResultKey, QueryResult>,
}

impl ResultCache {
    /// A cache holding at most `capacity_bytes` of results.
    pub fn new(capacity_bytes: usize) -> Self {
        Self {
            lru: ByteLru::new(capacity_bytes),
        }
    }

    /// The cached result for `key`, if any.
    pub fn get(&mut self, key: &ResultKey) -> Option<Arc<QueryResult>> {
        self.lru.get(key)
    }

    /// Caches `result` under `key` (not cached when larger than the whole budget).
    pub fn insert(&mut self, key: ResultKey, result: Arc<QueryResult>) {
        let size = result.approx_size_bytes() + key.size_bytes();
        self.lru.insert(key, result, size);
    }

    /// Hit, miss and occupancy counters.
    pub fn stats(&self) -> CacheStats {
        self.lru.stats()
    }

    /// Drops every result.
    pub fn clear(&mut self) {
        self.lru.clear();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_schema::{DataType, Field, Schema};

    use super::*;
    use crate::{execute, plan_sql, scan_schema, ExecError, MemoryCatalog};

    fn plan(sql: &str) -> PhysicalPlan {
        let mut c = MemoryCatalog::default();
        c.insert(
            "t",
            Arc::new(Schema::new(vec![Field::new("a", DataType::Int64, true)])),
        );
        plan_sql(sql, &c).unwrap()
    }

    fn result(p: &PhysicalPlan) -> Arc<QueryResult> {
        let none: Vec<Result<arrow_array::RecordBatch, ExecError>> = vec![];
        Arc::new(execute(p, scan_schema(p), none).unwrap())
    }

    #[test]
    fn changed_version_never_serves_a_stale_result() {
        let p = plan("SELECT count(*) FROM t");
        let v1 = vec![(PathBuf::from("/d/a.parquet"), 100, 1_000)];
        let mut cache = ResultCache::new(1 << 20);
        cache.insert(ResultKey::new(&p, v1.clone()), result(&p));
        assert!(cache.get(&ResultKey::new(&p, v1.clone())).is_some());
        // Same plan from different SQL text: same key.
        let same = plan("SELECT count(*)\n  FROM t");
        assert!(cache.get(&ResultKey::new(&same, v1.clone())).is_some());
        for changed in [
            vec![(PathBuf::from("/d/a.parquet"), 101, 1_000)],
            vec![(PathBuf::from("/d/a.parquet"), 100, 1_001)],
            vec![(PathBuf::from("/d/b.parquet"), 100, 1_000)],
            vec![
                (PathBuf::from("/d/a.parquet"), 100, 1_000),
                (PathBuf::from("/d/new.parquet"), 1, 1),
            ],
            vec![],
        ] {
            assert!(cache.get(&ResultKey::new(&p, changed)).is_none());
        }
        let other = plan("SELECT count(a) FROM t");
        assert!(cache.get(&ResultKey::new(&other, v1)).is_none());
        let s = cache.stats();
        assert_eq!((s.hits, s.entries), (2, 1));
    }

    #[test]
    fn bounded_by_bytes() {
        let p = plan("SELECT count(*) FROM t");
        let r = result(&p);
        let key = ResultKey::new(&p, vec![(PathBuf::from("/d/a.parquet"), 0, 0)]);
        let mut cache = ResultCache::new((r.approx_size_bytes() + key.size_bytes()) * 3);
        for i in 0..10 {
            let v = vec![(PathBuf::from("/d/a.parquet"), i, 0)];
            cache.insert(ResultKey::new(&p, v), r.clone());
        }
        let s = cache.stats();
        assert_eq!((s.entries, s.evictions), (3, 7));
        assert!(s.bytes <= (r.approx_size_bytes() + key.size_bytes()) * 3);
    }
}
