//! Byte-range IO behind a trait, so that object storage (ranged GETs) is a new
//! implementation of [`ByteRangeSource`] rather than a rewrite of the scan.
//!
//! Two local implementations, chosen by [`IoMode`]:
//! - [`LocalFile`] uses positional reads (`pread`) of exactly the ranges a scan needs: a
//!   file truncated by another process while a scan runs gives a short read, reported as
//!   [`std::io::ErrorKind::UnexpectedEof`].
//! - [`MappedFile`] maps the file and hands out zero-copy slices of the mapping. A
//!   truncated file would turn a mapped read into SIGBUS, which would kill the daemon;
//!   the `mmap_guard` handler turns it into zeros and a *poisoned* mapping instead, which
//!   [`ByteRangeSource::verify_intact`] reports, and the scan checks it after decoding
//!   each row group, before handing its batches on.

use std::fs::File;
use std::io;
use std::ops::Range;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use bytes::{Buf, Bytes};
use parquet::errors::ParquetError;
use parquet::file::reader::{ChunkReader, Length};

use super::mmap_guard::Mapping;
use super::page_header::PageHeaders;

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

    /// Whether every byte handed out so far was the file's: an error when the file was
    /// truncated while being read and a read may have returned zeros (a mapped source;
    /// a positional read reports a short read itself). Callers check it after decoding
    /// and before trusting what they decoded.
    fn verify_intact(&self) -> io::Result<()> {
        Ok(())
    }

    /// A cheap (no system call) part of [`verify_intact`](Self::verify_intact): whether a
    /// read is already known to have returned bytes that are not the file's.
    fn poisoned(&self) -> bool {
        false
    }
}

/// How local files are read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IoMode {
    /// Positional reads into fresh buffers ([`LocalFile`]).
    ///
    /// The default, by measurement: on the 10-million-row `ohlcv` full scan (`cargo
    /// bench -p ringscan-io-daemon --bench scan -- full_10m`, one 70 MB file, on a
    /// shared 2-core machine) memory maps were not faster. Medians, pread vs mmap: 1
    /// thread 816 vs 1028 ms, 2 threads 846 vs 1076 ms (one run); 1145 vs 1126 ms and
    /// 1105 vs 640 ms (another, under heavier load). Since batches stream from the
    /// workers (quieter run, criterion medians): 1 thread 388 vs 369 ms, 2 threads 282
    /// vs 307 ms, against 382 ms for parquet's plain reader. No consistent winner, so
    /// this (simpler, no signal handler) path stays the default.
    #[default]
    Pread,
    /// Zero-copy slices of a memory map ([`MappedFile`]), safe under truncation.
    Mmap,
}

impl IoMode {
    /// The mode's name, as `--io` takes it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Pread => "pread",
            Self::Mmap => "mmap",
        }
    }
}

impl std::fmt::Display for IoMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for IoMode {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "pread" => Ok(Self::Pread),
            "mmap" => Ok(Self::Mmap),
            other => Err(format!("unknown IO mode {other:?} (pread or mmap)")),
        }
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
            return Err(out_of_range(&range, self.len));
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

fn out_of_range(range: &Range<u64>, len: u64) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!(
            "byte range {}..{} lies outside the file ({} bytes)",
            range.start, range.end, len
        ),
    )
}

/// A local file read through a memory map: [`read_range`](ByteRangeSource::read_range)
/// returns slices of the mapping without copying. Safe when the file is truncated while
/// mapped: reads past the new end return zeros instead of killing the process, and
/// [`verify_intact`](ByteRangeSource::verify_intact) then reports the truncation (see
/// the module documentation).
#[derive(Debug)]
pub struct MappedFile {
    path: PathBuf,
    file: File,
    len: u64,
    mapping: Option<Arc<Mapping>>,
    /// The whole mapping as one `Bytes` (empty for an empty file); reads slice it.
    whole: Bytes,
}

/// The mapping as a `Bytes` owner.
#[derive(Debug)]
struct Shared(Arc<Mapping>);

impl AsRef<[u8]> for Shared {
    fn as_ref(&self) -> &[u8] {
        (*self.0).as_ref()
    }
}

impl MappedFile {
    /// Open and map `path`.
    pub fn open(path: &Path) -> io::Result<Self> {
        Self::from_local(path, &LocalFile::open(path)?)
    }

    /// Map an opened file (a duplicate of its descriptor), as long as it was when opened.
    /// Fails when the file cannot be mapped, including when too many files are mapped at
    /// once (the caller may fall back to `local`).
    pub fn from_local(path: &Path, local: &LocalFile) -> io::Result<Self> {
        let (file, len) = (local.file.try_clone()?, local.len);
        let (mapping, whole) = if len == 0 {
            (None, Bytes::new())
        } else {
            let n = usize::try_from(len)
                .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "file too large to map"))?;
            let mapping = Arc::new(Mapping::map(&file, n)?);
            let whole = Bytes::from_owner(Shared(Arc::clone(&mapping)));
            (Some(mapping), whole)
        };
        Ok(Self {
            path: path.to_path_buf(),
            file,
            len,
            mapping,
            whole,
        })
    }

    /// The open file.
    pub fn file(&self) -> &File {
        &self.file
    }
}

impl ByteRangeSource for MappedFile {
    fn len(&self) -> u64 {
        self.len
    }

