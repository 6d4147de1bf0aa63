//! Page indexes loaded column by column: only the column index of the predicate's
//! columns and the offset index of the columns a scan reads page by page, decoded from
//! their own byte ranges (never with the footer) and held in the [`MetadataCache`] next
//! to the footer they belong to.
//!
//! [`SparsePageIndex`] hands the loaded indexes to pruning as [`PageIndexes`] (cached
//! indexes are shared by `Arc`, never copied), and to the arrow reader's page skipping
//! as a dense offset index ([`SparsePageIndex::dense_offset_index`]).
//!
//! parquet 59 decodes page indexes only through its metadata reader, for every chunk of
//! a metadata at once ([`decode_one`] says how one chunk's index is decoded anyway).
//!
//! [`MetadataCache`]: super::MetadataCache

use std::collections::HashMap;
use std::mem::size_of;
use std::ops::Range;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use parquet::errors::ParquetError;
use parquet::file::metadata::{
    PageIndexPolicy, ParquetMetaData, ParquetMetaDataBuilder, ParquetMetaDataReader,
    ParquetOffsetIndex,
};
use parquet::file::page_index::column_index::ColumnIndexMetaData;
use parquet::file::page_index::offset_index::{OffsetIndexMetaData, PageLocation};

use crate::prune::PageIndexes;

use super::cache::IndexTail;
use super::source::{coalesce, ByteRangeSource};
use super::{guard_panic, ScanError};

/// The larger of the two page indexes of one column chunk is a few KiB in practice; a
/// footer claiming more than this is refused rather than allocated.
pub const MAX_PAGE_INDEX_BYTES: u64 = 64 << 20;

/// Which of a column chunk's two page indexes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum IndexKind {
    /// Per-page min/max/null counts: what page pruning evaluates.
    Column,
    /// Page locations and first rows: what page-level IO and pruning cut on.
    Offset,
}

/// One page index of one column chunk: `(row group, leaf column, kind)`.
pub(crate) type IndexKey = (usize, usize, IndexKind);

/// A decoded page index, or the file's word that the column chunk has none.
#[derive(Debug, Clone)]
pub(crate) enum LoadedIndex {
    Column(Arc<ColumnIndexMetaData>),
    Offset(Arc<OffsetIndexMetaData>),
    /// The column chunk has no such index.
    Absent,
}

impl LoadedIndex {
    /// Estimated heap bytes, for the cache's byte budget.
    pub(crate) fn memory_bytes(&self) -> usize {
        size_of::<Self>()
            + match self {
                Self::Column(ix) => column_index_bytes(ix),
                Self::Offset(ix) => offset_index_bytes(ix),
                Self::Absent => 0,
            }
    }
}

/// What loading page indexes did for one scan.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct IndexLoad {
    /// Bytes read from storage for page indexes.
    pub(crate) bytes_read: u64,
    /// Microseconds spent reading them.
    pub(crate) io_us: u64,
    /// Column indexes read and decoded.
    pub(crate) column_indexes_loaded: u64,
    /// Offset indexes read and decoded.
    pub(crate) offset_indexes_loaded: u64,
    /// Indexes (either kind, or the knowledge that there is none) served by the cache.
    pub(crate) cache_hits: u64,
}

/// The page indexes a scan loaded, by `(row group, leaf column)`; everything else is
/// `None` (as for a file without a page index).
#[derive(Debug, Clone, Default)]
pub(crate) struct SparsePageIndex {
    // foldhash, not SipHash: a point lookup fills ~22 entries per scan.
    column: HashMap<(usize, usize), Arc<ColumnIndexMetaData>, foldhash::fast::RandomState>,
    offset: HashMap<(usize, usize), Arc<OffsetIndexMetaData>, foldhash::fast::RandomState>,
    /// Some chunk asked for has no offset index: the reader then gets none at all.
    offset_absent: bool,
}

impl SparsePageIndex {
    pub(crate) fn insert(&mut self, (row_group, column, kind): IndexKey, index: &LoadedIndex) {
        match index {
            LoadedIndex::Column(ix) => {
                self.column.insert((row_group, column), Arc::clone(ix));
            }
            LoadedIndex::Offset(ix) => {
                self.offset.insert((row_group, column), Arc::clone(ix));
            }
            LoadedIndex::Absent => self.offset_absent |= kind == IndexKind::Offset,
        }
    }

