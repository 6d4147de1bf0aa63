//! A byte-bounded LRU cache of parsed Parquet footers.

use std::collections::HashMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::SystemTime;

use parquet::file::metadata::{
    FileMetaData, PageIndexPolicy, ParquetMetaData, ParquetMetaDataBuilder, ParquetMetaDataReader,
};

use super::derived::{Derived, DerivedCache};
use super::{guard_panic, ScanError};

/// Counters and occupancy of a [`MetadataCache`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Lookups answered from the cache.
    pub hits: u64,
    /// Lookups that parsed the footer (absent, stale, or lacking the page index).
    pub misses: u64,
    /// Entries dropped to stay within the byte budget.
    pub evictions: u64,
    /// Entries held.
    pub entries: usize,
    /// Their [`ParquetMetaData::memory_size`] total.
    pub bytes: usize,
}

#[derive(Debug)]
struct Entry {
    len: u64,
    mtime: Option<SystemTime>,
    /// Whether the page index was asked for (`PageIndexPolicy::Optional`) when parsing.
    page_index: bool,
    meta: Arc<ParquetMetaData>,
    bytes: usize,
    last_used: u64,
}

#[derive(Debug, Default)]
struct Inner {
    entries: HashMap<PathBuf, Entry>,
    used: usize,
    tick: u64,
    stats: CacheStats,
}

/// Parsed footers keyed by path and validated by (file size, mtime): a file rewritten in
/// place is parsed again. Bounded by the sum of `ParquetMetaData::memory_size()`; the
/// least recently used entries go first (eviction scans the entries, fine for the
/// thousands of files a daemon holds). Shared by reference across scans (`&self`).
///
/// Page indexes are loaded only when asked for (a scan with a predicate): an entry parsed
/// without them is replaced, and counted as a miss, the first time a predicate needs them.
#[derive(Debug)]
pub struct MetadataCache {
    capacity_bytes: usize,
    inner: Mutex<Inner>,
    derived: DerivedCache,
}

impl MetadataCache {
    /// An empty cache holding at most `capacity_bytes` of parsed metadata. A footer larger
    /// than that is parsed on every use and never cached.
    pub fn new(capacity_bytes: usize) -> Self {
        Self {
            capacity_bytes,
            inner: Mutex::new(Inner::default()),
            derived: DerivedCache::default(),
        }
    }

    /// The byte budget.
    pub fn capacity_bytes(&self) -> usize {
        self.capacity_bytes
    }

    /// Counters so far.
    pub fn stats(&self) -> CacheStats {
        self.lock().stats
    }

    /// The Arrow schema mapping and pruning column map of `meta` (a footer this cache
    /// returned for `path`), computed once per parsed footer.
    pub(crate) fn derived(
        &self,
        meta: &Arc<ParquetMetaData>,
        path: &Path,
    ) -> Result<Derived, ScanError> {
        self.derived.get(meta, path)
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock leaves consistent data: every update is a few
        // field writes with no call that can unwind in between.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The footer of `file` (opened from `path`), parsed or from the cache; with the page
    /// index (where the file has one) when `page_index` is set.
    pub fn get_or_load(
        &self,
        path: &Path,
        file: &File,
        page_index: bool,
    ) -> Result<Arc<ParquetMetaData>, ScanError> {
        let io = |source| ScanError::Io {
            file: path.to_path_buf(),
            source,
        };
        let stat = file.metadata().map_err(io)?;
        let (len, mtime) = (stat.len(), stat.modified().ok());
        {
            let mut inner = self.lock();
            inner.tick += 1;
            let tick = inner.tick;
            if let Some(e) = inner.entries.get_mut(path) {
                if e.len == len && e.mtime == mtime && (e.page_index || !page_index) {
                    e.last_used = tick;
                    let meta = Arc::clone(&e.meta);
                    inner.stats.hits += 1;
                    return Ok(meta);
                }
            }
            inner.stats.misses += 1;
        }
        let policy = if page_index {
            PageIndexPolicy::Optional
        } else {
            PageIndexPolicy::Skip
        };
        let meta = guard_panic(path, || {
            ParquetMetaDataReader::new()
                .with_page_index_policy(policy)
                .parse_and_finish(file)
                .map_err(|source| ScanError::Corrupt {
                    file: path.to_path_buf(),
                    source,
                })
        })?;
        let meta = Arc::new(with_true_row_count(meta));
        self.insert(path, len, mtime, page_index, &meta);
        Ok(meta)
    }

    fn insert(
        &self,
        path: &Path,
        len: u64,
        mtime: Option<SystemTime>,
        page_index: bool,
        meta: &Arc<ParquetMetaData>,
    ) {
        let bytes = meta.memory_size();
        let mut inner = self.lock();
        if let Some(old) = inner.entries.remove(path) {
            inner.used -= old.bytes;
        }
        if bytes <= self.capacity_bytes {
            while inner.used + bytes > self.capacity_bytes {
                let Some(victim) = inner
                    .entries
                    .iter()
                    .min_by_key(|(_, e)| e.last_used)
                    .map(|(p, _)| p.clone())
                else {
                    break;
                };
                if let Some(e) = inner.entries.remove(&victim) {
                    inner.used -= e.bytes;
                    inner.stats.evictions += 1;
                }
            }
            let last_used = inner.tick;
            inner.used += bytes;
            inner.entries.insert(
                path.to_path_buf(),
                Entry {
                    len,
                    mtime,
                    page_index,
                    meta: Arc::clone(meta),
                    bytes,
                    last_used,
                },
            );
        }
        inner.stats.entries = inner.entries.len();
        inner.stats.bytes = inner.used;
    }
}

/// `meta` with the file's row count equal to the sum of its row groups'.
///
/// Some writers (parquet-rs 0.3, for one: parquet-testing's
/// `repeated_no_annotation.parquet`) leave the footer's `num_rows` at 0 while the row
/// groups hold rows; parquet's reader caps its batch size at the footer's count, so it
/// would return no row at all. DuckDB and pyarrow trust the row groups, and so do we.
fn with_true_row_count(meta: ParquetMetaData) -> ParquetMetaData {
    let groups: Option<i64> = meta
        .row_groups()
        .iter()
        .try_fold(0i64, |sum, rg| sum.checked_add(rg.num_rows().max(0)));
    let Some(rows) = groups else {
        return meta;
    };
    let file = meta.file_metadata();
    if file.num_rows() == rows {
        return meta;
    }
    let fixed = FileMetaData::new(
        file.version(),
        rows,
        file.created_by().map(str::to_owned),
        file.key_value_metadata().cloned(),
        file.schema_descr_ptr(),
        file.column_orders().cloned(),
    );
    let mut builder = ParquetMetaDataBuilder::new_from_metadata(meta);
    let row_groups = builder.take_row_groups();
    let page_index = builder.take_page_index();
    ParquetMetaDataBuilder::new(fixed)
        .set_row_groups(row_groups)
        .set_page_index(page_index)
        .build()
}