    fn read_range(&self, range: Range<u64>) -> io::Result<Bytes> {
        if range.start > range.end || range.end > self.len {
            return Err(out_of_range(&range, self.len));
        }
        // In range of `whole` (whose length is `len`), so these fit in usize.
        let (start, end) = (range.start as usize, range.end as usize);
        Ok(self.whole.slice(start..end))
    }

    fn verify_intact(&self) -> io::Result<()> {
        let now = self.file.metadata()?.len();
        if self.poisoned() || now < self.len {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!(
                    "file {} was truncated while it was being read ({} bytes when opened, {now} now)",
                    self.path.display(),
                    self.len
                ),
            ));
        }
        Ok(())
    }

    fn poisoned(&self) -> bool {
        self.mapping.as_deref().is_some_and(Mapping::poisoned)
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

    #[test]
    fn io_mode_parses_its_names() {
        for mode in [IoMode::Pread, IoMode::Mmap] {
            assert_eq!(mode.name().parse::<IoMode>(), Ok(mode));
        }
        assert!("mapped".parse::<IoMode>().is_err());
    }

    /// Regression guard for the reason `LocalFile` was the only reader: a mapped file
    /// shrinking under a read raised SIGBUS and killed the process.
    #[test]
    fn mapped_file_survives_truncation_and_reports_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("f");
        let page = 4096u64;
        let data: Vec<u8> = (0..4 * page).map(|i| (i % 251) as u8 + 1).collect();
        std::fs::write(&path, &data).expect("write");
        let f = MappedFile::open(&path).expect("map");
        assert_eq!(&f.read_range(10..20).expect("read")[..], &data[10..20]);
        f.verify_intact().expect("intact before the truncation");
        // A slice taken before the truncation, read after it, faults just the same.
        let early = f.read_range(3 * page..3 * page + 100).expect("slice");
        std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .and_then(|w| w.set_len(50))
            .expect("truncate");
        // Past the new end, on pages that no longer exist: zeros, not a dead process.
        let late = f.read_range(2 * page + 8..2 * page + 108).expect("slice");
        assert!(late.iter().all(|&b| b == 0), "{late:?}");
        assert!(early.iter().all(|&b| b == 0), "{early:?}");
        assert!(f.poisoned(), "the fault was not recorded");
        let err = f.verify_intact().expect_err("the truncation is reported");
        assert!(
            err.to_string()
                .contains("was truncated while it was being read"),
            "{err}"
        );
        assert!(
            err.to_string().contains(&path.display().to_string()),
            "{err}"
        );
        // Out of range is still out of range (against the length when opened).
        assert!(f.read_range(4 * page..4 * page + 1).is_err());
    }

    #[test]
    fn mapped_file_reports_a_shrink_without_a_fault() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("f");
        std::fs::write(&path, [9u8; 100]).expect("write");
        let f = MappedFile::open(&path).expect("map");
        std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .and_then(|w| w.set_len(50))
            .expect("truncate");
        // Same page as the new end: zeros without SIGBUS; the size check catches it.
        let tail = f.read_range(60..70).expect("slice");
        assert!(tail.iter().all(|&b| b == 0), "{tail:?}");
        assert!(!f.poisoned());
        assert!(f.verify_intact().is_err());
    }

    #[test]
    fn empty_files_map() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("empty");
        std::fs::write(&path, b"").expect("write");
        let f = MappedFile::open(&path).expect("map");
        assert!(f.is_empty());
        assert_eq!(f.read_range(0..0).expect("empty range").len(), 0);
        assert!(f.read_range(0..1).is_err());
        f.verify_intact().expect("intact");
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]

        /// The optimized reader (zero-copy slices of a map) against the reference one
        /// (positional reads): same bytes for every range, the same refusals outside.
        #[test]
        fn mapped_file_matches_local_file(
            len in 0u64..20_000,
            ranges in proptest::collection::vec((0u64..21_000, 0u64..21_000), 1..24),
        ) {
            let dir = tempfile::tempdir().expect("tempdir");
            let path = dir.path().join("f");
            let data: Vec<u8> = (0..len).map(|i| (i.wrapping_mul(31) % 256) as u8).collect();
            std::fs::write(&path, &data).expect("write");
            let local = LocalFile::open(&path).expect("open");
            let mapped = MappedFile::open(&path).expect("map");
            proptest::prop_assert_eq!(local.len(), mapped.len());
            for (a, b) in ranges {
                // Both orders: start > end must be refused too.
                let range = a..b;
                match (local.read_range(range.clone()), mapped.read_range(range.clone())) {
                    (Ok(x), Ok(y)) => {
                        proptest::prop_assert_eq!(&x[..], &y[..]);
                        let (s, e) = (a as usize, b as usize);
                        proptest::prop_assert_eq!(&x[..], &data[s..e]);
                    }
                    (Err(x), Err(y)) => {
                        proptest::prop_assert_eq!(x.kind(), y.kind());
                        proptest::prop_assert_eq!(x.to_string(), y.to_string());
                    }
                    (x, y) => proptest::prop_assert!(
                        false,
                        "{range:?} of {len}: pread {x:?}, mmap {y:?}"
                    ),
                }
            }
            proptest::prop_assert!(mapped.verify_intact().is_ok());
        }
    }
}
