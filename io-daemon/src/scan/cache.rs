//! A byte-bounded LRU cache of parsed Parquet footers and of the page indexes loaded
//! for them, column by column; for an object, also the page-index bytes its footer's
//! read brought along, from which those indexes are decoded without a request.

use std::collections::HashMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use ringscan_lru::ByteLru;

use parquet::bloom_filter::Sbbf;
use parquet::errors::ParquetError;
use parquet::file::metadata::{
    FileMetaData, PageIndexPolicy, ParquetMetaData, ParquetMetaDataBuilder, ParquetMetaDataReader,
};

use ringscan_ipc::scan_data::FileVersion;

use super::columns::ColumnCache;
use super::derived::Derived;
use super::page_index::{self, IndexKey, IndexLoad, LoadedIndex, SparsePageIndex};
use bytes::{Buf, Bytes};
use parquet::file::reader::{ChunkReader, Length};

use super::source::ByteRangeSource;
use super::{guard_panic, ScanError};
use crate::storage::object::FOOTER_HINT_BYTES;
use crate::storage::{ObjectSource, ObjectVersion};

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

/// Which bytes a cached footer was parsed from.
#[derive(Debug, Clone)]
enum Version {
    /// A local file's size, mtime, device, inode and ctime.
    File(FileVersion),
    /// An object's size and ETag (or last-modified time).
    Object(ObjectVersion),
}

impl Version {
    fn same_contents(&self, other: &Self) -> bool {
        match (self, other) {
            (Self::File(a), Self::File(b)) => a.same_contents(b),
            (Self::Object(a), Self::Object(b)) => a.same_contents(b),
            _ => false,
        }
    }
}

#[derive(Debug)]
struct Entry {
    /// The version of the file or object it was parsed from.
    version: Version,
    /// The footer, parsed without any page index.
    meta: Arc<ParquetMetaData>,
    /// Page indexes of this file version, loaded on demand (foldhash: a point lookup
    /// looks ~22 up).
    indexes: HashMap<IndexKey, LoadedIndex, foldhash::fast::RandomState>,
    /// The Arrow schema mapping and pruning column map, derived on first use.
    derived: Option<Derived>,
    /// Bloom filters read by scans, by (row group, leaf column); `None`: the chunk has
    /// none. A point lookup reads the same ones every time.
    blooms: HashMap<(usize, usize), Option<Arc<Sbbf>>>,
    /// The footer with the offset indexes of a set of chunks, as the reader takes it,
    /// by that set (most recent last, at most [`DENSE_KEPT`]): a point lookup reads the
    /// same few chunks of a row group every time.
    dense: Vec<(Vec<(usize, usize)>, DenseMetadata)>,
    /// An object's page indexes as its footer's read brought them along (the bytes
    /// between the first page index and the footer that its tail covered): page
    /// indexes inside are decoded from here, no request made. `None` for local files.
    index_tail: Option<IndexTail>,
}

/// Bytes of a file from `start` on, kept from the read of its footer.
#[derive(Debug, Clone)]
pub(crate) struct IndexTail {
    /// Where `bytes` start in the file.
    pub(crate) start: u64,
    pub(crate) bytes: Bytes,
}

impl IndexTail {
    /// The bytes of `range` if it lies inside.
    pub(crate) fn get(&self, range: &std::ops::Range<u64>) -> Option<Bytes> {
        let from = usize::try_from(range.start.checked_sub(self.start)?).ok()?;
        let to = from.checked_add(usize::try_from(range.end.checked_sub(range.start)?).ok()?)?;
        (to <= self.bytes.len()).then(|| self.bytes.slice(from..to))
    }
}

/// Footers with offset indexes kept per file.
const DENSE_KEPT: usize = 8;

/// A footer with some offset indexes, and its Arrow reader metadata.
pub(crate) type DenseMetadata = (
    Arc<ParquetMetaData>,
    parquet::arrow::arrow_reader::ArrowReaderMetadata,
);

