//! A byte-bounded LRU cache of parsed Parquet footers and of the page indexes loaded
//! for them, column by column.

use std::collections::HashMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use parquet::file::metadata::{
    FileMetaData, PageIndexPolicy, ParquetMetaData, ParquetMetaDataBuilder, ParquetMetaDataReader,
};

use ringscan_ipc::msg::FileVersion;

use super::columns::ColumnCache;
use super::derived::{Derived, DerivedCache};
use super::page_index::{self, IndexKey, IndexLoad, LoadedIndex, SparsePageIndex};
use super::source::ByteRangeSource;
use super::{guard_panic, ScanError};

/// Counters and occupancy of a [`MetadataCache`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Footer lookups answered from the cache.
    pub hits: u64,
    /// Footer lookups that parsed the footer (absent or stale).
    pub misses: u64,
    /// Files dropped (footer and page indexes together) to stay within the byte budget.
    pub evictions: u64,
    /// Files held.
    pub entries: usize,
    /// Their estimated memory: footers ([`ParquetMetaData::memory_size`]) and page
    /// indexes together.
    pub bytes: usize,
    /// Page indexes (one kind of one column chunk) answered from the cache.
    pub page_index_hits: u64,
    /// Page indexes not in the cache: read from the file (where it has them).
    pub page_index_misses: u64,
    /// Page indexes held (an absent index, remembered as such, counts too).
    pub page_indexes: usize,
}

#[derive(Debug)]
struct Entry {
    /// The file's size, mtime, device, inode and ctime when it was parsed.
    version: FileVersion,
    /// The footer, parsed without any page index.
    meta: Arc<ParquetMetaData>,
    /// Page indexes of this file version, loaded on demand.
    indexes: HashMap<IndexKey, LoadedIndex>,
    /// Footer and page indexes.
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

impl Inner {
    /// Evict least recently used entries other than `keep` until `extra` more bytes fit
    /// in `capacity`; whether they do.
    fn make_room(&mut self, capacity: usize, extra: usize, keep: Option<&Path>) -> bool {
        while self.used + extra > capacity {
            let Some(victim) = self
                .entries
                .iter()
                .filter(|(p, _)| Some(p.as_path()) != keep)
                .min_by_key(|(_, e)| e.last_used)
                .map(|(p, _)| p.clone())
            else {
                return false;
            };
            if let Some(e) = self.entries.remove(&victim) {
                self.used -= e.bytes;
                self.stats.evictions += 1;
            }
        }
        true
    }

    fn refresh_stats(&mut self) {
        self.stats.entries = self.entries.len();
        self.stats.bytes = self.used;
        self.stats.page_indexes = self.entries.values().map(|e| e.indexes.len()).sum();
    }
}

/// Parsed footers keyed by path and validated by the file's size, mtime, device, inode
/// and ctime ([`FileVersion`]): a file rewritten in place is parsed again, also when the
/// rewrite kept its size and mtime (`cp -p`, `rsync -t`: the ctime moves, and a file
/// replaced by rename has another inode). Bounded by the sum of `ParquetMetaData::memory_size()` and the
/// page indexes' estimated sizes; the least recently used files go first (eviction scans
/// the entries, fine for the thousands of files a daemon holds). Shared by reference
/// across scans (`&self`).
///
/// A footer is parsed once per file version, always without its page index. Page indexes
/// are loaded separately ([`page_indexes`](Self::page_indexes)), only the kinds, row
/// groups and columns a scan asks for, from their own byte ranges, and kept with the
/// footer: the key of one is (file version, row group, column, kind).
#[derive(Debug)]
pub struct MetadataCache {
    capacity_bytes: usize,
    inner: Mutex<Inner>,
    derived: DerivedCache,
    columns: ColumnCache,
}

impl MetadataCache {
    /// An empty cache holding at most `capacity_bytes` of parsed metadata. A footer larger
    /// than that is parsed on every use and never cached.
    pub fn new(capacity_bytes: usize) -> Self {
        Self {
            capacity_bytes,
            inner: Mutex::new(Inner::default()),
            derived: DerivedCache::default(),
            columns: ColumnCache::new(0),
        }
    }

    /// With a [`ColumnCache`] of `capacity_bytes` beside it (0, the default: none).
    pub fn with_column_cache(mut self, capacity_bytes: usize) -> Self {
        self.columns = ColumnCache::new(capacity_bytes);
        self
    }

