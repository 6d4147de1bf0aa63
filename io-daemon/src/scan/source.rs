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
use crate::storage::PendingReads;
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
    /// Read `ranges` (coalesced) from `source`, or slice them out of `ahead` when those
    /// reads, started earlier, cover them. A wait on a remote source gives up once
    /// `stop` says so.
    pub(crate) fn fetch(
        source: Arc<dyn ByteRangeSource>,
        ranges: Vec<Range<u64>>,
        ahead: Option<&ReadAhead>,
        stop: &dyn Fn() -> bool,
        stats: Arc<IoStats>,
    ) -> io::Result<Self> {
        // What the decoder needs, counted as read: the ranges without the gaps bridged
        // (fetched but not needed: the store's own counter has them).
        let gap = source.coalesce_gap();
        let needed = (gap > 0).then(|| {
            coalesce(ranges.clone(), 0)
                .iter()
                .map(|r| r.end - r.start)
                .sum::<u64>()
        });
        let ranges = coalesce(ranges, gap);
        let start = Instant::now();
        let parts = match ahead {
            Some(ahead) if ahead.covers(&ranges) => ahead.read(&ranges, stop)?,
            _ => source.read_ranges_until(&ranges, stop)?,
        };
        if parts.len() != ranges.len() {
            return Err(io::Error::other(format!(
                "{} byte ranges asked for, {} read",
                ranges.len(),
                parts.len()
            )));
        }
        let bytes: u64 = parts.iter().map(|b| b.len() as u64).sum();
        stats.add(needed.unwrap_or(bytes), start);
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

/// Byte ranges of one file read ahead of need for several tasks (consecutive row
/// groups: one request where their chunks touch), shared by them: the first task to
/// need them waits for the requests, the others for it. Dropped with the last task that
/// holds it, which aborts requests still in flight.
#[derive(Debug)]
pub(crate) struct ReadAhead {
    /// Sorted, disjoint.
    ranges: Vec<Range<u64>>,
    state: std::sync::Mutex<Ahead>,
    ready: std::sync::Condvar,
}

#[derive(Debug)]
enum Ahead {
    /// Started; nobody waits yet.
    Started(PendingReads),
    /// A task waits for the requests.
    Waiting,
    /// Each range's bytes.
    Ready(Arc<Vec<Bytes>>),
    /// The requests failed (or the task waiting for them was stopped).
    Failed(io::ErrorKind, String),
}

/// How often a task waiting for another's read asks whether the scan stopped.
const AHEAD_POLL: std::time::Duration = std::time::Duration::from_millis(10);

impl ReadAhead {
    /// Shares `pending`, the reads of `ranges`.
    pub(crate) fn new(ranges: Vec<Range<u64>>, pending: PendingReads) -> Self {
        debug_assert!(ranges.windows(2).all(|w| w[0].end <= w[1].start));
        Self {
            ranges,
            state: std::sync::Mutex::new(Ahead::Started(pending)),
            ready: std::sync::Condvar::new(),
        }
    }

    /// Reads already done: `buffers` are the bytes of `ranges` (tests).
    #[cfg(test)]
    fn ready(ranges: Vec<Range<u64>>, buffers: Vec<Bytes>) -> Self {
        Self {
            ranges,
            state: std::sync::Mutex::new(Ahead::Ready(Arc::new(buffers))),
            ready: std::sync::Condvar::new(),
        }
    }

    /// The range of `self.ranges` holding all of `r`.
    fn holding(&self, r: &Range<u64>) -> Option<usize> {
        let i = self
            .ranges
            .partition_point(|a| a.start <= r.start)
            .checked_sub(1)?;
        (r.end <= self.ranges[i].end).then_some(i)
    }

    /// Whether every one of `ranges` lies inside the ranges read ahead.
    pub(crate) fn covers(&self, ranges: &[Range<u64>]) -> bool {
        ranges.iter().all(|r| self.holding(r).is_some())
    }

    /// The bytes of each of `ranges` (covered: see [`covers`](Self::covers)), once the
    /// reads are done; an `Interrupted` error once `stop` says so.
    pub(crate) fn read(
        &self,
        ranges: &[Range<u64>],
        stop: &dyn Fn() -> bool,
    ) -> io::Result<Vec<Bytes>> {
        let buffers = self.wait(stop)?;
        ranges
            .iter()
            .map(|r| {
                let i = self.holding(r).ok_or_else(|| {
                    io::Error::other(format!("{}..{} was not read ahead", r.start, r.end))
                })?;
                let at = usize::try_from(r.start - self.ranges[i].start).unwrap_or(usize::MAX);
                let len = usize::try_from(r.end - r.start).unwrap_or(usize::MAX);
                let buffer = &buffers[i];
                if at.checked_add(len).is_none_or(|end| end > buffer.len()) {
                    return Err(io::Error::other("a read-ahead buffer is short"));
                }
                Ok(buffer.slice(at..at + len))
            })
            .collect()
    }

    fn wait(&self, stop: &dyn Fn() -> bool) -> io::Result<Arc<Vec<Bytes>>> {
        let lock = || {
            self.state
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
        };
        let mut state = lock();
        loop {
            match &*state {
                Ahead::Ready(buffers) => return Ok(Arc::clone(buffers)),
                Ahead::Failed(kind, message) => return Err(io::Error::new(*kind, message.clone())),
                Ahead::Waiting => {
                    if stop() {
                        return Err(io::Error::new(io::ErrorKind::Interrupted, "cancelled"));
                    }
                    state = self
                        .ready
                        .wait_timeout(state, AHEAD_POLL)
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .0;
                }
                Ahead::Started(_) => {
                    let Ahead::Started(pending) = std::mem::replace(&mut *state, Ahead::Waiting)
                    else {
                        continue; // Not reached: matched as started.
                    };
                    drop(state);
                    let result = pending
                        .wait(stop)
                        .map_err(crate::storage::StorageError::into_io);
                    state = lock();
                    *state = match result {
                        Ok(buffers) if buffers.len() == self.ranges.len() => {
                            Ahead::Ready(Arc::new(buffers))
                        }
                        Ok(buffers) => Ahead::Failed(
                            io::ErrorKind::Other,
                            format!(
                                "{} byte ranges asked for, {} read",
                                self.ranges.len(),
                                buffers.len()
                            ),
                        ),
                        Err(e) => Ahead::Failed(e.kind(), e.to_string()),
                    };
                    self.ready.notify_all();
                }
            }
        }
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
        let p = Prefetched::fetch(
            Arc::clone(&src),
            vec![10..20, 40..50],
            None,
            &|| false,
            Arc::clone(&stats),
        )
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
            None,
            &|| false,
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

    /// Served from a read-ahead, a fetch hands the decoder the same bytes as read from
    /// the source, counts what it needed, and reads what the read-ahead does not cover
    /// from the source.
    #[test]
    fn read_ahead_serves_the_bytes_the_source_would() {
        let data: Vec<u8> = (0..=255).collect();
        let src: Arc<dyn ByteRangeSource> = Arc::new(Mem(Bytes::from(data.clone())));
        let merged = vec![8..60, 100..200];
        let buffers = merged
            .iter()
            .map(|r| Bytes::copy_from_slice(&data[r.start as usize..r.end as usize]))
            .collect();
        let ahead = ReadAhead::ready(merged, buffers);
        assert!(ahead.covers(&[10..20, 100..200, 59..60]));
        assert!(!ahead.covers(std::slice::from_ref(&(50..70))));
        assert!(!ahead.covers(std::slice::from_ref(&(0..9))));
        let stop = || false;
        for wanted in [
            vec![10..20, 40..50],
            vec![100..150, 8..9],
            vec![50..70, 120..130],
        ] {
            let direct = Prefetched::fetch(
                Arc::clone(&src),
                wanted.clone(),
                None,
                &stop,
                Arc::new(IoStats::default()),
            )
            .expect("direct");
            let stats = Arc::new(IoStats::default());
            let served = Prefetched::fetch(
                Arc::clone(&src),
                wanted.clone(),
                Some(&ahead),
                &stop,
                Arc::clone(&stats),
            )
            .expect("served");
            for r in &wanted {
                let len = r.end - r.start;
                assert_eq!(
                    served.get_bytes(r.start, len as usize).expect("served"),
                    direct.get_bytes(r.start, len as usize).expect("direct"),
                    "{r:?}"
                );
            }
            let needed: u64 = coalesce(wanted, 0).iter().map(|r| r.end - r.start).sum();
            assert_eq!(stats.bytes.load(Ordering::Relaxed), needed);
        }
    }

    /// A read-ahead whose requests failed fails every task that waits on it, with the
    /// error's kind; a stopped wait is `Interrupted`.
    #[test]
    fn a_failed_read_ahead_fails_its_tasks() {
        let whole: Range<u64> = 0..10;
        let half: Range<u64> = 0..5;
        let ahead = ReadAhead {
            ranges: std::iter::once(whole.clone()).collect(),
            state: std::sync::Mutex::new(Ahead::Failed(io::ErrorKind::NotFound, "gone".into())),
            ready: std::sync::Condvar::new(),
        };
        for _ in 0..2 {
            let err = ahead
                .read(std::slice::from_ref(&half), &|| false)
                .expect_err("failed");
            assert_eq!(err.kind(), io::ErrorKind::NotFound);
        }
        let waiting = ReadAhead {
            ranges: std::iter::once(whole).collect(),
            state: std::sync::Mutex::new(Ahead::Waiting),
            ready: std::sync::Condvar::new(),
        };
        let err = waiting
            .read(std::slice::from_ref(&half), &|| true)
            .expect_err("stopped");
        assert_eq!(err.kind(), io::ErrorKind::Interrupted);
    }
}