    /// The loaded offset indexes as the arrow reader takes them: one per chunk of the
    /// file, an empty one where none was loaded (chunks the scan does not read; see
    /// [`PageIndexes for ParquetMetaData`](PageIndexes)). `None` when nothing was
    /// loaded, or when a chunk asked for has none (the reader then reads whole chunks).
    /// The chunks whose offset indexes [`Self::dense_offset_index`] would hold, sorted:
    /// what tells one such metadata from another. `None` where it gives none.
    pub(crate) fn offset_keys(&self) -> Option<Vec<(usize, usize)>> {
        if self.offset.is_empty() || self.offset_absent {
            return None;
        }
        let mut keys: Vec<(usize, usize)> = self.offset.keys().copied().collect();
        keys.sort_unstable();
        Some(keys)
    }

    pub(crate) fn dense_offset_index(&self, meta: &ParquetMetaData) -> Option<ParquetOffsetIndex> {
        if self.offset.is_empty() || self.offset_absent {
            return None;
        }
        let placeholder = OffsetIndexMetaData {
            page_locations: Vec::new(),
            unencoded_byte_array_data_bytes: None,
        };
        Some(
            meta.row_groups()
                .iter()
                .enumerate()
                .map(|(g, rg)| {
                    (0..rg.num_columns())
                        .map(|c| {
                            self.offset
                                .get(&(g, c))
                                .map_or_else(|| placeholder.clone(), |ix| (**ix).clone())
                        })
                        .collect()
                })
                .collect(),
        )
    }
}

impl PageIndexes for SparsePageIndex {
    fn column_index(&self, row_group: usize, column: usize) -> Option<&ColumnIndexMetaData> {
        self.column.get(&(row_group, column)).map(|ix| &**ix)
    }

    fn offset_index(&self, row_group: usize, column: usize) -> Option<&OffsetIndexMetaData> {
        self.offset.get(&(row_group, column)).map(|ix| &**ix)
    }
}

/// Decodes the `kind` index of chunk `(g, c)` of `meta` from `bytes`, which hold its
/// byte range `range` of the file.
///
/// parquet 59 decodes page indexes only in [`ParquetMetaDataReader::read_page_indexes`],
/// for every chunk of a metadata whose index range is set. So the reader gets a copy of
/// the footer cut to row group `g`, where chunk `c` alone names `range` for a column
/// index; for an offset index, which the reader requires of every chunk, every chunk
/// names it and chunk `c`'s copy is taken. The reader sees `bytes` as the end of a file
/// one byte longer than `range` (it wants the range strictly inside what it was given).
fn decode_one(
    meta: &ParquetMetaData,
    (g, c, kind): IndexKey,
    range: &Range<u64>,
    bytes: &Bytes,
) -> Result<LoadedIndex, ParquetError> {
    let bad = |what: &str| ParquetError::General(format!("page index {what}"));
    let offset = i64::try_from(range.start).map_err(|_| bad("offset out of range"))?;
    let length = i32::try_from(range.end - range.start).map_err(|_| bad("too long"))?;
    let rg = meta
        .row_groups()
        .get(g)
        .ok_or_else(|| bad("row group missing"))?;
    let columns = rg
        .columns()
        .iter()
        .enumerate()
        .map(|(i, chunk)| {
            let names_range = kind == IndexKind::Offset || i == c;
            let (column_range, offset_range) = match kind {
                IndexKind::Column if names_range => ((Some(offset), Some(length)), (None, None)),
                IndexKind::Offset => ((None, None), (Some(offset), Some(length))),
                IndexKind::Column => ((None, None), (None, None)),
            };
            chunk
                .clone()
                .into_builder()
                .set_column_index_offset(column_range.0)
                .set_column_index_length(column_range.1)
                .set_offset_index_offset(offset_range.0)
                .set_offset_index_length(offset_range.1)
                .build()
        })
        .collect::<Result<Vec<_>, _>>()?;
    let rg = rg
        .clone()
        .into_builder()
        .set_column_metadata(columns)
        .build()?;
    let one = ParquetMetaDataBuilder::new(meta.file_metadata().clone())
        .set_row_groups(vec![rg])
        .build();
    let policy = |wanted: bool| {
        if wanted {
            PageIndexPolicy::Required
        } else {
            PageIndexPolicy::Skip
        }
    };
    let mut reader = ParquetMetaDataReader::new_with_metadata(one)
        .with_column_index_policy(policy(kind == IndexKind::Column))
        .with_offset_index_policy(policy(kind == IndexKind::Offset));
    let mut tail = Vec::with_capacity(bytes.len() + 1);
    tail.extend_from_slice(bytes);
    tail.push(0);
    reader.read_page_indexes_sized(&Bytes::from(tail), range.end + 1)?;
    let decoded = reader.finish()?;
    Ok(match kind {
        IndexKind::Column => {
            let ix = decoded
                .column_index()
                .and_then(|all| all.first()?.get(c))
                .ok_or_else(|| bad("was not decoded"))?;
            LoadedIndex::Column(Arc::new(ix.clone()))
        }
        IndexKind::Offset => {
            let ix = decoded
                .offset_index()
                .and_then(|all| all.first()?.get(c))
                .ok_or_else(|| bad("was not decoded"))?;
            LoadedIndex::Offset(Arc::new(ix.clone()))
        }
    })
}

