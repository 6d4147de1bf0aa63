//! [`Watch`]: knowing that files have not changed without stat-ing them.
//!
//! A host checks before every query that the files its cached plan was made from still
//! stat the same: a few `statx` calls, 6% of its CPU in a point lookup. An inotify
//! watch on each of those files and their directories tells the same for the price of
//! one non-blocking `read`: the kernel queues an event inside the system call that
//! writes, renames, creates or deletes (before that call returns), so an event of any
//! change that finished before the check is in the queue when the check drains it.
//!
//! A [`WatchToken`] is taken before the files are stat-ed; [`Watch::unchanged`] is true
//! while no event touched any of its paths since. When anything is uncertain (a watch
//! could not be added, the queue overflowed, a watched path went away), it says false
//! and the caller stats as before. What inotify cannot see (a write through a shared
//! mapping, a change made by another machine on a network file system) is caught by
//! the caller stat-ing again once a token is older than its limit.

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, Read};
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

/// What counts as a change: contents, metadata, and entries created, deleted or moved
/// (of a directory), or the watched path itself deleted or moved. Reads and opens do
/// not count.
const CHANGES: u32 = libc::IN_MODIFY
    | libc::IN_ATTRIB
    | libc::IN_CLOSE_WRITE
    | libc::IN_CREATE
    | libc::IN_DELETE
    | libc::IN_MOVED_FROM
    | libc::IN_MOVED_TO
    | libc::IN_DELETE_SELF
    | libc::IN_MOVE_SELF;

/// Most paths watched; past it, tokens are refused (the caller stats).
const MAX_WATCHES: usize = 16_384;

/// Change events for watched paths. One per process is enough; it is `Sync`.
#[derive(Debug)]
pub struct Watch {
    inner: Mutex<Inner>,
    /// How long a token is trusted at most (see the module).
    max_age: Duration,
}

#[derive(Debug)]
struct Inner {
    inotify: File,
    /// Each watched path's watch descriptor, and back.
    by_path: HashMap<PathBuf, i32>,
    paths: HashMap<i32, PathBuf>,
    /// Each live watch descriptor's change count. A gone watch's count goes with it:
    /// a token holding it then finds none, so never matches (the kernel hands out
    /// descriptor numbers cyclically, not again until they wrap).
    changes: HashMap<i32, u64>,
    /// Times the event queue overflowed (every token taken before is stale).
    overflows: u64,
}

/// The state of some paths' watches at one moment; see [`Watch::token`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WatchToken {
    watches: Vec<(i32, u64)>,
    overflows: u64,
    taken: Instant,
}

impl Watch {
    /// A watch over nothing yet, trusting a token for `max_age` at most.
    pub fn new(max_age: Duration) -> io::Result<Watch> {
        let inotify = File::from(crate::sys::inotify_init()?);
        Ok(Watch {
            inner: Mutex::new(Inner {
                inotify,
                by_path: HashMap::new(),
                paths: HashMap::new(),
                changes: HashMap::new(),
                overflows: 0,
            }),
            max_age,
        })
    }

    /// Watches `paths` (those not watched yet) and returns where their changes stand
    /// now; `None` when one cannot be watched (gone, not local, too many watches).
    /// Take it before checking the paths otherwise (by stat), so that a change racing
    /// that check makes the token stale.
    pub fn token<'p>(&self, paths: impl IntoIterator<Item = &'p Path>) -> Option<WatchToken> {
        let mut inner = self.lock();
        inner.drain();
        let mut watches = Vec::new();
        for path in paths {
            // A path whose watch went (removed through another path of the same
            // file) is watched anew.
            let live =
                (inner.by_path.get(path).copied()).filter(|wd| inner.changes.contains_key(wd));
            let wd = match live {
                Some(wd) => wd,
                None => {
                    if inner.by_path.len() >= MAX_WATCHES {
                        return None;
                    }
                    let wd =
                        crate::sys::inotify_add_watch(inner.inotify.as_fd(), path, CHANGES).ok()?;
                    inner.by_path.insert(path.to_path_buf(), wd);
                    inner.paths.insert(wd, path.to_path_buf());
                    inner.changes.entry(wd).or_insert(0);
                    wd
                }
            };
            watches.push((wd, inner.changes.get(&wd).copied().unwrap_or(0)));
        }
        Some(WatchToken {
            watches,
            overflows: inner.overflows,
            taken: Instant::now(),
        })
    }

    /// Whether no watched path of `token` has changed since it was taken, and it is
    /// younger than the watch's limit.
    pub fn unchanged(&self, token: &WatchToken) -> bool {
        if token.taken.elapsed() > self.max_age {
            return false;
        }
        let mut inner = self.lock();
        inner.drain();
        inner.overflows == token.overflows
            && (token.watches.iter()).all(|(wd, n)| inner.changes.get(wd) == Some(n))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// How long the process's shared watch trusts a token: what inotify cannot see
/// (another machine's write on a network file system) is seen after this long at most.
pub const SHARED_TRUST: Duration = Duration::from_secs(1);

/// The process's watch, shared by every user in it (one inotify instance, of which a
/// user may have 128), trusting a token [`SHARED_TRUST`]; none where inotify is refused.
pub fn shared() -> Option<&'static Watch> {
    static SHARED: std::sync::OnceLock<Option<Watch>> = std::sync::OnceLock::new();
    SHARED
        .get_or_init(|| Watch::new(SHARED_TRUST).ok())
        .as_ref()
}

