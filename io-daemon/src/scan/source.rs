//! The scan's side of byte-range IO: the ranges a row group needs, read through a
//! [`ByteRangeSource`] (local file or object, see [`crate::storage`]) and served to the
//! parquet decoder from memory ([`Prefetched`]).

use std::io;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use bytes::{Buf, Bytes};
use parquet::errors::ParquetError;
use parquet::file::reader::{ChunkReader, Length};

pub(crate) use crate::storage::coalesce;
pub use crate::storage::{ByteRangeSource, IoMode, LocalFile, MappedFile};

use super::page_header::PageHeaders;

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
    /// Where the decoder finds page headers: each is vetted before it reads one.
    headers: Arc<PageHeaders>,
    stats: Arc<IoStats>,
}

impl Prefetched {
    /// Read `ranges` (coalesced) from `source`.
    pub(crate) fn fetch(
        source: Arc<dyn ByteRangeSource>,
        ranges: Vec<Range<u64>>,
        stats: Arc<IoStats>,
    ) -> io::Result<Self> {
        let ranges = coalesce(ranges, source.coalesce_gap());
        let start = Instant::now();
        let parts = source.read_ranges(&ranges)?;
        if parts.len() != ranges.len() {
            return Err(io::Error::other(format!(
                "{} byte ranges asked for, {} read",
                ranges.len(),
                parts.len()
            )));
        }
        let bytes: u64 = parts.iter().map(|b| b.len() as u64).sum();
        stats.add(bytes, start);
        let buffers: Vec<(u64, Bytes)> = ranges.iter().map(|r| r.start).zip(parts).collect();
        Ok(Self {
            source,
            buffers: Arc::new(buffers),
            headers: Arc::default(),
            stats,
        })
    }

    /// Vets page headers against what `headers` knows of the chunks read.
    pub(crate) fn with_page_headers(mut self, headers: PageHeaders) -> Self {
        self.headers = Arc::new(headers);
        self
    }

    /// No prefetched bytes: every request goes to the source.
    pub(crate) fn direct(source: Arc<dyn ByteRangeSource>, stats: Arc<IoStats>) -> Self {
        Self {
            source,
            buffers: Arc::new(Vec::new()),
            headers: Arc::default(),
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

    fn vet(&self, at: u64, bytes: &[u8]) -> Result<(), ParquetError> {
        self.headers.vet(at, bytes).map_err(ParquetError::General)
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

/// What [`Prefetched::get_read`] hands the parquet crate, which reads page headers
/// through it: the header is vetted at the first read (the crate also asks for a reader
/// it does not read, at the data of a page whose header it peeked earlier).
pub(crate) struct HeaderReader {
    bytes: bytes::buf::Reader<Bytes>,
    /// Where the reader starts and what vets the header there, until the first read.
    vet: Option<(u64, Arc<PageHeaders>)>,
}

impl io::Read for HeaderReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if let Some((at, headers)) = self.vet.take() {
            headers
                .vet(at, self.bytes.get_ref())
                .map_err(|reason| io::Error::new(io::ErrorKind::InvalidData, reason))?;
        }
        self.bytes.read(buf)
    }
}

impl ChunkReader for Prefetched {
    type T = HeaderReader;

    /// The parquet crate reads only page headers through this (then the page with
    /// [`get_bytes`](ChunkReader::get_bytes)): each is vetted before it is read.
    fn get_read(&self, start: u64) -> Result<Self::T, ParquetError> {
        let i = self.buffers.partition_point(|(s, _)| *s <= start);
        let prefetched =
            i.checked_sub(1)
                .and_then(|i| self.buffers.get(i))
                .and_then(|(s, bytes)| {
                    let from = usize::try_from(start - s).ok()?;
                    (from < bytes.len()).then(|| bytes.slice(from..))
                });
        let bytes = match prefetched {
            Some(bytes) => bytes,
            // Not prefetched: everything to the end of the file (only the column-chunk
            // path without an offset index uses this, and it prefetches whole chunks).
            None => self.read(start..self.source.len().max(start))?,
        };
        Ok(HeaderReader {
            bytes: bytes.reader(),
            vet: Some((start, Arc::clone(&self.headers))),
        })
    }

    fn get_bytes(&self, start: u64, length: usize) -> Result<Bytes, ParquetError> {
        let len = u64::try_from(length).unwrap_or(u64::MAX);
        let bytes = match self.lookup(start, len) {
            Some(b) => b,
            None => {
                let end = start
                    .checked_add(len)
                    .ok_or_else(|| ParquetError::General("byte range overflows".into()))?;
                self.read(start..end)?
            }
        };
        if self.headers.is_page_start(start) {
            self.vet(start, &bytes)?;
        }
        Ok(bytes)
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
        assert!(p.get_bytes(250, 10).is_err());
    }

    /// A page header whose list claims 2^31 doubles, at the end of its input: parquet
    /// 59.3.2 spent 38 s skipping them one by one (fuzz target pages, found in CI).
    #[test]
    fn a_page_header_claiming_more_than_follows_is_refused_at_once() {
        // { field 1 i32 = 1 } stop, then { field 1 list<double> of 2^31 } with 8 bytes.
        let good = [0x15, 0x02, 0x00];
        let mut bytes = good.to_vec();
        bytes.extend_from_slice(&[0x19, 0xf7, 0x80, 0x80, 0x80, 0x80, 0x08]);
        bytes.extend_from_slice(&[0u8; 8]);
        let src: Arc<dyn ByteRangeSource> = Arc::new(Mem(Bytes::from(bytes.clone())));
        let stats = Arc::new(IoStats::default());
        let rg = super::super::page_header::int64_row_group();
        let mut headers = PageHeaders::default();
        headers.add_chunk(&rg, 0, 0..bytes.len() as u64, [3]);
        let p = Prefetched::fetch(
            Arc::clone(&src),
            vec![0..2, 2..bytes.len() as u64],
            Arc::clone(&stats),
        )
        .expect("fetch")
        .with_page_headers(headers.finish());
        assert_eq!(read_all(p.get_read(0).expect("a good header")), bytes);
        let mut hostile = p.get_read(3).expect("a reader, not yet read");
        let err = io::Read::read_to_end(&mut hostile, &mut Vec::new()).expect_err("vetted");
        assert!(err.to_string().contains("page header at byte 3"), "{err}");
        // Through the offset index's path: the page's bytes, header first.
        assert!(p.get_bytes(3, 15).is_err());
        assert!(
            p.get_bytes(0, 3).is_ok(),
            "not a listed page start: not vetted"
        );
        // Read from the source when not prefetched: vetted the same way.
        let direct = Prefetched::direct(src, stats).with_page_headers(PageHeaders::default());
        let mut hostile = direct.get_read(3).expect("a reader");
        assert!(io::Read::read_to_end(&mut hostile, &mut Vec::new()).is_err());
        assert_eq!(read_all(direct.get_read(0).expect("a good header")), bytes);
    }
}
