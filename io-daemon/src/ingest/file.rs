//! The files under the write-ahead log, behind two traits.
//!
//! The log needs very little of a file system: append, `fdatasync`, read a whole file
//! back, cut it, and a directory whose names it can create, list, remove and make
//! durable. Putting that behind [`LogDir`] and [`LogFile`] is what lets the tests of
//! the log cut the power between two writes, fail an `fdatasync`, fill the disk or tear
//! a write in half ([`testing::PowerCutDir`]), and count the syncs a workload needs
//! ([`testing::CountingDir`]). [`FsDir`] is the real thing: `std::fs`, files opened for
//! append, durability by `fdatasync` (`File::sync_data`).

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

/// One log file, open for appending and reading.
pub trait LogFile: Send {
    /// Writes all of `bytes` at the end of the file. On an error, a prefix of `bytes` may
    /// have been written (a full disk, a crash mid-write): the caller cuts the file back
    /// with [`truncate`](Self::truncate).
    fn append(&mut self, bytes: &[u8]) -> io::Result<()>;

    /// Makes every byte appended so far durable (`fdatasync`). After an error, nothing
    /// appended since the last successful sync may be assumed durable, and a later sync
    /// that succeeds does not change that (Linux may have dropped the dirty pages and
    /// report success next time): the caller gives up on the file.
    fn sync(&mut self) -> io::Result<()>;

    /// The file's length in bytes, as this handle last saw it.
    fn len(&self) -> u64;

    /// Whether the file is empty.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The whole file's bytes.
    fn read_all(&mut self) -> io::Result<Vec<u8>>;

    /// Cuts (or extends with zeros) the file to `len` bytes and makes that durable.
    fn truncate(&mut self, len: u64) -> io::Result<()>;
}

/// A directory of log files.
pub trait LogDir: Send + Sync {
    /// Creates the file `name`, which must not exist yet (`O_EXCL`). Its name is durable
    /// only after [`sync_dir`](Self::sync_dir).
    fn create(&self, name: &str) -> io::Result<Box<dyn LogFile>>;

    /// Opens the existing file `name` for appending and reading.
    fn open(&self, name: &str) -> io::Result<Box<dyn LogFile>>;

    /// Removes the file `name` (durable after [`sync_dir`](Self::sync_dir)).
    fn remove(&self, name: &str) -> io::Result<()>;

    /// The names of the files in the directory (sorted; names that are not UTF-8 are
    /// left out: the log never writes one).
    fn list(&self) -> io::Result<Vec<String>>;

    /// Makes the directory's entries durable (`fsync` of the directory): files created
    /// or removed before it stay created or removed after a power cut.
    fn sync_dir(&self) -> io::Result<()>;
}

/// A real directory.
#[derive(Debug, Clone)]
pub struct FsDir {
    path: PathBuf,
}

impl FsDir {
    /// The directory at `path`, which must exist (nothing is checked here: the first
    /// operation reports a missing directory).
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self { path: path.into() }
    }

    /// Where the directory is.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl LogDir for FsDir {
    fn create(&self, name: &str) -> io::Result<Box<dyn LogFile>> {
        let file = OpenOptions::new()
            .read(true)
            .append(true)
            .create_new(true)
            .open(self.path.join(name))?;
        Ok(Box::new(FsFile { file, len: 0 }))
    }

    fn open(&self, name: &str) -> io::Result<Box<dyn LogFile>> {
        let file = OpenOptions::new()
            .read(true)
            .append(true)
            .open(self.path.join(name))?;
        let len = file.metadata()?.len();
        Ok(Box::new(FsFile { file, len }))
    }

    fn remove(&self, name: &str) -> io::Result<()> {
        fs::remove_file(self.path.join(name))
    }

    fn list(&self) -> io::Result<Vec<String>> {
        let mut names = Vec::new();
        for entry in fs::read_dir(&self.path)? {
            if let Ok(name) = entry?.file_name().into_string() {
                names.push(name);
            }
        }
        names.sort();
        Ok(names)
    }

    fn sync_dir(&self) -> io::Result<()> {
        File::open(&self.path)?.sync_all()
    }
}

/// A file of an [`FsDir`]. Opened with `O_APPEND`, so every write goes to the end
/// whatever the read position, and a truncated file is appended to at its new end.
#[derive(Debug)]
struct FsFile {
    file: File,
    len: u64,
}

