//! Local files behind [`ByteRangeSource`], chosen by [`IoMode`]:
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
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use ringscan_ipc::scan_data::FileVersion;
use ringscan_lru::ByteLru;

use super::mmap_guard::Mapping;
use super::ByteRangeSource;

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
        Self::open_with_metadata(path).map(|(file, _)| file)
    }

    /// Open `path`, with the metadata of what was opened.
    pub fn open_with_metadata(path: &Path) -> io::Result<(Self, std::fs::Metadata)> {
        let file = File::open(path)?;
        let meta = file.metadata()?;
        let len = meta.len();
        Ok((Self { file, len }, meta))
    }

    /// The open file (for footer parsing).
    pub fn file(&self) -> &File {
        &self.file
    }
}

/// Local files kept open between scans, so that a point lookup does not open, `fstat`,
/// check and close each file of its table again (a fifth of the daemon's time for a
/// lookup over the wire). A kept file is served again while a `stat` of its path shows
/// the same file as when it was opened (device, inode, size, modification and change
/// times): a file replaced or rewritten in place is opened anew. At most `capacity` stay
/// open, the least recently used closed first.
#[derive(Debug)]
pub struct OpenFiles {
    kept: Mutex<ByteLru<PathBuf, (FileVersion, Arc<LocalFile>)>>,
}

impl OpenFiles {
    /// Files kept open by default: a table of more files costs an `open` per file
    /// and scan past these.
    pub const DEFAULT_CAPACITY: usize = 128;

    /// Keeping at most `capacity` files open.
    pub fn new(capacity: usize) -> Self {
        Self {
            kept: Mutex::new(ByteLru::new(capacity)),
        }
    }

    /// `path` open, and the version of what is open: kept from an earlier call while
    /// unchanged, else opened now and given to `check` (a file it refuses is not kept).
    /// Unchanged as `seen` says, the version a `stat` of `path` showed the caller just
    /// now, else as a `stat` now shows. A failed `stat` or `open` is reported through
    /// `io_error`.
    pub fn open<E>(
        &self,
        path: &Path,
        seen: Option<&FileVersion>,
        io_error: impl Fn(io::Error) -> E,
        check: impl FnOnce(&LocalFile) -> Result<(), E>,
    ) -> Result<(Arc<LocalFile>, FileVersion), E> {
        let now = match seen {
            Some(seen) => seen.clone(),
            None => {
                let stat = std::fs::metadata(path).map_err(&io_error)?;
                FileVersion::from_metadata(PathBuf::new(), &stat)
            }
        };
        if let Some((version, file)) = self.lock().get(&path.to_path_buf()) {
            if version.same_contents(&now) {
                return Ok((Arc::clone(file), version.clone()));
            }
        }
        let (file, meta) = LocalFile::open_with_metadata(path).map_err(io_error)?;
        check(&file)?;
        let file = Arc::new(file);
        let version = FileVersion::from_metadata(PathBuf::new(), &meta);
        self.lock()
            .insert(path.to_path_buf(), (version.clone(), Arc::clone(&file)), 1);
        Ok((file, version))
    }

    /// Closes the kept files whose path no longer shows the same file (deleted,
    /// replaced or rewritten): a deleted file's space is freed only once it is closed.
    pub fn sweep(&self) {
        let kept: Vec<(PathBuf, FileVersion)> = self
            .lock()
            .iter()
            .map(|(path, (version, _))| (path.clone(), version.clone()))
            .collect();
        for (path, version) in kept {
            let same = std::fs::metadata(&path).is_ok_and(|m| {
                FileVersion::from_metadata(PathBuf::new(), &m).same_contents(&version)
            });
            if !same {
                let mut kept = self.lock();
                if kept.peek(&path).is_some_and(|(v, _)| *v == version) {
                    kept.remove(&path);
                }
            }
        }
    }