#[derive(Debug)]
struct Inner {
    /// By path; an entry's size is its footer's, its derived values' and its page
    /// indexes' estimated memory.
    files: ByteLru<PathBuf, Entry>,
    /// Footer and page index lookups (the LRU counts its own evictions).
    stats: CacheStats,
}

impl Inner {
    /// The entry of `path` if it holds footer `meta`.
    fn entry_of(&self, path: &Path, meta: &Arc<ParquetMetaData>) -> Option<&Entry> {
        self.files.peek(path).filter(|e| Arc::ptr_eq(&e.meta, meta))
    }

    fn stats(&self) -> CacheStats {
        let lru = self.files.stats();
        CacheStats {
            evictions: lru.evictions,
            entries: lru.entries,
            bytes: lru.bytes,
            page_indexes: self.files.values().map(|e| e.indexes.len()).sum(),
            ..self.stats
        }
    }
}

/// Parsed footers keyed by path and validated by the file's size, mtime, device, inode
/// and ctime ([`FileVersion`]): a file rewritten in place is parsed again, also when the
/// rewrite kept its size and mtime (`cp -p`, `rsync -t`: the ctime moves, and a file
/// replaced by rename has another inode). Bounded by the sum of
/// `ParquetMetaData::memory_size()`, the derived values' and the page indexes' estimated
/// sizes ([`ByteLru`]); the least recently used files go first. Shared by reference across
/// scans (`&self`).
///
/// A footer is parsed once per file version, always without its page index. Page indexes
/// are loaded separately ([`page_indexes`](Self::page_indexes)), only the kinds, row
/// groups and columns a scan asks for, from their own byte ranges, and kept with the
/// footer: the key of one is (file version, row group, column, kind).
#[derive(Debug)]
pub struct MetadataCache {
    inner: Mutex<Inner>,
    columns: ColumnCache,
    /// The local files whose footers are read here, kept open between scans.
    open_files: crate::storage::OpenFiles,
}

impl MetadataCache {
    /// An empty cache holding at most `capacity_bytes` of parsed metadata. A footer larger
    /// than that is parsed on every use and never cached.
    pub fn new(capacity_bytes: usize) -> Self {
        Self {
            inner: Mutex::new(Inner {
                files: ByteLru::new(capacity_bytes),
                stats: CacheStats::default(),
            }),
            columns: ColumnCache::new(0),
            open_files: crate::storage::OpenFiles::new(crate::storage::OpenFiles::DEFAULT_CAPACITY),
        }
    }

    /// The local files kept open between scans.
    pub fn open_files(&self) -> &crate::storage::OpenFiles {
        &self.open_files
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
        self.lock().files.capacity_bytes()
    }

    /// Counters so far.
    pub fn stats(&self) -> CacheStats {
        self.lock().stats()
    }

    /// The Arrow schema mapping and pruning column map of `meta` (a footer this cache
    /// returned for `path`), computed once per cached footer and kept in its entry
    /// (counted in its bytes, evicted with it); computed on every call for a footer the
    /// cache does not hold.
    pub(crate) fn derived(
        &self,
        meta: &Arc<ParquetMetaData>,
        path: &Path,
    ) -> Result<Derived, ScanError> {
        let cached = |inner: &Inner| inner.entry_of(path, meta).and_then(|e| e.derived.clone());
        if let Some(derived) = cached(&self.lock()) {
            return Ok(derived);
        }
        let derived = Derived::of(meta, path)?;
        let extra = derived.memory_bytes(meta);
        let mut inner = self.lock();
        if let Some(raced) = cached(&inner) {
            return Ok(raced);
        }
        if inner.entry_of(path, meta).is_some() && inner.files.grow(path, extra) {
            if let Some(entry) = inner.files.peek_mut(path) {
                entry.derived = Some(derived.clone());
            }
        }
        Ok(derived)
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
        self.get_or_load_version(
            path,
            FileVersion::from_metadata(PathBuf::new(), &stat),
            file,
        )
    }