    /// The decoded column chunks kept with these footers.
    pub fn columns(&self) -> &ColumnCache {
        &self.columns
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

    /// The footer of `file` (opened from `path`), parsed or from the cache, without page
    /// indexes (see [`page_indexes`](Self::page_indexes)).
    pub fn get_or_load(&self, path: &Path, file: &File) -> Result<Arc<ParquetMetaData>, ScanError> {
        let io = |source| ScanError::Io {
            file: path.to_path_buf(),
            source,
        };
        let stat = file.metadata().map_err(io)?;
        let version = FileVersion::from_metadata(PathBuf::new(), &stat);
        {
            let mut inner = self.lock();
            inner.tick += 1;
            let tick = inner.tick;
            if let Some(e) = inner.entries.get_mut(path) {
                if e.version.same_contents(&version) {
                    e.last_used = tick;
                    let meta = Arc::clone(&e.meta);
                    inner.stats.hits += 1;
                    return Ok(meta);
                }
            }
            inner.stats.misses += 1;
        }
        let meta = guard_panic(path, || {
            ParquetMetaDataReader::new()
                .with_page_index_policy(PageIndexPolicy::Skip)
                .parse_and_finish(file)
                .map_err(|source| ScanError::Corrupt {
                    file: path.to_path_buf(),
                    source,
                })
        })?;
        let meta = Arc::new(with_true_row_count(meta));
        self.insert(path, version, &meta);
        Ok(meta)
    }

    /// The page indexes `wanted` of the file whose footer is `meta` (as returned by
    /// [`get_or_load`](Self::get_or_load) for `path`), added to `into`: from the cache,
    /// or read from `source` (just their byte ranges) and decoded, then cached with the
    /// footer while it is cached and the budget allows. `load` counts what was read.
    pub(crate) fn page_indexes(
        &self,
        path: &Path,
        source: &dyn ByteRangeSource,
        meta: &Arc<ParquetMetaData>,
        wanted: &[IndexKey],
        into: &mut SparsePageIndex,
        load: &mut IndexLoad,
    ) -> Result<(), ScanError> {
        let mut missing = Vec::new();
        {
            let mut inner = self.lock();
            let entry = inner
                .entries
                .get(path)
                .filter(|e| Arc::ptr_eq(&e.meta, meta));
            let mut hits = 0;
            for &key in wanted {
                match entry.and_then(|e| e.indexes.get(&key)) {
                    Some(ix) => {
                        into.insert(key, ix);
                        hits += 1;
                    }
                    None => missing.push(key),
                }
            }
            inner.stats.page_index_hits += hits;
            inner.stats.page_index_misses += missing.len() as u64;
            load.cache_hits += hits;
        }
        if missing.is_empty() {
            return Ok(());
        }
        let loaded = page_index::load(path, source, meta, &missing, load)?;
        for (key, ix) in &loaded {
            into.insert(*key, ix);
        }

        let mut inner = self.lock();
        let Some(entry) = inner.entries.get(path) else {
            return Ok(());
        };
        if !Arc::ptr_eq(&entry.meta, meta) {
            return Ok(()); // Replaced by a newer version of the file meanwhile.
        }
        let fresh: Vec<(IndexKey, LoadedIndex)> = loaded
            .into_iter()
            .filter(|(k, _)| !entry.indexes.contains_key(k))
            .collect();
        let extra: usize = fresh.iter().map(|(_, ix)| ix.memory_bytes()).sum();
        if !inner.make_room(self.capacity_bytes, extra, Some(path)) {
            return Ok(()); // This file alone would exceed the budget: serve, don't keep.
        }
        let tick = inner.tick;
        if let Some(entry) = inner.entries.get_mut(path) {
            entry.indexes.extend(fresh);
            entry.bytes += extra;
            entry.last_used = tick;
            inner.used += extra;
        }
        inner.refresh_stats();
        Ok(())
    }

    fn insert(&self, path: &Path, version: FileVersion, meta: &Arc<ParquetMetaData>) {
        let bytes = meta.memory_size();
        let mut inner = self.lock();
        if let Some(old) = inner.entries.remove(path) {
            inner.used -= old.bytes;
        }
        if bytes <= self.capacity_bytes && inner.make_room(self.capacity_bytes, bytes, None) {
            let last_used = inner.tick;
            inner.used += bytes;
            inner.entries.insert(
                path.to_path_buf(),
                Entry {
                    version,
                    meta: Arc::clone(meta),
                    indexes: HashMap::new(),
                    bytes,
                    last_used,
                },
            );
        }
        inner.refresh_stats();
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
    let column_index = builder.take_column_index();
    let offset_index = builder.take_offset_index();
    ParquetMetaDataBuilder::new(fixed)
        .set_row_groups(row_groups)
        .set_column_index(column_index)
        .set_offset_index(offset_index)
        .build()
}