/// Read and decode `wanted` (indexes missing from the cache) from `source`: one read per
/// coalesced run of byte ranges, none for the bytes `tail` (kept from the footer's read)
/// holds. Every key gets an answer, [`LoadedIndex::Absent`] where the footer names no
/// range.
pub(crate) fn load(
    path: &Path,
    source: &dyn ByteRangeSource,
    tail: Option<&IndexTail>,
    meta: &ParquetMetaData,
    wanted: &[IndexKey],
    load: &mut IndexLoad,
    stop: &dyn Fn() -> bool,
) -> Result<Vec<(IndexKey, LoadedIndex)>, ScanError> {
    let invalid = |(g, c, kind): IndexKey, reason: String| ScanError::Invalid {
        file: path.to_path_buf(),
        reason: format!("row group {g} column {c}: {kind:?} index {reason}"),
    };
    let mut out = Vec::with_capacity(wanted.len());
    let mut to_read: Vec<(IndexKey, Range<u64>)> = Vec::new();
    for &key in wanted {
        let (g, c, kind) = key;
        let Some(chunk) = meta.row_groups().get(g).and_then(|rg| rg.columns().get(c)) else {
            return Err(invalid(key, "names a column chunk the footer lacks".into()));
        };
        let (offset, length) = match kind {
            IndexKind::Column => (chunk.column_index_offset(), chunk.column_index_length()),
            IndexKind::Offset => (chunk.offset_index_offset(), chunk.offset_index_length()),
        };
        let range = match (offset, length) {
            (Some(o), Some(l)) => match (u64::try_from(o), u64::try_from(l)) {
                (Ok(o), Ok(l)) => Some(o..o.saturating_add(l)),
                _ => return Err(invalid(key, format!("has a negative range {o}+{l}"))),
            },
            _ => None,
        };
        match range {
            None => out.push((key, LoadedIndex::Absent)),
            Some(r) if r.start > r.end || r.end > source.len() => {
                return Err(invalid(
                    key,
                    format!(
                        "range {}..{} lies outside the file ({} bytes)",
                        r.start,
                        r.end,
                        source.len()
                    ),
                ));
            }
            Some(r) if r.end - r.start > MAX_PAGE_INDEX_BYTES => {
                return Err(invalid(
                    key,
                    format!(
                        "of {} bytes exceeds the {MAX_PAGE_INDEX_BYTES}-byte limit",
                        r.end - r.start
                    ),
                ));
            }
            Some(r) => to_read.push((key, r)),
        }
    }
    if to_read.is_empty() {
        return Ok(out);
    }

    let merged = coalesce(
        to_read.iter().map(|(_, r)| r.clone()).collect(),
        source.coalesce_gap(),
    );
    // What the footer's read brought along (`tail`) is decoded from memory, not
    // counted as read (the footer's read counted it): each merged range splits into its
    // head before the tail, to read, and the rest, from the tail. What is read is read
    // all at once: an object store sends the requests concurrently, and gives up on
    // them once `stop` says so.
    let split: Vec<(Option<Range<u64>>, Option<Bytes>)> = merged
        .iter()
        .map(|r| match tail {
            Some(t) if r.end > t.start => {
                let kept = t.get(&(r.start.max(t.start)..r.end));
                match kept {
                    Some(k) if r.start < t.start => (Some(r.start..t.start), Some(k)),
                    Some(k) => (None, Some(k)),
                    None => (Some(r.clone()), None),
                }
            }
            _ => (Some(r.clone()), None),
        })
        .collect();
    let missing: Vec<Range<u64>> = split.iter().filter_map(|(m, _)| m.clone()).collect();
    let start = Instant::now();
    let fetched = if missing.is_empty() {
        Vec::new()
    } else {
        source
            .read_ranges_until(&missing, stop)
            .map_err(|e| match e.kind() {
                std::io::ErrorKind::Interrupted => ScanError::Cancelled,
                std::io::ErrorKind::UnexpectedEof => ScanError::Changed {
                    file: path.to_path_buf(),
                    reason: e.to_string(),
                },
                _ => ScanError::Io {
                    file: path.to_path_buf(),
                    source: e,
                },
            })?
    };
    load.bytes_read += fetched.iter().map(|b| b.len() as u64).sum::<u64>();
    load.io_us += u64::try_from(start.elapsed().as_micros()).unwrap_or(u64::MAX);
    let mut fetched = fetched.into_iter();
    let parts: Vec<Bytes> = split
        .into_iter()
        .map(|(head, kept)| {
            let head = head.and_then(|_| fetched.next());
            match (head, kept) {
                (Some(h), Some(k)) => {
                    let mut joined = Vec::with_capacity(h.len() + k.len());
                    joined.extend_from_slice(&h);
                    joined.extend_from_slice(&k);
                    Bytes::from(joined)
                }
                (h, k) => h.or(k).unwrap_or_default(),
            }
        })
        .collect();
    let buffers: Vec<(u64, Bytes)> = merged.iter().map(|r| r.start).zip(parts).collect();

    for (key, r) in to_read {
        let (_, _, kind) = key;
        // Every range lies inside one merged buffer: `coalesce` only grows ranges.
        let i = buffers.partition_point(|(s, _)| *s <= r.start);
        let slice = i
            .checked_sub(1)
            .and_then(|i| buffers.get(i))
            .and_then(|(s, b)| {
                let from = usize::try_from(r.start - s).ok()?;
                let to = from.checked_add(usize::try_from(r.end - r.start).ok()?)?;
                (to <= b.len()).then(|| b.slice(from..to))
            })
            .ok_or_else(|| invalid(key, "range was not read".into()))?;
        let corrupt = |source| ScanError::Corrupt {
            file: path.to_path_buf(),
            source,
        };
        let index = guard_panic(path, || decode_one(meta, key, &r, &slice).map_err(corrupt))?;
        match kind {
            IndexKind::Column => load.column_indexes_loaded += 1,
            IndexKind::Offset => load.offset_indexes_loaded += 1,
        }
        out.push((key, index));
    }
    Ok(out)
}

