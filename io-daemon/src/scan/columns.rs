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

use ringscan_lru::ByteLru;

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

/// A decoded column chunk: (file, row group, root column) in the LRU.
#[derive(Debug)]
struct Chunk {
    field: FieldRef,
    array: ArrayRef,
}

/// (file id, row group, root column): the file by the id of its entry in
/// [`Inner::files`], not its path (a point lookup looked up ~80 keys, and hashing a
/// path walks its components: 4% of the daemon's CPU per lookup).
type ChunkKey = (u64, usize, usize);

#[derive(Debug)]
struct FileEntry {
    /// The id its chunks are keyed by, never given to another entry.
    id: u64,
    /// The footer every chunk of this file was decoded under, as an identity: a weak
    /// pointer keeps the allocation (so no other footer can take its address) but not
    /// the footer, which the metadata cache alone owns and bounds.
    footer: Weak<ParquetMetaData>,
    /// Schema metadata of the decoded batches.
    schema: SchemaRef,
    /// The schema of the last hit, kept while its fields are the chunks' (a point
    /// lookup's hits build the same schema each time, its metadata map copied).
    hit_schema: Option<SchemaRef>,
    /// (row group, root column) used once, not held.
    seen: HashSet<(usize, usize)>,
}

#[derive(Debug)]
struct Inner {
    /// The files chunks were looked up or kept for.
    files: HashMap<PathBuf, FileEntry, foldhash::fast::RandomState>,
    /// The chunks held, bounded in bytes ([`get_array_memory_size`] of each).
    ///
    /// [`get_array_memory_size`]: arrow_array::Array::get_array_memory_size
    chunks: ByteLru<ChunkKey, Chunk>,
    /// Marks in all `seen` sets.
    seen: usize,
    /// The next file entry's id.
    next_id: u64,
    stats: ColumnCacheStats,
}

impl Inner {
    /// Forgets `path`'s chunks and marks (its file changed); counts them invalidated.
    fn invalidate(&mut self, path: &Path) {
        // Every chunk is its file entry's: none without one.
        if let Some(old) = self.files.remove(path) {
            self.seen -= old.seen.len();
            let dropped = self.chunks.retain(|k, _| k.0 != old.id);
            self.stats.invalidated += dropped as u64;
        }
    }
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

/// Files remembered (with no chunk held and no mark) at most before they are forgotten.
const FILES_MAX: usize = 4096;

impl ColumnCache {
    /// An empty cache of at most `capacity_bytes` (0: off).
    pub fn new(capacity_bytes: usize) -> Self {
        Self {
            capacity_bytes,
            inner: Mutex::new(Inner {
                files: HashMap::default(),
                chunks: ByteLru::new(capacity_bytes),
                seen: 0,
                next_id: 0,
                stats: ColumnCacheStats::default(),
            }),
        }
    }

    /// The byte budget.
    pub fn capacity_bytes(&self) -> usize {
        self.capacity_bytes
    }

    /// Counters so far.
    pub fn stats(&self) -> ColumnCacheStats {
        let inner = self.lock();
        let lru = inner.chunks.stats();
        ColumnCacheStats {
            entries: lru.entries,
            bytes: lru.bytes,
            evictions: lru.evictions,
            ..inner.stats
        }
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
                    .all(|r| inner.chunks.peek(&(f.id, row_group, *r)).is_some())
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
        let known = (inner.files.get(path))
            .filter(|f| same_footer(&f.footer, footer))
            .map(|f| f.id);
        let id = if let Some(id) = known {
            id
        } else {
            // Unknown file, or a new version of it: start over.
            inner.invalidate(path);
            if inner.files.len() >= FILES_MAX {
                let chunks = &inner.chunks;
                inner
                    .files
                    .retain(|_, f| !f.seen.is_empty() || chunks.iter().any(|(k, _)| k.0 == f.id));
            }
            inner.next_id += 1;
            inner.files.insert(
                path.to_path_buf(),
                FileEntry {
                    id: inner.next_id,
                    footer: Arc::downgrade(footer),
                    schema: Arc::new(Schema::empty()),
                    hit_schema: None,
                    seen: HashSet::new(),
                },
            );
            inner.next_id
        };
        let keys: Vec<ChunkKey> = roots.iter().map(|r| (id, row_group, *r)).collect();
        if keys.iter().all(|k| inner.chunks.peek(k).is_some()) {
            let mut fields = Vec::with_capacity(roots.len());
            let mut columns = Vec::with_capacity(roots.len());
            for k in &keys {
                if let Some(c) = inner.chunks.get(k) {
                    fields.push(Arc::clone(&c.field));
                    columns.push(Arc::clone(&c.array));
                }
            }
            let Some(file) = inner.files.get_mut(path) else {
                return Lookup::Pass;
            };
            let schema = match &file.hit_schema {
                Some(kept)
                    if kept.fields().len() == fields.len()
                        && kept
                            .fields()
                            .iter()
                            .zip(&fields)
                            .all(|(a, b)| Arc::ptr_eq(a, b)) =>
                {
                    Arc::clone(kept)
                }
                _ => {
                    let metadata = file.schema.metadata().clone();
                    let built = Arc::new(Schema::new_with_metadata(fields, metadata));
                    file.hit_schema = Some(Arc::clone(&built));
                    built
                }
            };
            let rows = columns.first().map_or(0, |c| c.len());
            if let Ok(batch) = RecordBatch::try_new_with_options(
                schema,
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
        let held: Vec<bool> = keys
            .iter()
            .map(|k| inner.chunks.peek(k).is_some())
            .collect();
        let Some(file) = inner.files.get_mut(path) else {
            return Lookup::Pass;
        };
        if roots
            .iter()
            .zip(&held)
            .all(|(r, held)| *held || file.seen.contains(&(row_group, *r)))
        {
            for r in roots {
                if file.seen.remove(&(row_group, *r)) {
                    inner.seen -= 1;
                }
            }
            return Lookup::Admit;
        }
        let mut added = 0;
        for (r, held) in roots.iter().zip(&held) {
            if !held && file.seen.insert((row_group, *r)) {
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
            let chunks = &inner.chunks;
            inner
                .files
                .retain(|_, f| chunks.iter().any(|(k, _)| k.0 == f.id));
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
        let Some(file) = inner.files.get_mut(path) else {
            return;
        };
        if !same_footer(&file.footer, footer) {
            return;
        }
        file.schema = batch.schema();
        file.hit_schema = None;
        let id = file.id;
        let fields = batch.schema_ref().fields().clone();
        // Replaces what is there already (a racing scan admitted the same chunks); the
        // LRU evicts the least recently used chunks of any file to fit.
        for (((r, array), bytes), field) in roots
            .iter()
            .zip(batch.columns())
            .zip(sizes)
            .zip(fields.iter())
        {
            let chunk = Chunk {
                field: Arc::clone(field),
                array: Arc::clone(array),
            };
            inner.chunks.insert((id, row_group, *r), chunk, bytes);
        }
        inner.stats.admitted += roots.len() as u64;
    }
}

/// Whether `held` points to `footer` (the weak pointer keeps the address from reuse).
fn same_footer(held: &Weak<ParquetMetaData>, footer: &Arc<ParquetMetaData>) -> bool {
    std::ptr::eq(held.as_ptr(), Arc::as_ptr(footer))
}
