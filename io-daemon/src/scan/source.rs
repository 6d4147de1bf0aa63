//! Byte-range IO behind a trait, so that object storage (ranged GETs) is a new
//! implementation of [`ByteRangeSource`] rather than a rewrite of the scan.
//!
//! The local default, [`LocalFile`], uses positional reads (`pread`) of exactly the
//! ranges a scan needs, never a memory map: a file truncated by another process while a
//! scan runs turns a mapped read into SIGBUS, which would kill the daemon, whereas a
//! positional read returns a short read, reported as [`std::io::ErrorKind::UnexpectedEof`].

use std::fs::File;
use std::io;
use std::ops::Range;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use bytes::{Buf, Bytes};
use parquet::errors::ParquetError;
use parquet::file::reader::{ChunkReader, Length};

/// Random access to the bytes of one file.
pub trait ByteRangeSource: Send + Sync + std::fmt::Debug {
    /// The file's length in bytes (as seen when it was opened).
    fn len(&self) -> u64;

    /// Whether the file is empty.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The bytes of `range`, all of them: a range past the end is an error (never a short
    /// answer, never an allocation larger than the file).
    fn read_range(&self, range: Range<u64>) -> io::Result<Bytes>;

    /// Ranges closer than this are read as one (the gap read and dropped): fewer system
    /// calls or requests for a few wasted bytes. Local positional reads are cheap, so
    /// the default merges only touching ranges; an object store would say about 1 MiB.
    fn coalesce_gap(&self) -> u64 {
        0
    }
}

/// A local file read with positional reads (see the module documentation for why not
/// `mmap`).
#[derive(Debug)]
pub struct LocalFile {
    file: File,
    len: u64,
}

impl LocalFile {
    /// Open `path`.
    pub fn open(path: &Path) -> io::Result<Self> {
        let file = File::open(path)?;
        let len = file.metadata()?.len();
        Ok(Self { file, len })
    }

    /// The open file (for footer parsing).
    pub fn file(&self) -> &File {
        &self.file
    }
}

impl ByteRangeSource for LocalFile {
    fn len(&self) -> u64 {
        self.len
    }

    fn read_range(&self, range: Range<u64>) -> io::Result<Bytes> {
        if range.start > range.end || range.end > self.len {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "byte range {}..{} lies outside the file ({} bytes)",
                    range.start, range.end, self.len
                ),
            ));
        }
        let n = usize::try_from(range.end - range.start)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "byte range too large"))?;
        let mut buf = vec![0u8; n];
        self.file
            .read_exact_at(&mut buf, range.start)
            .map_err(|e| match e.kind() {
                io::ErrorKind::UnexpectedEof => io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!(
                        "file shorter than when the scan opened it ({} bytes): truncated or \
                         rewritten during the scan",
                        self.len
                    ),
                ),
                _ => e,
            })?;
        Ok(Bytes::from(buf))
    }
}

/// Sorted, merged `ranges` (gaps up to `gap` bridged).
pub(crate) fn coalesce(mut ranges: Vec<Range<u64>>, gap: u64) -> Vec<Range<u64>> {
    ranges.retain(|r| r.start < r.end);
    ranges.sort_unstable_by_key(|r| r.start);
    let mut out: Vec<Range<u64>> = Vec::with_capacity(ranges.len());
    for r in ranges {
        match out.last_mut() {
            Some(last) if r.start <= last.end.saturating_add(gap) => {
                last.end = last.end.max(r.end);
            }
            _ => out.push(r),
        }
    }
    out
}

/// IO counters of one unit of work.
#[derive(Debug, Default)]
pub(crate) struct IoStats {
    pub(crate) bytes: AtomicU64,
    pub(crate) micros: AtomicU64,
}

impl IoStats {
    fn add(&self, bytes: u64, since: Instant) {
        self.bytes.fetch_add(bytes, Ordering::Relaxed);
        let us = u64::try_from(since.elapsed().as_micros()).unwrap_or(u64::MAX);
        self.micros.fetch_add(us, Ordering::Relaxed);
    }
}

/// Prefetched byte ranges of one file, served to the parquet decoder as a
/// [`ChunkReader`]. A request outside them (the decoder wanting a page the plan did not
/// foresee) is read from the source on the spot, so a planning shortcut can cost bytes
/// but never correctness.
#[derive(Debug, Clone)]
pub(crate) struct Prefetched {
    source: Arc<dyn ByteRangeSource>,
    /// `(start, bytes)`, sorted by start, disjoint.
    buffers: Arc<Vec<(u64, Bytes)>>,
    stats: Arc<IoStats>,
}

impl Prefetched {
    /// Read `ranges` (coalesced) from `source`.
    pub(crate) fn fetch(
        source: Arc<dyn ByteRangeSource>,
        ranges: Vec<Range<u64>>,
        stats: Arc<IoStats>,
    ) -> io::Result<Self> {
        let mut buffers = Vec::new();
        let gap = source.coalesce_gap();
        for r in coalesce(ranges, gap) {
            let start = Instant::now();
            let bytes = source.read_range(r.clone())?;
            stats.add(bytes.len() as u64, start);
            buffers.push((r.start, bytes));
        }
        Ok(Self {
            source,
            buffers: Arc::new(buffers),
            stats,
        })
    }