impl LogFile for FsFile {
    fn append(&mut self, bytes: &[u8]) -> io::Result<()> {
        match self.file.write_all(bytes) {
            Ok(()) => {
                self.len += bytes.len() as u64;
                Ok(())
            }
            Err(e) => {
                // A prefix may be on the file: learn the length the file really has.
                if let Ok(meta) = self.file.metadata() {
                    self.len = meta.len();
                }
                Err(e)
            }
        }
    }

    fn sync(&mut self) -> io::Result<()> {
        self.file.sync_data()
    }

    fn len(&self) -> u64 {
        self.len
    }

    fn read_all(&mut self) -> io::Result<Vec<u8>> {
        self.file.seek(SeekFrom::Start(0))?;
        let mut bytes = Vec::with_capacity(usize::try_from(self.len).unwrap_or(0));
        self.file.read_to_end(&mut bytes)?;
        self.len = bytes.len() as u64;
        Ok(bytes)
    }

    fn truncate(&mut self, len: u64) -> io::Result<()> {
        self.file.set_len(len)?;
        self.len = len;
        self.file.sync_data()
    }
}

/// Directories for tests and benches: one that counts syncs, one that loses power.
pub mod testing {
    use std::collections::{BTreeMap, HashMap};
    use std::io;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

    use super::{LogDir, LogFile};

    /// Wraps a [`LogDir`] and counts [`LogFile::sync`] calls over all its files.
    #[derive(Clone)]
    pub struct CountingDir {
        inner: Arc<dyn LogDir>,
        syncs: Arc<AtomicU64>,
    }

