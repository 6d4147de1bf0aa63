//! The column cache: decoded column chunks (one root column of one row group, as the
//! Arrow array the Parquet reader produced), kept in the daemon between scans.
//!
//! A long-running host answers the same hot files again and again; decompressing and
//! decoding their chunks each time was most of a selective query's daemon time (zstd
//! and its per-chunk contexts, dictionary decoding, row selection skips). This is the
//! counterpart of ClickHouse's uncompressed cache, one step further down: what it holds
//! is already Arrow.
//!
//! - **Correctness.** A chunk is valid only for the parsed footer it was decoded under:
//!   each file's entry holds a weak pointer to that footer, and a lookup must present
//!   the same one. The
//!   metadata cache reparses a footer whenever the file's size or modification time
//!   changes, so changed data is never served from here (a file's entries are dropped
//!   as soon as a scan sees its new footer).
//! - **Admission on second use.** The first scan that needs a chunk reads it as before,
//!   only its surviving pages; the second decodes the whole chunk once and keeps it; the
//!   third on are served from memory. A one-off scan (a full load) pays nothing, and
//!   chunks larger than an eighth of the budget are never admitted.
//! - **Bounded.** Least recently used chunks are evicted to stay within the byte budget
//!   (`get_array_memory_size` of what is held). A budget of 0 turns the cache off.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use arrow_array::{ArrayRef, RecordBatch, RecordBatchOptions};
use arrow_schema::{FieldRef, Schema, SchemaRef};
use parquet::file::metadata::ParquetMetaData;

/// Chunks remembered as used once (awaiting their second use), at most; the set is
/// cleared when it would grow past this.
const SEEN_MAX: usize = 1 << 16;
/// A chunk (all the roots of one read) larger than the budget divided by this is not
/// admitted: one big row group must not flush everything else.
const MAX_SHARE: usize = 8;

/// Counters and occupancy of a [`ColumnCache`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ColumnCacheStats {
    /// Reads (the columns one task needs of one row group) served from the cache.
    pub hits: u64,
    /// Reads that were not.
    pub misses: u64,
    /// Chunks decoded whole and kept (on their second use).
    pub admitted: u64,
    /// Chunks dropped to stay within the budget.
    pub evictions: u64,
    /// Chunks dropped because their file changed.
    pub invalidated: u64,
    /// Chunks held.
    pub entries: usize,
    /// Their memory.
    pub bytes: usize,
}

#[derive(Debug)]
struct Chunk {
    field: FieldRef,
    array: ArrayRef,
    bytes: usize,
    last_used: u64,
}

#[derive(Debug)]
struct FileEntry {
    /// The footer every chunk below was decoded under, as an identity: a weak pointer
    /// keeps the allocation (so no other footer can take its address) but not the
    /// footer, which the metadata cache alone owns and bounds.
    footer: Weak<ParquetMetaData>,
    /// Schema metadata of the decoded batches.
    schema: SchemaRef,
    /// By (row group, root column).
    chunks: HashMap<(usize, usize), Chunk>,
    /// Used once, not held.
    seen: HashSet<(usize, usize)>,
}

#[derive(Debug, Default)]
struct Inner {
    files: HashMap<PathBuf, FileEntry>,
    used: usize,
    seen: usize,
    tick: u64,
    stats: ColumnCacheStats,
}

/// What a read should do, from [`ColumnCache::lookup`].
#[derive(Debug)]
pub(crate) enum Lookup {
    /// Every column wanted, for the whole row group (columns in `roots` order).
    Hit(RecordBatch),
    /// Decode the whole chunks and [`insert`](ColumnCache::insert) them.
    Admit,
    /// Read as if there were no cache.
    Pass,
}

/// Decoded column chunks by file version, row group and root column. See the module.
#[derive(Debug)]
pub struct ColumnCache {
    capacity_bytes: usize,
    inner: Mutex<Inner>,
}