    /// How many files are open now.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether no file is kept open.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, ByteLru<PathBuf, (FileVersion, Arc<LocalFile>)>> {
        self.kept
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A kept file is served while its path shows the same file; replaced (renamed
    /// over), rewritten in place or refused by the check, it is opened anew; past the
    /// capacity the least recently used is closed.
    #[test]
    fn open_files_are_kept_while_unchanged() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (a, b, c) = (
            dir.path().join("a"),
            dir.path().join("b"),
            dir.path().join("c"),
        );
        std::fs::write(&a, b"first").expect("write");
        std::fs::write(&b, b"other").expect("write");
        std::fs::write(&c, b"third").expect("write");
        let files = OpenFiles::new(2);
        let ok = |_: &LocalFile| Ok::<(), io::Error>(());
        let open = |path: &Path| files.open(path, None, |e| e, ok).expect("open");
        let read = |f: &LocalFile| f.read_range(0..f.len()).expect("read");
        let (first, _) = open(&a);
        let (again, _) = open(&a);
        assert!(Arc::ptr_eq(&first, &again), "unchanged: kept");

        // Replaced by a rename: the new file's bytes.
        let fresh = dir.path().join("a.new");
        std::fs::write(&fresh, b"second!").expect("write");
        std::fs::rename(&fresh, &a).expect("rename");
        let (replaced, version) = open(&a);
        assert!(!Arc::ptr_eq(&first, &replaced));
        assert_eq!(&read(&replaced)[..], b"second!");
        assert_eq!(version.size_bytes, 7);

        // Rewritten in place (same inode, other size).
        std::fs::write(&a, b"third version").expect("rewrite");
        let (rewritten, _) = open(&a);
        assert!(!Arc::ptr_eq(&replaced, &rewritten));
        assert_eq!(&read(&rewritten)[..], b"third version");

        // Refused by the check: an error, and not kept.
        let refused = files.open(&b, None, |e| e, |_| Err(io::Error::other("no")));
        assert!(refused.is_err());
        let (kept_b, _) = open(&b);
        let (kept_c, _) = open(&c);
        assert_eq!(files.len(), 2, "at most the capacity");
        assert!(Arc::ptr_eq(&kept_c, &open(&c).0));
        assert!(Arc::ptr_eq(&kept_b, &open(&b).0));
        // `a` was the least recently used: closed, opened again.
        let (last_a, _) = open(&a);
        assert!(!Arc::ptr_eq(&rewritten, &last_a));

        // Deleted: closed by a sweep (the others stay); opening it, the `stat`'s error.
        std::fs::remove_file(&a).expect("remove");
        files.sweep();
        assert_eq!(files.len(), 1);
        assert!(Arc::ptr_eq(&kept_b, &open(&b).0), "unchanged: still kept");
        assert_eq!(Arc::strong_count(&last_a), 1, "closed once its holders are");
        let gone = files.open(&a, None, |e| e.kind(), |_| Ok(()));
        assert_eq!(gone.err(), Some(io::ErrorKind::NotFound));
    }

    /// A version the caller saw just now stands for the `stat`: the kept file is served
    /// at that version (even once the path shows another file: the caller's listing
    /// predates it), and a version other than the kept one opens the path anew.
    #[test]
    fn a_version_seen_by_the_caller_replaces_the_stat() {
        let dir = tempfile::tempdir().expect("tempdir");
        let a = dir.path().join("a");
        std::fs::write(&a, b"first").expect("write");
        let files = OpenFiles::new(4);
        let ok = |_: &LocalFile| Ok::<(), io::Error>(());
        let (first, seen) = files.open(&a, None, |e| e, ok).expect("open");
        let fresh = dir.path().join("a.new");
        std::fs::write(&fresh, b"second!").expect("write");
        std::fs::rename(&fresh, &a).expect("rename");
        let (kept, version) = files.open(&a, Some(&seen), |e| e, ok).expect("open");
        assert!(Arc::ptr_eq(&first, &kept), "served at the version seen");
        assert!(version.same_contents(&seen));
        let now = FileVersion::from_metadata(PathBuf::new(), &std::fs::metadata(&a).unwrap());
        let (reopened, version) = files.open(&a, Some(&now), |e| e, ok).expect("open");
        assert!(
            !Arc::ptr_eq(&first, &reopened),
            "another version: opened anew"
        );
        assert_eq!(version.size_bytes, 7);
        assert_eq!(&reopened.read_range(0..7).expect("read")[..], b"second!");
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