    impl std::fmt::Debug for CountingDir {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.debug_struct("CountingDir")
                .field("syncs", &self.sync_count())
                .finish_non_exhaustive()
        }
    }

    impl CountingDir {
        /// Counts the syncs of the files of `inner`.
        pub fn new(inner: Arc<dyn LogDir>) -> Self {
            Self {
                inner,
                syncs: Arc::new(AtomicU64::new(0)),
            }
        }

        /// The counter itself (every call of `sync`, successful or not), to read after
        /// the directory has been handed away.
        pub fn syncs(&self) -> Arc<AtomicU64> {
            Arc::clone(&self.syncs)
        }

        /// The number of `sync` calls so far.
        pub fn sync_count(&self) -> u64 {
            // Relaxed: a plain event counter; readers that need the count of finished
            // work read it after joining the threads that did it.
            self.syncs.load(Ordering::Relaxed)
        }
    }

    impl LogDir for CountingDir {
        fn create(&self, name: &str) -> io::Result<Box<dyn LogFile>> {
            let inner = self.inner.create(name)?;
            Ok(Box::new(CountingFile {
                inner,
                syncs: Arc::clone(&self.syncs),
            }))
        }

        fn open(&self, name: &str) -> io::Result<Box<dyn LogFile>> {
            let inner = self.inner.open(name)?;
            Ok(Box::new(CountingFile {
                inner,
                syncs: Arc::clone(&self.syncs),
            }))
        }

        fn remove(&self, name: &str) -> io::Result<()> {
            self.inner.remove(name)
        }

        fn list(&self) -> io::Result<Vec<String>> {
            self.inner.list()
        }

        fn sync_dir(&self) -> io::Result<()> {
            self.inner.sync_dir()
        }
    }

    struct CountingFile {
        inner: Box<dyn LogFile>,
        syncs: Arc<AtomicU64>,
    }

    impl LogFile for CountingFile {
        fn append(&mut self, bytes: &[u8]) -> io::Result<()> {
            self.inner.append(bytes)
        }

        fn sync(&mut self) -> io::Result<()> {
            // Relaxed: see `CountingDir::sync_count`.
            self.syncs.fetch_add(1, Ordering::Relaxed);
            self.inner.sync()
        }

        fn len(&self) -> u64 {
            self.inner.len()
        }

        fn read_all(&mut self) -> io::Result<Vec<u8>> {
            self.inner.read_all()
        }

        fn truncate(&mut self, len: u64) -> io::Result<()> {
            self.inner.truncate(len)
        }
    }

    /// An in-memory [`LogDir`] that can lose power.
    ///
    /// Per file it keeps the bytes written and the length made durable by the last
    /// successful [`LogFile::sync`] (or [`LogFile::truncate`]); per directory, the names
    /// made durable by the last [`LogDir::sync_dir`]. [`power_cut`](Self::power_cut)
    /// goes back to exactly that: unsynced bytes vanish, files created since the last
    /// directory sync vanish, files removed since then come back, and every open handle
    /// fails from then on (the process that held it is gone).
    ///
    /// A failed sync is modelled as Linux behaves: the unsynced bytes stay readable
    /// until the power goes, but later syncs of that file report success without making
    /// them durable, until the file is cut back to its durable length. A log that
    /// retried the sync would be told its data is safe and lose it at the next
    /// power cut.
    ///
    /// Faults are one-shot and hit the next matching call on any file of the
    /// directory; a power cut clears the ones not yet used.
    /// Clones share the same "disk".
    #[derive(Debug, Clone, Default)]
    pub struct PowerCutDir {
        disk: Arc<Mutex<Disk>>,
    }

    #[derive(Debug, Default)]
    struct Disk {
        files: HashMap<u64, MemFile>,
        names: BTreeMap<String, u64>,
        durable_names: BTreeMap<String, u64>,
        next_id: u64,
        /// Bumped by each power cut; handles from an older epoch are dead.
        epoch: u64,
        faults: Faults,
    }

    #[derive(Debug, Default)]
    struct Faults {
        fail_sync: bool,
        fail_sync_dir: bool,
        fail_truncate: bool,
        fail_append: Option<io::Error>,
        tear_append_keep_bytes: Option<usize>,
    }

    #[derive(Debug, Default)]
    struct MemFile {
        data: Vec<u8>,
        durable_len: usize,
        /// A sync failed and the bytes past `durable_len` were not cut off since: syncs
        /// "succeed" without making anything durable.
        poisoned: bool,
    }

    fn eio() -> io::Error {
        io::Error::from_raw_os_error(libc::EIO)
    }

    impl PowerCutDir {
        /// An empty directory.
        pub fn new() -> Self {
            Self::default()
        }

        fn disk(&self) -> MutexGuard<'_, Disk> {
            self.disk.lock().unwrap_or_else(PoisonError::into_inner)
        }

        /// Cuts the power: every file goes back to its durable length, the directory to
        /// its durable names, open handles die and pending faults are cleared.
        pub fn power_cut(&self) {
            let mut disk = self.disk();
            disk.epoch += 1;
            disk.names = disk.durable_names.clone();
            let live: Vec<u64> = disk.names.values().copied().collect();
            disk.files.retain(|id, _| live.contains(id));
            for file in disk.files.values_mut() {
                file.data.truncate(file.durable_len);
                file.poisoned = false;
            }
            disk.faults = Faults::default();
        }

        /// The next [`LogFile::sync`] fails with EIO (see the type's doc for what it
        /// does to the file).
        pub fn fail_next_sync(&self) {
            self.disk().faults.fail_sync = true;
        }

        /// The next [`LogDir::sync_dir`] fails with EIO and makes nothing durable.
        pub fn fail_next_sync_dir(&self) {
            self.disk().faults.fail_sync_dir = true;
        }

        /// The next [`LogFile::truncate`] fails with EIO and changes nothing.
        pub fn fail_next_truncate(&self) {
            self.disk().faults.fail_truncate = true;
        }

        /// The next [`LogFile::append`] writes nothing and fails with `error` (a full
        /// disk: `io::Error::from_raw_os_error(libc::ENOSPC)`).
        pub fn fail_next_append_with(&self, error: io::Error) {
            self.disk().faults.fail_append = Some(error);
        }

        /// The next [`LogFile::append`] writes only its first `keep_bytes` bytes, then
        /// fails (a crash or an error mid-write).
        pub fn tear_next_append(&self, keep_bytes: usize) {
            self.disk().faults.tear_append_keep_bytes = Some(keep_bytes);
        }

        /// The names in the directory now.
        pub fn names(&self) -> Vec<String> {
            self.disk().names.keys().cloned().collect()
        }

        /// The bytes of file `name` now (durable or not).
        pub fn file_bytes(&self, name: &str) -> Option<Vec<u8>> {
            let disk = self.disk();
            let id = disk.names.get(name)?;
            disk.files.get(id).map(|f| f.data.clone())
        }

        /// Replaces the bytes of file `name` with `bytes`, durably (as if edited on
        /// disk). Returns false if there is no such file.
        pub fn set_file_bytes(&self, name: &str, bytes: Vec<u8>) -> bool {
            let mut disk = self.disk();
            let Some(&id) = disk.names.get(name) else {
                return false;
            };
            match disk.files.get_mut(&id) {
                Some(file) => {
                    file.durable_len = bytes.len();
                    file.data = bytes;
                    file.poisoned = false;
                    true
                }
                None => false,
            }
        }
    }

    impl LogDir for PowerCutDir {
        fn create(&self, name: &str) -> io::Result<Box<dyn LogFile>> {
            let mut disk = self.disk();
            if disk.names.contains_key(name) {
                return Err(io::Error::from(io::ErrorKind::AlreadyExists));
            }
            let id = disk.next_id;
            disk.next_id += 1;
            disk.files.insert(id, MemFile::default());
            disk.names.insert(name.to_owned(), id);
            Ok(Box::new(MemHandle {
                disk: Arc::clone(&self.disk),
                id,
                epoch: disk.epoch,
            }))
        }

        fn open(&self, name: &str) -> io::Result<Box<dyn LogFile>> {
            let disk = self.disk();
            let Some(&id) = disk.names.get(name) else {
                return Err(io::Error::from(io::ErrorKind::NotFound));
            };
            Ok(Box::new(MemHandle {
                disk: Arc::clone(&self.disk),
                id,
                epoch: disk.epoch,
            }))
        }

        fn remove(&self, name: &str) -> io::Result<()> {
            match self.disk().names.remove(name) {
                Some(_) => Ok(()),
                None => Err(io::Error::from(io::ErrorKind::NotFound)),
            }
        }

        fn list(&self) -> io::Result<Vec<String>> {
            Ok(self.names())
        }

        fn sync_dir(&self) -> io::Result<()> {
            let mut disk = self.disk();
            if std::mem::take(&mut disk.faults.fail_sync_dir) {
                return Err(eio());
            }
            disk.durable_names = disk.names.clone();
            Ok(())
        }
    }

    struct MemHandle {
        disk: Arc<Mutex<Disk>>,
        id: u64,
        epoch: u64,
    }

    impl MemHandle {
        /// The disk and this handle's file, or an error once the power was cut.
        fn with_file<R>(
            &self,
            f: impl FnOnce(&mut Faults, &mut MemFile) -> io::Result<R>,
        ) -> io::Result<R> {
            let mut guard = self.disk.lock().unwrap_or_else(PoisonError::into_inner);
            let disk = &mut *guard;
            if disk.epoch != self.epoch {
                return Err(io::Error::other("the power was cut: this handle is gone"));
            }
            match disk.files.get_mut(&self.id) {
                Some(file) => f(&mut disk.faults, file),
                None => Err(io::Error::from(io::ErrorKind::NotFound)),
            }
        }
    }

    impl LogFile for MemHandle {
        fn append(&mut self, bytes: &[u8]) -> io::Result<()> {
            self.with_file(|faults, file| {
                if let Some(error) = faults.fail_append.take() {
                    return Err(error);
                }
                if let Some(keep) = faults.tear_append_keep_bytes.take() {
                    let keep = keep.min(bytes.len());
                    file.data.extend_from_slice(&bytes[..keep]);
                    return Err(io::Error::other(format!(
                        "torn write: {keep} of {} bytes written",
                        bytes.len()
                    )));
                }
                file.data.extend_from_slice(bytes);
                Ok(())
            })
        }

        fn sync(&mut self) -> io::Result<()> {
            self.with_file(|faults, file| {
                if std::mem::take(&mut faults.fail_sync) {
                    file.poisoned = true;
                    return Err(eio());
                }
                if !file.poisoned {
                    file.durable_len = file.data.len();
                }
                Ok(())
            })
        }

        fn len(&self) -> u64 {
            self.with_file(|_, file| Ok(file.data.len() as u64))
                .unwrap_or(0)
        }

        fn read_all(&mut self) -> io::Result<Vec<u8>> {
            self.with_file(|_, file| Ok(file.data.clone()))
        }

        fn truncate(&mut self, len: u64) -> io::Result<()> {
            self.with_file(|faults, file| {
                if std::mem::take(&mut faults.fail_truncate) {
                    return Err(eio());
                }
                let len = usize::try_from(len)
                    .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
                file.data.resize(len, 0);
                if len <= file.durable_len {
                    // The bytes a failed sync left in doubt are cut off.
                    file.durable_len = len;
                    file.poisoned = false;
                } else if !file.poisoned {
                    file.durable_len = len;
                }
                Ok(())
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::testing::{CountingDir, PowerCutDir};
    use super::*;

    #[test]
    fn fs_dir_appends_reads_truncates_and_reopens() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = FsDir::new(tmp.path());
        let mut f = dir.create("a.log").unwrap();
        assert!(f.is_empty());
        f.append(b"hello ").unwrap();
        f.append(b"world").unwrap();
        f.sync().unwrap();
        assert_eq!(f.len(), 11);
        assert_eq!(f.read_all().unwrap(), b"hello world");
        // Reading moved the position; appends still go to the end.
        f.append(b"!").unwrap();
        assert_eq!(f.read_all().unwrap(), b"hello world!");
        f.truncate(5).unwrap();
        f.append(b"?").unwrap();
        assert_eq!(f.read_all().unwrap(), b"hello?");
        drop(f);

        let err = dir.create("a.log").err().unwrap();
        assert_eq!(err.kind(), io::ErrorKind::AlreadyExists);
        let mut f = dir.open("a.log").unwrap();
        assert_eq!(f.len(), 6);
        f.append(b"x").unwrap();
        assert_eq!(f.read_all().unwrap(), b"hello?x");
        dir.create("b.log").unwrap();
        dir.sync_dir().unwrap();
        assert_eq!(dir.list().unwrap(), ["a.log", "b.log"]);
        dir.remove("a.log").unwrap();
        assert_eq!(dir.list().unwrap(), ["b.log"]);
        assert!(dir.open("a.log").is_err());
    }

    #[test]
    fn power_cut_keeps_only_what_was_synced() {
        let dir = PowerCutDir::new();
        let mut a = dir.create("a").unwrap();
        dir.sync_dir().unwrap();
        a.append(b"durable").unwrap();
        a.sync().unwrap();
        a.append(b" lost").unwrap();
        let mut b = dir.create("b").unwrap();
        b.append(b"never named").unwrap();
        b.sync().unwrap();
        dir.power_cut();
        // Dead handles.
        assert!(a.append(b"x").is_err());
        assert!(b.sync().is_err());
        assert_eq!(dir.names(), ["a"]);
        assert_eq!(dir.file_bytes("a").unwrap(), b"durable");
    }

    #[test]
    fn power_cut_brings_back_a_removal_not_synced() {
        let dir = PowerCutDir::new();
        dir.create("a").unwrap().append(b"x").unwrap();
        dir.sync_dir().unwrap();
        dir.remove("a").unwrap();
        assert!(dir.names().is_empty());
        dir.power_cut();
        assert_eq!(dir.names(), ["a"]);
        dir.remove("a").unwrap();
        dir.sync_dir().unwrap();
        dir.power_cut();
        assert!(dir.names().is_empty());
    }

    #[test]
    fn a_failed_sync_poisons_later_syncs_until_cut_back() {
        let dir = PowerCutDir::new();
        let mut f = dir.create("a").unwrap();
        dir.sync_dir().unwrap();
        f.append(b"ok").unwrap();
        f.sync().unwrap();
        f.append(b"doubt").unwrap();
        dir.fail_next_sync();
        let err = f.sync().unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::EIO));
        // A retry "succeeds" and makes nothing durable.
        f.sync().unwrap();
        dir.power_cut();
        assert_eq!(dir.file_bytes("a").unwrap(), b"ok");

        let mut f = dir.open("a").unwrap();
        f.append(b"doubt").unwrap();
        dir.fail_next_sync();
        f.sync().unwrap_err();
        // Cutting back to the durable length clears the doubt.
        f.truncate(2).unwrap();
        f.append(b"!").unwrap();
        f.sync().unwrap();
        dir.power_cut();
        assert_eq!(dir.file_bytes("a").unwrap(), b"ok!");
    }

    #[test]
    fn append_faults_write_nothing_or_a_prefix() {
        let dir = PowerCutDir::new();
        let mut f = dir.create("a").unwrap();
        dir.fail_next_append_with(io::Error::from_raw_os_error(libc::ENOSPC));
        let err = f.append(b"abc").unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::ENOSPC));
        assert!(f.is_empty());
        dir.tear_next_append(2);
        f.append(b"abcdef").unwrap_err();
        assert_eq!(f.read_all().unwrap(), b"ab");
        dir.fail_next_truncate();
        f.truncate(0).unwrap_err();
        f.truncate(0).unwrap();
        f.append(b"xyz").unwrap();
        assert_eq!(f.read_all().unwrap(), b"xyz");
    }

    #[test]
    fn counting_dir_counts_syncs_of_all_files() {
        let tmp = tempfile::tempdir().unwrap();
        let counting = CountingDir::new(Arc::new(FsDir::new(tmp.path())));
        let counter = counting.syncs();
        let mut a = counting.create("a").unwrap();
        let mut b = counting.create("b").unwrap();
        a.append(b"1").unwrap();
        a.sync().unwrap();
        b.sync().unwrap();
        drop(b);
        counting.open("b").unwrap().sync().unwrap();
        // Directory syncs and truncates are not file syncs.
        counting.sync_dir().unwrap();
        a.truncate(0).unwrap();
        assert_eq!(counting.sync_count(), 3);
        assert_eq!(counter.load(std::sync::atomic::Ordering::Relaxed), 3);
    }
}