/// What to watch for a table: its files and directories (each `path` under `root`)
/// and the files' directories, each once.
pub fn table_paths<'v>(
    root: &Path,
    versions: impl IntoIterator<Item = &'v crate::msg::FileVersion>,
) -> Vec<PathBuf> {
    let mut paths = Vec::new();
    for v in versions {
        let path = root.join(&v.path);
        if let Some(parent) = path.parent() {
            paths.push(parent.to_path_buf());
        }
        paths.push(path);
    }
    paths.sort();
    paths.dedup();
    paths
}

impl Inner {
    /// Reads every queued event and counts it against its watch.
    fn drain(&mut self) {
        // Room for many events at once (each is 16 bytes and a name).
        let mut buf = [0u8; 4096];
        loop {
            let n = match self.inotify.read(&mut buf) {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                // Empty (`WouldBlock`), or an error: nothing more to count now. An
                // error other than empty also marks everything changed.
                Err(e) => {
                    if e.kind() != io::ErrorKind::WouldBlock {
                        self.overflows += 1;
                    }
                    return;
                }
            };
            let mut at = 0;
            while let Some(event) = buf[..n].get(at..at + 16) {
                let field = |i: usize| {
                    let mut b = [0u8; 4];
                    b.copy_from_slice(&event[i * 4..i * 4 + 4]);
                    b
                };
                let wd = i32::from_ne_bytes(field(0));
                let mask = u32::from_ne_bytes(field(1));
                let name_len = u32::from_ne_bytes(field(3)) as usize;
                let name = buf[..n]
                    .get(at + 16..at + 16 + name_len)
                    .unwrap_or_default();
                let name = &name[..name.iter().position(|&b| b == 0).unwrap_or(name.len())];
                at += 16 + name_len;
                if mask & libc::IN_Q_OVERFLOW != 0 {
                    self.overflows += 1;
                    continue;
                }
                if let Some(n) = self.changes.get_mut(&wd) {
                    *n += 1;
                }
                if mask & libc::IN_IGNORED != 0 {
                    // The watch is gone (its path deleted): watch the path anew next time.
                    self.changes.remove(&wd);
                    if let Some(path) = self.paths.remove(&wd) {
                        self.by_path.remove(&path);
                    }
                }
                let entries =
                    libc::IN_CREATE | libc::IN_DELETE | libc::IN_MOVED_FROM | libc::IN_MOVED_TO;
                if mask & entries != 0 && !name.is_empty() {
                    // A name in a watched directory now means another file (or none):
                    // its next token watches whatever the path holds then.
                    use std::os::unix::ffi::OsStrExt;
                    if let Some(dir) = self.paths.get(&wd) {
                        let child = dir.join(std::ffi::OsStr::from_bytes(name));
                        if let Some(old) = self.by_path.remove(&child) {
                            // The old file's watch goes too (its path is another file's
                            // now, or none); its `IN_IGNORED` drops its count.
                            if self.paths.remove(&old).is_some() {
                                let _ = crate::sys::inotify_rm_watch(self.inotify.as_fd(), old);
                            }
                        }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn watch() -> Watch {
        Watch::new(Duration::from_secs(60)).expect("inotify")
    }

    /// Each kind of change, made just before the check, is seen by it; reads are not
    /// changes.
    #[test]
    fn every_change_is_seen_and_reads_are_not() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("a.parquet");
        std::fs::write(&file, b"one").unwrap();
        let w = watch();
        let paths = || [dir.path(), file.as_path()];
        type Change<'a> = (&'static str, Box<dyn Fn() + 'a>);
        let changes: Vec<Change<'_>> = vec![
            (
                "append",
                Box::new(|| {
                    use std::io::Write;
                    let mut f = std::fs::OpenOptions::new()
                        .append(true)
                        .open(&file)
                        .unwrap();
                    f.write_all(b"more").unwrap();
                }),
            ),
            (
                "rewrite in place",
                Box::new(|| std::fs::write(&file, b"two").unwrap()),
            ),
            (
                "new file beside",
                Box::new(|| std::fs::write(dir.path().join("b"), b"x").unwrap()),
            ),
            (
                "rename over",
                Box::new(|| {
                    let tmp = dir.path().join("tmp");
                    std::fs::write(&tmp, b"three").unwrap();
                    std::fs::rename(&tmp, &file).unwrap();
                }),
            ),
            (
                "mtime set",
                Box::new(|| {
                    let f = File::options().write(true).open(&file).unwrap();
                    f.set_modified(std::time::SystemTime::UNIX_EPOCH).unwrap();
                }),
            ),
            (
                "delete beside",
                Box::new(|| std::fs::remove_file(dir.path().join("b")).unwrap()),
            ),
        ];
        for (what, change) in changes {
            let token = w.token(paths()).expect("watched");
            // Reading is not a change.
            std::fs::read(&file).unwrap();
            assert!(w.unchanged(&token), "{what}: a read counted as a change");
            change();
            assert!(!w.unchanged(&token), "{what}: not seen");
            let again = w.token(paths()).expect("watched again");
            assert!(w.unchanged(&again), "{what}: a new token is stale at once");
        }
    }

    /// A path that cannot be watched gives no token; a deleted and recreated file is
    /// watched anew; an old token expires.
    #[test]
    fn uncertain_cases_say_changed() {
        let dir = tempfile::tempdir().unwrap();
        let w = watch();
        assert!(w.token([dir.path().join("missing").as_path()]).is_none());
        let file = dir.path().join("f");
        std::fs::write(&file, b"1").unwrap();
        let token = w.token([file.as_path()]).unwrap();
        std::fs::remove_file(&file).unwrap();
        std::fs::write(&file, b"2").unwrap();
        assert!(!w.unchanged(&token));
        let fresh = w.token([file.as_path()]).unwrap();
        assert!(w.unchanged(&fresh));
        std::fs::write(&file, b"3").unwrap();
        assert!(!w.unchanged(&fresh), "the recreated file is watched");

        // A file renamed over is another inode: a token taken after watches that one.
        let tmp = dir.path().join("tmp");
        std::fs::write(&tmp, b"4").unwrap();
        let before = w.token([dir.path(), file.as_path()]).unwrap();
        std::fs::rename(&tmp, &file).unwrap();
        assert!(!w.unchanged(&before));
        let after = w.token([file.as_path()]).unwrap();
        assert!(w.unchanged(&after));
        std::fs::OpenOptions::new()
            .append(true)
            .open(&file)
            .unwrap()
            .set_len(9)
            .unwrap();
        assert!(!w.unchanged(&after), "the new inode is watched");

        // Files replaced again and again leave no watches behind.
        for round in 0..50 {
            std::fs::write(&tmp, format!("{round}")).unwrap();
            std::fs::rename(&tmp, &file).unwrap();
            let token = w.token([dir.path(), file.as_path()]).unwrap();
            assert!(w.unchanged(&token));
        }
        let inner = w.lock();
        assert!(
            inner.changes.len() <= 3 && inner.by_path.len() <= 3,
            "{} counts, {} paths kept",
            inner.changes.len(),
            inner.by_path.len()
        );
        drop(inner);

        let short = Watch::new(Duration::from_millis(20)).unwrap();
        let token = short.token([dir.path()]).unwrap();
        assert!(short.unchanged(&token));
        std::thread::sleep(Duration::from_millis(30));
        assert!(
            !short.unchanged(&token),
            "a token past its age is not trusted"
        );
    }
}