    /// No prefetched bytes: every request goes to the source.
    pub(crate) fn direct(source: Arc<dyn ByteRangeSource>, stats: Arc<IoStats>) -> Self {
        Self {
            source,
            buffers: Arc::new(Vec::new()),
            stats,
        }
    }

    /// The prefetched buffer holding `start..start + len`, sliced.
    fn lookup(&self, start: u64, len: u64) -> Option<Bytes> {
        let i = self.buffers.partition_point(|(s, _)| *s <= start);
        let (s, bytes) = self.buffers.get(i.checked_sub(1)?)?;
        let from = usize::try_from(start - s).ok()?;
        let to = from.checked_add(usize::try_from(len).ok()?)?;
        (to <= bytes.len()).then(|| bytes.slice(from..to))
    }

    fn read(&self, range: Range<u64>) -> Result<Bytes, ParquetError> {
        let start = Instant::now();
        let bytes = self
            .source
            .read_range(range)
            .map_err(|e| ParquetError::External(Box::new(e)))?;
        self.stats.add(bytes.len() as u64, start);
        Ok(bytes)
    }
}

impl Length for Prefetched {
    fn len(&self) -> u64 {
        self.source.len()
    }
}

impl ChunkReader for Prefetched {
    type T = bytes::buf::Reader<Bytes>;

    fn get_read(&self, start: u64) -> Result<Self::T, ParquetError> {
        let i = self.buffers.partition_point(|(s, _)| *s <= start);
        if let Some((s, bytes)) = i.checked_sub(1).and_then(|i| self.buffers.get(i)) {
            if let Ok(from) = usize::try_from(start - s) {
                if from < bytes.len() {
                    return Ok(bytes.slice(from..).reader());
                }
            }
        }
        // Not prefetched: everything to the end of the file (only the column-chunk path
        // without an offset index uses this, and it prefetches whole chunks).
        Ok(self.read(start..self.source.len().max(start))?.reader())
    }

    fn get_bytes(&self, start: u64, length: usize) -> Result<Bytes, ParquetError> {
        let len = u64::try_from(length).unwrap_or(u64::MAX);
        if let Some(b) = self.lookup(start, len) {
            return Ok(b);
        }
        let end = start
            .checked_add(len)
            .ok_or_else(|| ParquetError::General("byte range overflows".into()))?;
        self.read(start..end)
    }
}

/// Read the whole of a [`Read`] (test helper for sources).
#[cfg(test)]
fn read_all(mut r: impl std::io::Read) -> Vec<u8> {
    let mut v = Vec::new();
    r.read_to_end(&mut v).expect("read");
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Mem(Bytes);

    impl ByteRangeSource for Mem {
        fn len(&self) -> u64 {
            self.0.len() as u64
        }
        fn read_range(&self, range: Range<u64>) -> io::Result<Bytes> {
            if range.end > self.len() || range.start > range.end {
                return Err(io::Error::new(io::ErrorKind::InvalidData, "out of range"));
            }
            Ok(self.0.slice(range.start as usize..range.end as usize))
        }
    }

    #[test]
    fn coalesces_close_ranges() {
        assert_eq!(
            coalesce(vec![10..20, 0..5, 25..30, 100..110, 3..4], 5),
            vec![0..30, 100..110]
        );
        assert_eq!(coalesce(vec![5..5, 7..7], 0), Vec::<Range<u64>>::new());
    }

    #[test]
    fn prefetched_serves_slices_and_falls_back() {
        let data: Vec<u8> = (0..=255).collect();
        let src: Arc<dyn ByteRangeSource> = Arc::new(Mem(Bytes::from(data)));
        let stats = Arc::new(IoStats::default());
        let p = Prefetched::fetch(Arc::clone(&src), vec![10..20, 40..50], Arc::clone(&stats))
            .expect("fetch");
        assert_eq!(stats.bytes.load(Ordering::Relaxed), 20);
        assert_eq!(&p.get_bytes(12, 3).expect("hit")[..], &[12, 13, 14]);
        assert_eq!(stats.bytes.load(Ordering::Relaxed), 20);
        // Straddling two buffers: read from the source.
        assert_eq!(p.get_bytes(18, 25).expect("miss").len(), 25);
        assert_eq!(stats.bytes.load(Ordering::Relaxed), 45);
        assert_eq!(read_all(p.get_read(48).expect("read")), vec![48, 49]);
        assert!(p.get_bytes(250, 10).is_err());
    }

    #[test]
    fn local_file_reports_truncation() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("f");
        std::fs::write(&path, [7u8; 100]).expect("write");
        let f = LocalFile::open(&path).expect("open");
        assert_eq!(f.read_range(90..100).expect("read").len(), 10);
        assert!(f.read_range(90..101).is_err());
        std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .and_then(|w| w.set_len(50))
            .expect("truncate");
        let err = f.read_range(60..70).expect_err("truncated");
        assert_eq!(err.kind(), io::ErrorKind::UnexpectedEof);
    }
}