    /// [`get_or_load`](Self::get_or_load) for `file` known to be at `version`.
    pub fn get_or_load_version(
        &self,
        path: &Path,
        version: FileVersion,
        file: &File,
    ) -> Result<Arc<ParquetMetaData>, ScanError> {
        let version = Version::File(version);
        self.load(path, version, || {
            let corrupt = |source| ScanError::Corrupt {
                file: path.to_path_buf(),
                source,
            };
            match ParquetMetaDataReader::new()
                .with_page_index_policy(PageIndexPolicy::Skip)
                .parse_and_finish(file)
            {
                Ok(meta) => Ok((meta, None)),
                // Refused: a field of the wrong type, which other readers skip, may be
                // all that is wrong (see `thrift_walk`).
                Err(refused) => repaired_footer(file)
                    .map(|meta| (meta, None))
                    .ok_or(refused)
                    .map_err(corrupt),
            }
        })
    }

    /// The footer of the object `source` (at `path`, its URL), parsed or from the
    /// cache (keyed by URL, valid for the object's size and ETag), without page
    /// indexes. A miss costs one ranged GET of the object's last
    /// [`FOOTER_HINT_BYTES`], and a second only for a larger footer. The page indexes
    /// that GET brought along (Parquet writers put them just before the footer) are
    /// kept with the footer, for [`page_indexes`](Self::page_indexes).
    pub(crate) fn get_or_load_object(
        &self,
        path: &Path,
        source: &Arc<ObjectSource>,
        stop: &dyn Fn() -> bool,
    ) -> Result<Arc<ParquetMetaData>, ScanError> {
        let version = Version::Object(source.version().clone());
        self.load(path, version, || {
            let tail =
                FooterTail::fetch(Arc::clone(source) as _, stop).map_err(|source| match source
                    .kind()
                {
                    std::io::ErrorKind::Interrupted => ScanError::Cancelled,
                    _ => ScanError::Io {
                        file: path.to_path_buf(),
                        source,
                    },
                })?;
            if tail.bytes.ends_with(b"PARE") {
                return Err(ScanError::Unsupported {
                    file: path.to_path_buf(),
                    reason: "encrypted Parquet is not supported".to_owned(),
                });
            }
            let meta = ParquetMetaDataReader::new()
                .with_page_index_policy(PageIndexPolicy::Skip)
                .parse_and_finish(&tail)
                .map_err(|source| ScanError::Corrupt {
                    file: path.to_path_buf(),
                    source,
                })?;
            let kept = tail.page_indexes(&meta);
            Ok((meta, kept))
        })
    }

    /// The cached footer of `path` at `version`, else `parse`d and cached.
    fn load(
        &self,
        path: &Path,
        version: Version,
        parse: impl FnOnce() -> Result<(ParquetMetaData, Option<IndexTail>), ScanError>,
    ) -> Result<Arc<ParquetMetaData>, ScanError> {
        {
            let mut inner = self.lock();
            let current = (inner.files.peek(path))
                .filter(|e| e.version.same_contents(&version))
                .map(|e| Arc::clone(&e.meta));
            if let Some(meta) = current {
                inner.files.touch(path);
                inner.stats.hits += 1;
                return Ok(meta);
            }
            inner.stats.misses += 1;
        }
        let (meta, index_tail) = guard_panic(path, parse)?;
        let meta = Arc::new(with_true_row_count(meta));
        self.insert(path, version, &meta, index_tail);
        Ok(meta)
    }