impl ColumnCache {
    /// An empty cache of at most `capacity_bytes` (0: off).
    pub fn new(capacity_bytes: usize) -> Self {
        Self {
            capacity_bytes,
            inner: Mutex::new(Inner::default()),
        }
    }

    /// The byte budget.
    pub fn capacity_bytes(&self) -> usize {
        self.capacity_bytes
    }

    /// Counters so far.
    pub fn stats(&self) -> ColumnCacheStats {
        let inner = self.lock();
        let mut stats = inner.stats;
        stats.entries = inner.files.values().map(|f| f.chunks.len()).sum();
        stats.bytes = inner.used;
        stats
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // Every update is a few map and field writes with no call that can unwind
        // halfway through one: the data stays consistent after a panic elsewhere.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether every column of `roots` of row group `row_group` of `path` (under
    /// `footer`) is held: a read of them would be served from memory. Counts nothing.
    pub(crate) fn holds(
        &self,
        path: &Path,
        footer: &Arc<ParquetMetaData>,
        row_group: usize,
        roots: &[usize],
    ) -> bool {
        if self.capacity_bytes == 0 {
            return false;
        }
        let inner = self.lock();
        inner.files.get(path).is_some_and(|f| {
            same_footer(&f.footer, footer)
                && roots
                    .iter()
                    .all(|r| f.chunks.contains_key(&(row_group, *r)))
        })
    }

    /// The columns `roots` of row group `row_group` of `path` (whose parsed footer is
    /// `footer`), `estimated_bytes` decoded.
    pub(crate) fn lookup(
        &self,
        path: &Path,
        footer: &Arc<ParquetMetaData>,
        row_group: usize,
        roots: &[usize],
        estimated_bytes: u64,
    ) -> Lookup {
        if self.capacity_bytes == 0 || roots.is_empty() {
            return Lookup::Pass;
        }
        let mut guard = self.lock();
        let inner = &mut *guard;
        inner.tick += 1;
        let tick = inner.tick;
        let file = match inner.files.get_mut(path) {
            Some(f) if same_footer(&f.footer, footer) => f,
            _ => {
                // Unknown file, or a new version of it: start over.
                if let Some(old) = inner.files.remove(path) {
                    inner.used -= old.chunks.values().map(|c| c.bytes).sum::<usize>();
                    inner.seen -= old.seen.len();
                    inner.stats.invalidated += old.chunks.len() as u64;
                }
                inner.files.entry(path.to_path_buf()).or_insert(FileEntry {
                    footer: Arc::downgrade(footer),
                    schema: Arc::new(Schema::empty()),
                    chunks: HashMap::new(),
                    seen: HashSet::new(),
                })
            }
        };
        if roots
            .iter()
            .all(|r| file.chunks.contains_key(&(row_group, *r)))
        {
            let mut fields = Vec::with_capacity(roots.len());
            let mut columns = Vec::with_capacity(roots.len());
            for r in roots {
                if let Some(c) = file.chunks.get_mut(&(row_group, *r)) {
                    c.last_used = tick;
                    fields.push(Arc::clone(&c.field));
                    columns.push(Arc::clone(&c.array));
                }
            }
            let schema = Schema::new_with_metadata(fields, file.schema.metadata().clone());
            let rows = columns.first().map_or(0, |c| c.len());
            if let Ok(batch) = RecordBatch::try_new_with_options(
                Arc::new(schema),
                columns,
                &RecordBatchOptions::new().with_row_count(Some(rows)),
            ) {
                inner.stats.hits += 1;
                return Lookup::Hit(batch);
            }
        }
        inner.stats.misses += 1;
        let too_big =
            usize::try_from(estimated_bytes).map_or(true, |b| b > self.capacity_bytes / MAX_SHARE);
        if too_big {
            return Lookup::Pass;
        }
        if roots.iter().all(|r| {
            file.seen.contains(&(row_group, *r)) || file.chunks.contains_key(&(row_group, *r))
        }) {
            for r in roots {
                if file.seen.remove(&(row_group, *r)) {
                    inner.seen -= 1;
                }
            }
            return Lookup::Admit;
        }
        let mut added = 0;
        for r in roots {
            if !file.chunks.contains_key(&(row_group, *r)) && file.seen.insert((row_group, *r)) {
                added += 1;
            }
        }
        inner.seen += added;
        if inner.seen > SEEN_MAX {
            for f in inner.files.values_mut() {
                f.seen.clear();
            }
            inner.seen = 0;
            // Files with nothing held are forgotten with their marks.
            inner.files.retain(|_, f| !f.chunks.is_empty());
        }
        Lookup::Pass
    }

    /// Keeps the whole chunks of `roots` (the columns of `batch`, in order) of row
    /// group `row_group`, decoded under `footer`. Nothing is kept if the file changed
    /// meanwhile or if the chunks do not fit.
    pub(crate) fn insert(
        &self,
        path: &Path,
        footer: &Arc<ParquetMetaData>,
        row_group: usize,
        roots: &[usize],
        batch: &RecordBatch,
    ) {
        if batch.num_columns() != roots.len() || self.capacity_bytes == 0 {
            return;
        }
        let sizes: Vec<usize> = batch
            .columns()
            .iter()
            .map(|a| a.get_array_memory_size())
            .collect();
        let total: usize = sizes.iter().sum();
        if total > self.capacity_bytes / MAX_SHARE {
            return;
        }
        let mut guard = self.lock();
        let inner = &mut *guard;
        match inner.files.get(path) {
            Some(f) if same_footer(&f.footer, footer) => {}
            _ => return,
        }
        // Replace what is there already (a racing scan admitted the same chunks).
        let mut freed = 0;
        if let Some(f) = inner.files.get_mut(path) {
            for r in roots {
                if let Some(old) = f.chunks.remove(&(row_group, *r)) {
                    freed += old.bytes;
                }
            }
        }
        inner.used -= freed;
        evict(inner, self.capacity_bytes.saturating_sub(total));
        inner.tick += 1;
        let tick = inner.tick;
        // Eviction may have dropped this file's entry with its last chunk.
        let file = inner
            .files
            .entry(path.to_path_buf())
            .or_insert_with(|| FileEntry {
                footer: Arc::downgrade(footer),
                schema: Arc::new(Schema::empty()),
                chunks: HashMap::new(),
                seen: HashSet::new(),
            });
        file.schema = batch.schema();
        let fields = batch.schema_ref().fields().clone();
        for (((r, array), bytes), field) in roots
            .iter()
            .zip(batch.columns())
            .zip(sizes)
            .zip(fields.iter())
        {
            file.chunks.insert(
                (row_group, *r),
                Chunk {
                    field: Arc::clone(field),
                    array: Arc::clone(array),
                    bytes,
                    last_used: tick,
                },
            );
        }
        inner.used += total;
        inner.stats.admitted += roots.len() as u64;
    }
}

/// Evicts least recently used chunks until at most `target` bytes are held.
fn evict(inner: &mut Inner, target: usize) {
    while inner.used > target {
        let Some((path, key)) = inner
            .files
            .iter()
            .flat_map(|(p, f)| f.chunks.iter().map(move |(k, c)| (p, *k, c.last_used)))
            .min_by_key(|(_, _, used)| *used)
            .map(|(p, k, _)| (p.clone(), k))
        else {
            return;
        };
        if let Some(f) = inner.files.get_mut(&path) {
            if let Some(c) = f.chunks.remove(&key) {
                inner.used -= c.bytes;
                inner.stats.evictions += 1;
            }
            if f.chunks.is_empty() && f.seen.is_empty() {
                inner.files.remove(&path);
            }
        }
    }
}

/// Whether `held` points to `footer` (the weak pointer keeps the address from reuse).
fn same_footer(held: &Weak<ParquetMetaData>, footer: &Arc<ParquetMetaData>) -> bool {
    std::ptr::eq(held.as_ptr(), Arc::as_ptr(footer))
}