fn offset_index_bytes(ix: &OffsetIndexMetaData) -> usize {
    size_of::<OffsetIndexMetaData>()
        + ix.page_locations().len() * size_of::<PageLocation>()
        + ix.unencoded_byte_array_data_bytes()
            .map_or(0, |v| v.len() * size_of::<i64>())
}

fn column_index_bytes(ix: &ColumnIndexMetaData) -> usize {
    let pages = usize::try_from(ix.num_pages()).unwrap_or(usize::MAX);
    // Null page flags, null and NaN counts.
    let common = pages.saturating_mul(1 + 2 * size_of::<i64>());
    let histograms: usize = (0..pages)
        .map(|p| {
            ix.repetition_level_histogram(p).map_or(0, <[i64]>::len)
                + ix.definition_level_histogram(p).map_or(0, <[i64]>::len)
        })
        .sum::<usize>()
        * size_of::<i64>();
    let values = match ix {
        ColumnIndexMetaData::NONE => 0,
        ColumnIndexMetaData::BOOLEAN(_) => pages * 2,
        ColumnIndexMetaData::INT32(_) | ColumnIndexMetaData::FLOAT(_) => pages * 8,
        ColumnIndexMetaData::INT64(_) | ColumnIndexMetaData::DOUBLE(_) => pages * 16,
        ColumnIndexMetaData::INT96(_) => pages * 24,
        ColumnIndexMetaData::BYTE_ARRAY(b) | ColumnIndexMetaData::FIXED_LEN_BYTE_ARRAY(b) => (0
            ..pages)
            .map(|p| {
                2 * size_of::<Vec<u8>>()
                    + b.min_value(p).map_or(0, <[u8]>::len)
                    + b.max_value(p).map_or(0, <[u8]>::len)
            })
            .sum(),
    };
    size_of::<ColumnIndexMetaData>()
        .saturating_add(common)
        .saturating_add(histograms)
        .saturating_add(values)
}