    /// The page indexes `wanted` of the file whose footer is `meta` (as returned by
    /// [`get_or_load`](Self::get_or_load) for `path`), added to `into`: from the cache,
    /// or read from `source` (just their byte ranges) and decoded, then cached with the
    /// footer while it is cached and the budget allows. `load` counts what was read.
    #[expect(
        clippy::too_many_arguments,
        reason = "the file, its source and footer, what to load, where, counters and when to give up"
    )]
    pub(crate) fn page_indexes(
        &self,
        path: &Path,
        source: &dyn ByteRangeSource,
        meta: &Arc<ParquetMetaData>,
        wanted: &[IndexKey],
        into: &mut SparsePageIndex,
        load: &mut IndexLoad,
        stop: &dyn Fn() -> bool,
    ) -> Result<(), ScanError> {
        let mut missing = Vec::new();
        let index_tail;
        {
            let mut inner = self.lock();
            let entry = inner.entry_of(path, meta);
            index_tail = entry.and_then(|e| e.index_tail.clone());
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
        let loaded = page_index::load(
            path,
            source,
            index_tail.as_ref(),
            meta,
            &missing,
            load,
            stop,
        )?;
        for (key, ix) in &loaded {
            into.insert(*key, ix);
        }

        let mut inner = self.lock();
        // Gone, or replaced by a newer version of the file meanwhile: serve, don't keep.
        let Some(entry) = inner.entry_of(path, meta) else {
            return Ok(());
        };
        let fresh: Vec<(IndexKey, LoadedIndex)> = loaded
            .into_iter()
            .filter(|(k, _)| !entry.indexes.contains_key(k))
            .collect();
        let extra: usize = fresh.iter().map(|(_, ix)| ix.memory_bytes()).sum();
        // False when this file alone would exceed the budget: serve, don't keep.
        if inner.files.grow(path, extra) {
            inner.files.touch(path);
            if let Some(entry) = inner.files.peek_mut(path) {
                entry.indexes.extend(fresh);
            }
        }
        Ok(())
    }

    /// The bloom filter of (row group `g`, leaf column `leaf`) of `meta` (a footer this
    /// cache returned for `path`): kept from an earlier scan, else from `read`, then kept
    /// with the footer while it is cached and the budget allows.
    pub(crate) fn bloom_filter(
        &self,
        path: &Path,
        meta: &Arc<ParquetMetaData>,
        g: usize,
        leaf: usize,
        read: impl FnOnce() -> Result<Option<Sbbf>, ParquetError>,
    ) -> Result<Option<Arc<Sbbf>>, ParquetError> {
        if let Some(kept) = self
            .lock()
            .entry_of(path, meta)
            .and_then(|e| e.blooms.get(&(g, leaf)))
        {
            return Ok(kept.clone());
        }
        let filter = read()?.map(Arc::new);
        let mut inner = self.lock();
        if inner.entry_of(path, meta).is_none() {
            return Ok(filter);
        }
        // A filter's blocks are 32 bytes each; the map entry is counted with it.
        let bytes = filter.as_ref().map_or(0, |f| f.num_blocks() * 32) + 64;
        if inner.files.grow(path, bytes) {
            if let Some(entry) = inner.files.peek_mut(path) {
                entry.blooms.insert((g, leaf), filter.clone());
            }
        }
        Ok(filter)
    }

    /// The footer `meta` of `path` with the offset indexes of chunks `keys`: kept from
    /// an earlier scan, else from `build`, then kept with the footer while the budget
    /// allows.
    pub(crate) fn dense_metadata(
        &self,
        path: &Path,
        meta: &Arc<ParquetMetaData>,
        keys: Vec<(usize, usize)>,
        build: impl FnOnce() -> Result<DenseMetadata, ScanError>,
    ) -> Result<DenseMetadata, ScanError> {
        {
            let mut inner = self.lock();
            if inner.entry_of(path, meta).is_some() {
                if let Some(entry) = inner.files.peek_mut(path) {
                    if let Some(at) = entry.dense.iter().position(|(k, _)| *k == keys) {
                        let kept = entry.dense.remove(at);
                        let found = kept.1.clone();
                        entry.dense.push(kept);
                        return Ok(found);
                    }
                }
            }
        }
        let built = build()?;
        let mut inner = self.lock();
        if inner.entry_of(path, meta).is_none() {
            return Ok(built);
        }
        let full = inner
            .files
            .peek(path)
            .is_some_and(|e| e.dense.len() >= DENSE_KEPT);
        // Replacing the oldest leaves the count as it was (its bytes stay counted: the
        // new one is about as large).
        if full || inner.files.grow(path, built.0.memory_size()) {
            if let Some(entry) = inner.files.peek_mut(path) {
                if full {
                    entry.dense.remove(0);
                }
                entry.dense.push((keys, built.clone()));
            }
        }
        Ok(built)
    }

    fn insert(
        &self,
        path: &Path,
        version: Version,
        meta: &Arc<ParquetMetaData>,
        index_tail: Option<IndexTail>,
    ) {
        let bytes = meta.memory_size() + index_tail.as_ref().map_or(0, |t| t.bytes.len());
        let entry = Entry {
            version,
            meta: Arc::clone(meta),
            indexes: HashMap::default(),
            derived: None,
            blooms: HashMap::new(),
            dense: Vec::new(),
            index_tail,
        };
        // Replaces an older version; a footer larger than the budget is not kept.
        self.lock().files.insert(path.to_path_buf(), entry, bytes);
    }
}

/// The last [`FOOTER_HINT_BYTES`] of a file, read at once, for the footer parser: most
/// footers lie inside, so that one request reads the length, the magic and the
/// metadata; a read outside goes to the source.
struct FooterTail {
    source: Arc<dyn ByteRangeSource>,
    /// Where `bytes` start in the file.
    start: u64,
    bytes: Bytes,
}

impl FooterTail {
    /// The tail, read until `stop` says the reader is gone (then `Interrupted`).
    fn fetch(source: Arc<dyn ByteRangeSource>, stop: &dyn Fn() -> bool) -> std::io::Result<Self> {
        let len = source.len();
        let start = len.saturating_sub(FOOTER_HINT_BYTES);
        let bytes = source
            .read_ranges_until(std::slice::from_ref(&(start..len)), stop)?
            .pop()
            .unwrap_or_default();
        Ok(Self {
            source,
            start,
            bytes,
        })
    }
}

impl FooterTail {
    /// What the tail holds of the page indexes of `meta` (its footer): the bytes from
    /// the first column or offset index it covers up to the footer; `None` when it
    /// covers none.
    fn page_indexes(&self, meta: &ParquetMetaData) -> Option<IndexTail> {
        let first = meta
            .row_groups()
            .iter()
            .flat_map(|rg| rg.columns())
            .flat_map(|c| [c.column_index_offset(), c.offset_index_offset()])
            .flatten()
            .filter_map(|o| u64::try_from(o).ok())
            .filter(|&o| o >= self.start)
            .min()?;
        // The footer: its length, 4 bytes, and the magic end the file.
        let len = self.source.len();
        let footer_len = len
            .checked_sub(8)
            .and_then(|at| {
                let from = usize::try_from(at.checked_sub(self.start)?).ok()?;
                self.bytes.get(from..)
            })
            .and_then(|b| b.get(..4))
            .map(|b| u64::from(u32::from_le_bytes([b[0], b[1], b[2], b[3]])))?;
        let end = len.checked_sub(8)?.checked_sub(footer_len)?;
        if first >= end {
            return None;
        }
        let from = usize::try_from(first - self.start).ok()?;
        let to = usize::try_from(end - self.start).ok()?;
        (to <= self.bytes.len()).then(|| IndexTail {
            start: first,
            // A copy: the footer's bytes (the rest of the tail) are not kept.
            bytes: Bytes::copy_from_slice(&self.bytes[from..to]),
        })
    }
}

impl Length for FooterTail {
    fn len(&self) -> u64 {
        self.source.len()
    }
}

impl ChunkReader for FooterTail {
    type T = bytes::buf::Reader<Bytes>;

    fn get_read(&self, start: u64) -> Result<Self::T, ParquetError> {
        let len = self.source.len();
        Ok(self
            .get_bytes(
                start,
                usize::try_from(len.saturating_sub(start)).unwrap_or(0),
            )?
            .reader())
    }

    fn get_bytes(&self, start: u64, length: usize) -> Result<Bytes, ParquetError> {
        let end = u64::try_from(length)
            .ok()
            .and_then(|l| start.checked_add(l))
            .ok_or_else(|| ParquetError::General("byte range overflows".into()))?;
        if start >= self.start {
            let from = usize::try_from(start - self.start).unwrap_or(usize::MAX);
            let to = from.saturating_add(length);
            if to <= self.bytes.len() {
                return Ok(self.bytes.slice(from..to));
            }
        }
        self.source
            .read_range(start..end)
            .map_err(|e| ParquetError::External(Box::new(e)))
    }
}

/// The footer of `file` decoded after leaving out its fields of the wrong type; `None`
/// when it cannot be read, has none, or still does not decode.
fn repaired_footer(file: &File) -> Option<ParquetMetaData> {
    let mut file = file.try_clone().ok()?;
    let crate::footer_probe::Footer::Plain(footer) = crate::footer_probe::read_footer(&mut file)?
    else {
        return None;
    };
    let (fixed, _dropped) = super::thrift_walk::repair(&footer)?;
    ParquetMetaDataReader::decode_metadata(&fixed).ok()
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

#[cfg(test)]
mod tests {
    use std::sync::Weak;

    use super::*;

    /// A small Parquet file of `rows` rows in `dir`.
    fn file(dir: &Path, name: &str, rows: i64) -> PathBuf {
        use arrow_array::{Int64Array, RecordBatch};
        let path = dir.join(name);
        let batch = RecordBatch::try_from_iter([(
            "x",
            Arc::new(Int64Array::from_iter_values(0..rows)) as _,
        )])
        .unwrap();
        let mut w = parquet::arrow::ArrowWriter::try_new(
            File::create(&path).unwrap(),
            batch.schema(),
            None,
        )
        .unwrap();
        w.write(&batch).unwrap();
        w.close().unwrap();
        path
    }

    /// Issue 17, item 7: the derived values (whose Arrow view holds the footer) lived in
    /// a side table that kept every footer alive, evicted or not, up to 1,024 of them:
    /// the footer budget did not hold. Now they go with the footer's entry.
    #[test]
    fn evicted_footers_are_freed_with_their_derived_values() {
        let dir = tempfile::tempdir().unwrap();
        let paths: Vec<PathBuf> = (0..6)
            .map(|i| file(dir.path(), &format!("f{i}.parquet"), 10 + i))
            .collect();
        let one = {
            let f = File::open(&paths[0]).unwrap();
            let meta = MetadataCache::new(1 << 20)
                .get_or_load(&paths[0], &f)
                .unwrap();
            meta.memory_size() + Derived::of(&meta, &paths[0]).unwrap().memory_bytes(&meta)
        };
        // Room for two files' footers and derived values, not three.
        let cache = MetadataCache::new(one * 2 + one / 2);
        let mut weak: Vec<Weak<ParquetMetaData>> = Vec::new();
        for path in &paths {
            let meta = cache.get_or_load(path, &File::open(path).unwrap()).unwrap();
            let first = cache.derived(&meta, path).unwrap();
            let again = cache.derived(&meta, path).unwrap();
            assert!(
                Arc::ptr_eq(&first.columns, &again.columns),
                "derived twice for one cached footer"
            );
            weak.push(Arc::downgrade(&meta));
        }
        let stats = cache.stats();
        assert!(stats.bytes <= cache.capacity_bytes(), "{stats:?}");
        assert_eq!(stats.entries, 2, "{stats:?}");
        let alive = weak.iter().filter(|w| w.strong_count() > 0).count();
        assert_eq!(alive, 2, "footers alive beyond the two the budget holds");
    }

    /// Counts the reads that reach a file.
    #[derive(Debug)]
    struct Counting {
        inner: crate::storage::LocalFile,
        reads: std::sync::atomic::AtomicU64,
    }

    impl ByteRangeSource for Counting {
        fn len(&self) -> u64 {
            self.inner.len()
        }
        fn read_range(&self, range: std::ops::Range<u64>) -> std::io::Result<Bytes> {
            self.reads
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            self.inner.read_range(range)
        }
    }

    /// The page indexes an object's footer read brought along are decoded from the kept
    /// bytes with no read, and equal those read from the file; a tail that covers only
    /// some of them serves those and reads the rest.
    #[test]
    fn page_indexes_come_from_the_footer_tail() {
        use arrow_array::{Int64Array, RecordBatch, StringArray};
        use parquet::file::properties::WriterProperties;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.parquet");
        let rows = 4_000i64;
        let batch = RecordBatch::try_from_iter([
            ("x", Arc::new(Int64Array::from_iter_values(0..rows)) as _),
            (
                "s",
                Arc::new(StringArray::from_iter_values(
                    (0..rows).map(|i| format!("s{}", i % 97)),
                )) as _,
            ),
        ])
        .unwrap();
        let props = WriterProperties::builder()
            .set_max_row_group_row_count(Some(500))
            .set_data_page_row_count_limit(100)
            .set_write_batch_size(100)
            .build();
        let mut w = parquet::arrow::ArrowWriter::try_new(
            File::create(&path).unwrap(),
            batch.schema(),
            Some(props),
        )
        .unwrap();
        w.write(&batch).unwrap();
        w.close().unwrap();

        let source = Arc::new(Counting {
            inner: crate::storage::LocalFile::open(&path).unwrap(),
            reads: Default::default(),
        });
        let reads = || source.reads.load(std::sync::atomic::Ordering::Relaxed);
        let tail = FooterTail::fetch(Arc::clone(&source) as _, &|| false).unwrap();
        assert_eq!(reads(), 1);
        let meta = ParquetMetaDataReader::new()
            .with_page_index_policy(PageIndexPolicy::Skip)
            .parse_and_finish(&tail)
            .unwrap();
        assert_eq!(meta.num_row_groups(), 8);
        let kept = tail
            .page_indexes(&meta)
            .expect("the tail holds the indexes");
        let wanted: Vec<IndexKey> = (0..8)
            .flat_map(|g| {
                (0..2).flat_map(move |c| {
                    [
                        (g, c, page_index::IndexKind::Column),
                        (g, c, page_index::IndexKind::Offset),
                    ]
                })
            })
            .collect();
        let load = |tail: Option<&IndexTail>| {
            let mut counts = IndexLoad::default();
            let loaded =
                page_index::load(&path, &*source, tail, &meta, &wanted, &mut counts, &|| {
                    false
                })
                .unwrap();
            (format!("{loaded:?}"), counts)
        };
        let before = reads();
        let (from_tail, counts) = load(Some(&kept));
        assert_eq!((reads(), counts.bytes_read), (before, 0));
        assert_eq!(
            counts.column_indexes_loaded + counts.offset_indexes_loaded,
            32
        );
        let (from_file, counts) = load(None);
        assert!(reads() > before && counts.bytes_read > 0);
        assert_eq!(from_tail, from_file);

        // Half the kept bytes: the indexes in the other half are read.
        let half = IndexTail {
            start: kept.start + kept.bytes.len() as u64 / 2,
            bytes: kept.bytes.slice(kept.bytes.len() / 2..),
        };
        let (from_half, counts) = load(Some(&half));
        assert!(counts.bytes_read > 0);
        assert!(counts.bytes_read < kept.bytes.len() as u64);
        assert_eq!(from_half, from_file);
    }

    /// A rewritten file's footer gets derived values of its own.
    #[test]
    fn a_new_version_of_a_file_is_derived_again() {
        let dir = tempfile::tempdir().unwrap();
        let path = file(dir.path(), "f.parquet", 10);
        let cache = MetadataCache::new(1 << 20);
        let meta = cache
            .get_or_load(&path, &File::open(&path).unwrap())
            .unwrap();
        let old = cache.derived(&meta, &path).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(10));
        file(dir.path(), "f.parquet", 20);
        let meta = cache
            .get_or_load(&path, &File::open(&path).unwrap())
            .unwrap();
        let new = cache.derived(&meta, &path).unwrap();
        assert!(!Arc::ptr_eq(&old.columns, &new.columns));
        assert_eq!(new.arrow.metadata().file_metadata().num_rows(), 20);
    }
}
